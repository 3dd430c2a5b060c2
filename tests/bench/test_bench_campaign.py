"""bench/campaign_scale runs end to end at a tiny size (a hang guard; the real figures,
1,024 nodes x 10 runs, are in docs/performance.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import ROOT


def test_campaign_bench_adds_reports_and_gates(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "campaign_scale"), "--nodes", "24", "--runs", "3",
         "--repeat", "1", "--milestone", "week2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    for week in (1, 2, 3):
        assert f"add week {week}" in r.stdout
    assert "report --html" in r.stdout and "gate --milestone week2" in r.stdout
    assert (tmp_path / "c.html").is_file() and (tmp_path / "gate.xml").is_file()
    lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip().startswith("add week")]
    assert all(row[6] == "0" for row in lines), r.stdout  # every add exited 0
