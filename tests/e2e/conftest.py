"""tests/e2e/:

Real agent processes over loopback sockets, driven through the CLI or the coordinator:
runs, resume, retest, pre-flight, progress, stop signals.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # ``pytest -m e2e`` selects this folder's tests wherever they are collected from.
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.e2e)
