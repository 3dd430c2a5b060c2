"""tests/security/:

Hostile and broken peers and files: forged or replayed measurements, hostile text,
fuzzed protocol and inputs, unsafe output paths. Real processes where the attack
crosses a socket.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # ``pytest -m security`` selects this folder's tests wherever they are collected from.
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.security)
