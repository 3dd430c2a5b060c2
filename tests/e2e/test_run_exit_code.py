"""`run` measures, `gate` judges: a run that completed exits 0 whatever the verdicts
(README, "run exits 0 whenever the run completed"). So a test of a completed run asserts
exit 0 exactly: 1 is never a verdict, it is Python's exit code for a crash."""

from __future__ import annotations

import json
from pathlib import Path

from agentpool import AgentPool
from e2e_cli import netqual_here, write_inventory

PLAN = ["--iterations", "300", "--warmup", "20", "--no-bulk", "--allow-short-plan"]


def test_a_run_of_unsafe_paths_exits_0_and_its_gate_exits_1(
    agents: AgentPool, tmp_path: Path
) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    # A line no round trip can be under (1 ns): every path unsafe however quiet the host.
    policy = tmp_path / "policy.toml"
    policy.write_text("[policy]\nsafe_max_us = 0.001\nunsafe_above_us = 0.002\n")
    out = tmp_path / "out"
    done = netqual_here("run", str(inventory), "--out", str(out), "--policy", str(policy), *PLAN)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    doc = json.loads((out / "results.json").read_text())
    assert [p["verdict"] for p in doc["paths"]] == ["unsafe"] * 3
    assert all(p["error"] is None for p in doc["paths"])
    assert "0 of 3 paths offload-safe; 3 unsafe" in " ".join(done.stdout.split()), done.stdout
    gate = netqual_here("gate", str(out))
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "GATE FAILED" in gate.stdout
