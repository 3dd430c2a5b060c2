"""bench/scale and bench/many_agents run end to end with tiny sizes (hang guards; their
numbers are in docs/performance.md, never asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paths import REPO

ROOT = REPO


def _run(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout_s, env=env,
        cwd=ROOT, check=False,
    )  # fmt: skip


def test_scale_plans_and_times_the_commands(tmp_path: Path) -> None:
    r = _run(
        "bench/scale", "--nodes", "40", "--results", "24", "--out", str(tmp_path), timeout_s=300
    )
    assert r.returncode == 0, r.stderr
    assert "    40  full-mesh      39        780" in r.stdout
    assert "synthetic 24 nodes: 276 paths" in r.stdout
    rows = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines() if ln.startswith(" ")}
    assert rows["gate"][-1] == "1"  # the synthetic run has a slow node: the gate fails
    assert rows["diff"][-1] == "0"
    doc = json.loads((tmp_path / "results-24.json").read_text())
    assert len(doc["paths"]) == 276


def test_many_agents_measures_every_pair_once(tmp_path: Path) -> None:
    r = _run(
        "bench/many_agents", "--agents", "4", "--iterations", "100", "--warmup", "10",
        "--out", str(tmp_path / "run"), timeout_s=400,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "agents 4  pairs 6" in r.stdout
    assert "every pair exactly once in results.jsonl and results.json: True" in r.stdout
