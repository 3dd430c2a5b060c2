"""tests/env/:

Needs something from the environment: root and network namespaces (lab), the qemu
Soft-RoCE guest, Slurm, Prometheus, headless Chromium, an RDMA device, a wheel build.
Each skips with the reason where its environment is missing; slow engines start once
per session.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def results_1024(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1,024-node full mesh's results.json (bench/scale.py's synthetic file: 523,776
    paths, 32 racks, one node and one rack pair bad): built once a session, ~2 s."""
    import sys

    from paths import REPO

    sys.path.insert(0, str(REPO / "bench"))
    from scale import synthetic_results

    path = tmp_path_factory.mktemp("results1024") / "results.json"
    synthetic_results(path, 1024)
    return path


@pytest.fixture(scope="session")
def report_1024(tmp_path_factory: pytest.TempPathFactory, results_1024: Path) -> Path:
    """``results_1024``'s report.html, as `netqual report` writes it: rendered once a
    session for every browser test that reads it (loading the 190 MB file takes ~7 s of
    CPU, rendering ~2 s: docs/performance.md; each module rendered its own)."""
    from netqual.report import write_html
    from netqual.results import load

    page = tmp_path_factory.mktemp("report1024") / "report.html"
    write_html(load(results_1024), page)
    return page
