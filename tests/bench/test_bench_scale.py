"""bench/scale and bench/many_agents run end to end with tiny sizes (hang guards; their
numbers are in docs/performance.md, never asserted here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
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


@pytest.mark.slow  # seven runs, three of one pair, and 6 pairs with 16 MiB of bulk each
def test_many_agents_bulk_prints_estimate_vs_actual_per_phase(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # 8 MiB a bulk cell (128 chunks of 64 KiB), not 128: the model's constants are rates
    # (goodput, seconds per wave) whatever the bytes, and what is checked is how they are
    # derived and printed; 256 MiB a pair moved 3 GiB through loopback over its seven runs
    short = ["--iterations", "200", "--warmup", "20", "--allow-short-plan", "--bulk-bytes", "8MiB"]
    r = _run(
        "bench/many_agents", "--agents", "4", "--bulk", "--calibrations", "1", "--out", str(out),
        *(f"--run-arg={a}" for a in short), timeout_s=400,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "calibration before (medians of 1): one pair: request " in r.stdout
    assert "calibration after (medians of 1): one pair: request " in r.stdout
    assert "2 pairs at once take x" in r.stdout  # the batch: every agent in one of n/2 pairs
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines() if ln.split()}
    recorded = json.loads((out / "estimate.json").read_text())
    model = recorded["model"]["before"]
    assert model["shared_cores"] == len(os.sched_getaffinity(0))
    assert len(recorded["calibrations"]["bracket"]) == 2  # one before, one after
    (cal,) = recorded["calibrations"]["before"]
    # 220 round trips, and a tenth of them for the short run; 2 pairs in the batch, and its
    # bulk in one wave of both (every agent in one rack of a non-blocking fabric)
    assert (cal["trips"], cal["short_trips"]) == (220, 22)
    assert cal["batch_pairs"] == 2 and cal["batch_wave_pairs"] == 2
    for key in ("one_pingpong_s", "short_pingpong_s", "one_bulk_s", "batch_pingpong_s"):
        assert cal[key] > 0, key
    # the cores a pair needs: how much longer the batch took than the pair alone, times
    # the cores, over the pairs at once
    cores = len(os.sched_getaffinity(0))
    derived = {
        "pingpong": cal["batch_pingpong_s"] / cal["one_pingpong_s"] * cores / 2,
        "bulk": cal["batch_wave_s"] / cal["one_bulk_s"] * cores / 2,
        "preflight": cal["preflight_cores"],
    }
    for phase, want in derived.items():
        assert model["pair_cores"][phase] == pytest.approx(min(cores, max(0.05, want)), abs=1e-3), (
            phase
        )
    # what each further agent adds to the pre-flight: the 4-agent run's less the pair's
    assert model["check_each_s"] == pytest.approx(cal["check_each_s"]) and cal["check_each_s"] >= 0
    assert re.search(r"agents and coordinator run from (\S+)/netqual \(a copy\)", r.stdout)
    actual = json.loads((out / "results.json").read_text())["run"]["schedule"]["actual"]
    for phase in ("preflight", "pingpong", "bulk", "interference", "total"):
        figures = recorded["phases"][phase]
        if phase != "total":
            assert figures["actual_s"] == actual[f"{phase}_s"]
        assert figures["cluster_s"] <= figures["shared_s"]  # sharing never makes it faster
        ratio = figures["actual_s"] / figures["shared_s"]
        assert float(rows[phase][3]) == pytest.approx(ratio, abs=0.006), phase
        bracket = figures["actual_s"] / figures["bracket_s"]
        assert float(rows[phase][5]) == pytest.approx(bracket, abs=0.006), phase
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["plan"]["iterations"] == 200  # --run-arg reached the run


def test_scale_prices_the_intervals_of_every_percentile(tmp_path: Path) -> None:
    r = _run(
        "bench/scale", "--nodes", "8", "--ci95-cost", "24", "--repeats", "1",
        "--out", str(tmp_path), timeout_s=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "ratio all/legacy: size " in r.stdout
    legacy = json.loads((tmp_path / "results-24-legacy.json").read_text())["paths"]
    every = json.loads((tmp_path / "results-24-all.json").read_text())["paths"]
    measured = [p for p in every if p["rtt_us"] is not None]
    assert all(sorted(p["rtt_us"]["ci95_by_metric"]) == ["p50", "p90", "p99", "p999"]
               for p in measured)  # fmt: skip
    assert all(p["rtt_us"]["ci95"]["metric"] == "p99" for p in legacy if p["rtt_us"])
