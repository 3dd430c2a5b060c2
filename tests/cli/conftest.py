"""tests/cli/:

What a user sees from one command, run in-process (cli_helpers.run_in_process) or as
a child process on files the test writes: output pinned at NETQUAL_WIDTH, exit codes,
files written. No agents. Fast lane with unit/.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # ``pytest -m cli`` selects this folder's tests wherever they are collected from.
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.cli)
