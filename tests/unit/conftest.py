"""tests/unit/:

One layer at a time, in-process: records, rules, codecs, planning, fakes of the layer
below (fake verbs, sysfs trees the test builds). No agent processes, no root. Put a
test in unit/<package>/ after the netqual package it tests. Fast lane with cli/.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # ``pytest -m unit`` selects this folder's tests wherever they are collected from.
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.unit)
