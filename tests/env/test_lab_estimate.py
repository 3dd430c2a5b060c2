"""Estimates that learn, in the real lab (network namespaces; needs root): the default
topology (issue 36: estimated 16-27 s for runs of 75-149 s) and a rails run whose NICs are
shaped to 500 Mbit/s with ``nic_gbps = 0.5`` in the inventory (estimated at 100 Gbit/s).
One run calibrates ``run --dry-run --calibrate-from``; the next run, back to back, must
take within +-35% (at least +-0.5 s: the printed range) of the estimate per phase, at the
calibrating run's rates: here the fabric's delays and rates set most of the times, but
the round trips and goodput the lab measures still move with the shared host's load, and
the estimate prices a plan from the rates it was given (each run's work per phase at its
own rates is in results.json's schedule). The interference check is left out
(``--interference-sample 0``): it re-measures a random sample, and the lab's tiers
differ 20x in round trip. The engine phase (``--engine mooncake``, three hosts) is set
by the engine workers' start-up, CPU work on this shared host: see its test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from netqual import lab
from netqual.agent.engine_serve import installed
from netqual.lab.layout import prefix_for
from netqual.model.engine import EngineName

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]
TOPOLOGIES = Path(lab.default_topology_path()).parent


def netqual(*args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netqual", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)


def _calibrate_then_run(inventory: Path, ctl: str, plan: list[str], tmp: Path) -> list[str]:
    """Run, dry-run calibrated by it, run again; the phases outside the printed range."""
    first, second = tmp / "first", tmp / "second"
    r = netqual("run", str(inventory), "--out", str(first), *plan, netns=ctl)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    dry = netqual(
        "run", str(inventory), *plan, "--dry-run", "--json", "--calibrate-from", str(first)
    )
    assert dry.returncode == 0, dry.stderr
    est: dict[str, Any] = json.loads(dry.stdout)["estimate"]["phases"]
    before = json.loads((first / "run.json").read_text())["phases"]
    r = netqual("run", str(inventory), "--out", str(second), *plan, netns=ctl)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    after = json.loads((second / "run.json").read_text())["phases"]
    # each run's work per phase at the rates it measured (the model's part; the rest of a
    # phase's time is the run's own overhead, which calibration carries over as a factor)
    work = [_work_s(first), _work_s(second)]
    (tmp / "estimate.txt").write_text(
        json.dumps({"estimate": est, "run": after, "work_s": work}, indent=1)
    )
    missed = []
    for phase in ("preflight", "pingpong", "bulk"):
        e = est[phase]
        # what it guarantees: the calibrating run's own time, for the same plan
        assert e["seconds"] == pytest.approx(before[phase]["actual_s"], rel=0.01, abs=0.002)
        # the next run, at the first run's rates: the round trips and goodput the shared
        # host lets the lab measure move with its load (under CI's lanes the ping-pong's
        # measured work grew 18% from one run to the next, 7.16 to 8.42 s, and the phase
        # took 11.2 s of an estimated 7.5); the estimate prices the plan from the rates it
        # was given, and that, with the run's own overhead, is what is judged here
        took = after[phase]["actual_s"] * _ratio(work[0].get(phase), work[1].get(phase))
        if not e["low_s"] <= took <= e["high_s"]:
            missed.append(
                f"{phase}: estimate {e}, took {after[phase]['actual_s']} s "
                f"({took:.3f} s at the first run's rates; work {work})"
            )
    return missed


def _work_s(run_dir: Path) -> dict[str, float]:
    """The run's work per phase at its own measured rates (results.json's schedule)."""
    doc = json.loads((run_dir / "results.json").read_text())
    work: dict[str, float] = doc["run"]["schedule"]["calibration"]["work_s"]
    return work


def _ratio(first: float | None, second: float | None) -> float:
    """first / second where both are positive, else 1 (a phase with no work modelled)."""
    return first / second if first and second and first > 0 and second > 0 else 1.0


def test_default_topology_once_calibrated(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load_default(), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    plan = ["--iterations", "1000", "--warmup", "100", "--chunk", "64KiB", "--depth", "8"]
    plan += ["--allow-short-plan", "--interference-sample", "0", "--progress", "none"]
    ctl = f"{prefix_for(state_dir)}-ctl"
    assert _calibrate_then_run(info.inventory_path, ctl, plan, tmp_path) == []


def test_rails_at_the_stated_nic_rate_once_calibrated(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    text = (TOPOLOGIES / "two-rails.toml").read_text()
    shaped = tmp_path / "rails500.toml"
    shaped.write_text(text.replace("\nrail = 0\n", "\nrail = 0\nrate_mbit = 500\n").replace(
        "\nrail = 1\n", "\nrail = 1\nrate_mbit = 500\n"
    ))  # fmt: skip
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(shaped), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(
        info.inventory_path.read_text().replace(
            '\nrack = "r1"\n', '\nrack = "r1"\nnic_gbps = 0.5\n'
        )
    )
    plan = ["--iterations", "2000", "--warmup", "200", "--chunk", "64KiB", "--depth", "8"]
    plan += ["--allow-short-plan", "--interference-sample", "0", "--progress", "none"]
    stated = netqual("run", str(inventory), *plan, "--dry-run")
    assert "bulk request at <= 0.5 Gbit/s" in " ".join(stated.stdout.split()), stated.stdout
    assert "one pass over 4 agents" in stated.stdout and "nodes 4 (" not in stated.stdout
    ctl = f"{prefix_for(state_dir)}-ctl"
    assert _calibrate_then_run(inventory, ctl, plan, tmp_path) == []


def _three_hosts(tmp: Path) -> Path:
    """four-hosts.toml without h4: three paths, each through the fetch engine."""
    text = (TOPOLOGIES / "four-hosts.toml").read_text()
    text = text.replace('[[host]]\nname = "h4"\nrack = "r1"\n', "")
    text = text.replace('[[link]]\na = "h4"\nb = "sw"\n', "")
    assert "h4" not in text
    path = tmp / "three-hosts.toml"
    path.write_text(text)
    return path


def _engine_phase(inventory: Path, plan: list[str], out: Path, ctl: str) -> float:
    r = netqual("run", str(inventory), "--out", str(out), *plan, netns=ctl)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    phase = json.loads((out / "run.json").read_text())["phases"]["engine"]
    assert phase["estimate_s"] > 0  # the run expected it: never silently zero
    return float(phase["actual_s"])


def _calibrated(inventory: Path, plan: list[str], *runs: Path) -> dict[str, Any]:
    froms = [x for run in runs for x in ("--calibrate-from", str(run))]
    dry = netqual("run", str(inventory), *plan, "--dry-run", "--json", *froms)
    assert dry.returncode == 0, dry.stderr
    phase: dict[str, Any] = json.loads(dry.stdout)["estimate"]["phases"]["engine"]
    assert phase["calibrated_by"] == len(runs)
    return phase


def test_the_engine_phase_once_calibrated(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Three paths through Mooncake (three hosts of four-hosts.toml), a short plan. The
    phase is the engine workers' start-up and teardown on this host's CPU (2-2.6 s a path
    here), so the next run's time moves with the host's load. Calibrated by one run, the
    estimate is that run's time (guaranteed), and the next run must fall within its printed
    range (+-35%, at least +-0.5 s). On a host whose load moves the engine's start-up by
    more between two runs than that, the run's own spread is what a range can know: the
    estimate calibrated by both runs (the range spans both, docs/scale.md) must then hold
    a third, never a bound that depends on the load."""
    if (problem := installed(EngineName.MOONCAKE)) is not None:
        pytest.skip(problem)
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(_three_hosts(tmp_path)), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    plan = ["--iterations", "500", "--warmup", "50", "--chunk", "64KiB", "--depth", "1"]
    plan += ["--allow-short-plan", "--interference-sample", "0", "--progress", "none"]
    plan += ["--engine", "mooncake"]
    ctl, inv = f"{prefix_for(state_dir)}-ctl", info.inventory_path
    runs = [tmp_path / "run1"]
    took = [_engine_phase(inv, plan, runs[0], ctl)]
    est = _calibrated(inv, plan, *runs)
    assert est["seconds"] == pytest.approx(took[0], rel=0.01, abs=0.002)
    text = " ".join(netqual("run", str(inv), *plan, "--dry-run", "--calibrate-from",
                            str(runs[0])).stdout.split())  # fmt: skip
    assert "calibrated by 1 earlier run (its measured seconds per item" in text
    runs.append(tmp_path / "run2")
    took.append(_engine_phase(inv, plan, runs[1], ctl))
    log = [{"calibrated_by": 1, "estimate": est, "next_run_s": took[1]}]
    if not est["low_s"] <= took[1] <= est["high_s"]:
        est = _calibrated(inv, plan, *runs)
        runs.append(tmp_path / "run3")
        took.append(_engine_phase(inv, plan, runs[2], ctl))
        log.append({"calibrated_by": 2, "estimate": est, "next_run_s": took[2]})
    (tmp_path / "engine-estimate.txt").write_text(json.dumps(log, indent=1))
    assert est["low_s"] <= took[-1] <= est["high_s"], log
