"""Real agents on loopback record the counters of every probe phase and the interface that
carried it (docs/evidence.md "Counters")."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool
from e2e_cli import netqual_here, write_inventory

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
    done = netqual_here("run", str(inventory), "--out", str(out), *SMALL_PLAN, "--allow-short-plan")
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


def test_a_responder_late_with_its_counters_leaves_the_probe_in_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The responder answers ``counters.begin`` after the source stopped waiting (a loaded
    emulated guest took longer than ProbeWindow.WAIT_S): its late ``ok`` must not be read
    as the answer to the probe's first request (CI's guest once failed a fan-in rank with
    "expected 'rdma.accepted', got 'ok'"). The probe goes on over a fresh session and
    measures; the window says nothing rather than something of the wrong socket."""
    from netqual.agent import counters
    from netqual.agent.probe_request import request_probe
    from netqual.agent.server import Agent
    from netqual.model.limits import AgentLimits
    from netqual.model.node import Node
    from netqual.transports import TransportKind

    late_s, waited_s = 1.0, 0.3
    serve = counters.serve
    asked: list[str] = []

    def slow(ch: Any, kind: str, body: Any, counting: counters.Counting) -> None:
        asked.append(kind)
        if kind == "counters.begin":
            time.sleep(late_s)  # then answers ``ok``, as a slow agent does
        serve(ch, kind, body, counting)

    monkeypatch.setattr(counters, "serve", slow)
    monkeypatch.setattr(counters.ProbeWindow, "WAIT_S", waited_s)
    agents = [Agent("127.0.0.1", 0, None, name=n, limits=AgentLimits()) for n in ("a", "b")]
    ports = [agent.bind()[1] for agent in agents]  # a's, b's
    threads = [threading.Thread(target=a.serve_forever, daemon=True) for a in agents]
    for t in threads:
        t.start()
    try:
        src, dst = (
            Node(name=n, address="127.0.0.1", port=p) for n, p in zip("ab", ports, strict=True)
        )
        plan = ProbePlan(iterations=300, warmup=30, chunks_bytes=(65536,), depths=(1,))
        got = request_probe(src, dst, TransportKind.TCP, plan, None, 60.0)
    finally:
        for a in agents:
            a.stop()
        for t in threads:
            t.join(5)
    assert asked[:1] == ["counters.begin"]  # the source asked, and was answered late
    raw = got.raw
    assert len(raw.rtt_ns) == 300 and [b.error for b in raw.bulk] == [None]
    assert "counters" not in raw.details  # no window: its socket is not the probe's
