"""``netqual check --fleet`` against real agent processes on 127.0.0.1 (no root): every
agent answers its configuration snapshot, same host so no outlier; a policy expectation
no node meets names every node and the key (exit 1); a bad ``[fleet]`` is a one-line
error naming the field (exit 2) before any agent is asked. The lab version, with one
host's MTU really lowered, is tests/env/test_lab_fleet.py."""

from __future__ import annotations

import json
from pathlib import Path

from agentpool import AgentPool
from e2e_cli import netqual_here, write_inventory


def test_check_fleet_snapshot_expectations_and_policy_errors(
    agents: AgentPool, tmp_path: Path
) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)

    same = netqual_here("check", str(inventory), "--fleet")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "Configuration" in same.stdout and "outlier" not in same.stdout
    mtu_row = next(line for line in same.stdout.splitlines() if line.startswith("mtu "))
    assert "(all 2)" in mtu_row  # one host: one value, both nodes
    doc = json.loads(netqual_here("check", str(inventory), "--fleet", "--json").stdout)
    assert set(doc["fleet"]["snapshot"]) == {"gpu01", "gpu02"}
    assert doc["fleet"]["snapshot"]["gpu01"]["netqual"] == doc["coordinator_version"]
    assert doc["fleet"]["outliers"] == []

    policy = tmp_path / "policy.toml"
    policy.write_text('[policy]\nmetric = "p99"\n[fleet]\ntcp_congestion_control = "nope"\n')
    expected = netqual_here("check", str(inventory), "--fleet", "--policy", str(policy))
    assert expected.returncode == 1, expected.stdout + expected.stderr
    # one deviation of both nodes: one line naming both (not one line per node)
    said = [x.strip() for x in expected.stdout.splitlines() if "outlier" in x]
    assert len(said) == 1 and said[0].startswith("outlier gpu01, gpu02: tcp_congestion_control")
    assert "(expected nope)" in expected.stdout

    policy.write_text('[policy]\nmetric = "p99"\n[fleet]\nmtus = 9000\n')
    bad = netqual_here("check", str(inventory), "--fleet", "--policy", str(policy))
    assert bad.returncode == 2
    assert (
        bad.stderr.strip()
        .splitlines()[0]
        .startswith(f"error: {policy}: fleet.mtus: unknown fleet key")
    ), bad.stderr
