"""A rails run's pre-flight connects to every NIC endpoint (real agents on loopback): a NIC
address the agent does not listen on makes the paths through it "not measured
(configuration)", naming the NIC and the error, never ``unsafe`` (docs/rails.md). A re-test,
which has no pre-flight, gets the same from the probe itself.

Each agent listens on one loopback address only (a on 127.0.0.11, ...); node c's inventory
NIC is 127.0.0.23, an address of this host where nothing listens (once: paths ``unsafe``
with "connection refused")."""

from __future__ import annotations

import json
from pathlib import Path

from agentpool import AgentPool
from e2e_cli import netqual_here

POLICY = """[policy]
metric = "p99"
safe_max_us = 100000.0
unsafe_above_us = 200000.0
min_samples = 100
"""


def test_a_nic_address_nobody_listens_on_is_not_measured_configuration_not_unsafe(
    tmp_path: Path, agents: AgentPool, token_file: Path
) -> None:
    listen = {"a": "127.0.0.11", "b": "127.0.0.12", "c": "127.0.0.13"}
    nic = {"a": "127.0.0.11", "b": "127.0.0.12", "c": "127.0.0.23"}
    a, b, c = agents.start_many([(n, "--listen", f"{listen[n]}:0") for n in listen])
    lines = [f'[defaults]\ntoken_file = "{token_file}"\n']
    for agent in (a, b, c):
        lines += [
            "[[node]]",
            f'name = "{agent.name}"',
            f'address = "{listen[agent.name]}"',
            f"port = {agent.port}",
            'rack = "r1"',
            f'nics = [{{ name = "lo", address = "{nic[agent.name]}", rail = 0 }}]',
            "",
        ]
    inventory = tmp_path / "inventory.toml"
    inventory.write_text("\n".join(lines))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)

    check = netqual_here("check", str(inventory))
    assert check.returncode == 0, check.stdout + check.stderr  # every agent is fine
    text = " ".join(check.stdout.split())
    assert "NIC lo (127.0.0.23: connection refused at 127.0.0.23:" in text, check.stdout
    assert "the agent listens on 127.0.0.13 only" in text

    out = tmp_path / "run"
    run = netqual_here(
        "run", str(inventory), "--rails", "same", "--out", str(out), "--iterations", "200",
        "--warmup", "20", "--no-bulk", "--allow-short-plan", "--interference-sample", "0",
        "--policy", str(policy),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    (measured,) = doc["paths"]  # a to b: both NICs reachable
    assert (measured["src"], measured["dst"], measured["error"]) == ("a/lo", "b/lo", None)
    skipped = sorted((m["src"], m["dst"], m["kind"]) for m in doc["not_measured"])
    assert skipped == [("a/lo", "c/lo", "configuration"), ("b/lo", "c/lo", "configuration")]
    for m in doc["not_measured"]:
        assert m["reason"].startswith("NIC lo of c failed the pre-flight check: 127.0.0.23:")
        assert "connection refused" in m["reason"]
    assert "not measured (configuration)" in " ".join(run.stdout.split())
    assert not any(s["subject"].startswith(("a", "b")) for s in doc.get("suspects", []))

    # a re-test has no pre-flight: the probe's own refused connection is the configuration's
    again = tmp_path / "retest"
    retest = netqual_here(
        "retest", str(out), "--path", "a/lo:c/lo", "--out", str(again), "--iterations", "200"
    )
    assert retest.returncode == 0, retest.stdout[-2000:] + retest.stderr[-2000:]
    redone = json.loads((again / "results.json").read_text())
    assert redone["paths"] == []
    (m,) = redone["not_measured"]
    assert (m["src"], m["dst"], m["kind"]) == ("a/lo", "c/lo", "configuration")
    assert "NIC endpoint" in m["reason"] and "Connection refused" in m["reason"], m
