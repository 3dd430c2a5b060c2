"""Real agents on loopback record the counters of every probe phase and the interface that
carried it (docs/evidence.md "Counters")."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from agentpool import AgentPool
from e2e_cli import netqual_cli, write_inventory

from netqual.analysis import counter_evidence
from netqual.files import schema
from netqual.model.details import unregistered
from netqual.model.plan import ProbePlan

SMALL_PLAN = ["--iterations", "2000", "--warmup", "200", "--chunk", "64KiB", "--depth", "1"]


def test_real_agents_record_which_interface_carried_each_phase(
    agents: AgentPool, tmp_path: Path
) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    out = tmp_path / "out"
    done = netqual_cli("run", str(inventory), "--out", str(out), *SMALL_PLAN, "--allow-short-plan")
    assert done.returncode == 0, done.stderr  # a completed run, whatever its verdicts
    doc = json.loads((out / "results.json").read_text())
    schema.validate(doc, "results.json")
    plan = ProbePlan(iterations=2000, warmup=200, chunks_bytes=(65536,), depths=(1,))
    # Ping-pong and bulk run as two requests (the bulk one with a single ping): both add up.
    pingpong = counter_evidence.probe_bytes(replace(plan, bulk=False))
    bulk = counter_evidence.probe_bytes(replace(plan, iterations=1, warmup=0))
    for p in doc["paths"]:
        c = p["details"]["counters"]
        assert c["probe_bytes"] == pingpong + bulk
        for end in ("src", "dst"):
            lo = c[end]["interfaces"]["lo"]
            # Both agents share this host's lo: each side sees at least the payload.
            assert lo["tx_bytes"] + lo["rx_bytes"] >= c["probe_bytes"], (end, c)
            # Loopback on a loaded host retransmits now and then (tail loss probes after a
            # stall): a count, never attributed as loss at that rate.
            assert lo["tx_packets"] > 0 and c[end]["tcp_retrans"] >= 0
            assert isinstance(c[end]["shared"], bool)
        assert p["details"]["carried_by"] == {"src": "lo", "dst": "lo", "problem": None}
        assert unregistered(p["details"]) == []  # every key in netqual/model/details.py
