"""tests/env/:

Needs something from the environment: root and network namespaces (lab), the qemu
Soft-RoCE guest, Slurm, Prometheus, headless Chromium, an RDMA device, a wheel build.
Each skips with the reason where its environment is missing; slow engines start once
per session.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # ``pytest -m env`` selects this folder's tests wherever they are collected from.
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.env)
