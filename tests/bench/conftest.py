"""tests/bench/:

bench/ scripts run end to end at tiny sizes (hang guards and table format). The
figures themselves are measured by the scripts, not asserted here.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # ``pytest -m bench`` selects this folder's tests wherever they are collected from.
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.bench)
