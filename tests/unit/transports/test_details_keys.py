"""Every key a probe writes in a path's ``details`` is in the registry
(netqual/model/details.py), nested objects included, and has the registry's type: whole
``netqual run``s over real agents (threads, on loopback) with TCP and with RDMA on the
fake verbs, and a fetch profile's probe over each transport (``details.fetch``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_in_process
from rdma_fakeverbs import Fabric, module

from netqual.agent.probe_request import request_probe
from netqual.agent.wire.protocol import connect
from netqual.base.units import KIB
from netqual.codec.details import check
from netqual.model.details import DETAILS, unregistered
from netqual.model.limits import AgentLimits
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.results import load
from netqual.transports import TransportKind
from netqual.transports.rdma import verbs
from netqual.transports.rdma.transport import RdmaTransport

Start = Callable[..., list[int]]
SMALL = ["--iterations", "200", "--warmup", "20", "--chunk", "64KiB", "--depth", "1"]


@pytest.fixture
def start_agents() -> Iterator[Start]:
    """``start_agents("a", "b", ...)``: real netqual agents (threads, no token) on
    127.0.0.1; their ports. Every one is stopped after the test."""
    from netqual.agent.server import Agent

    running: list[tuple[Agent, threading.Thread]] = []

    def start(*names: str) -> list[int]:
        ports = []
        for name in names:
            agent = Agent("127.0.0.1", 0, None, name=name, limits=AgentLimits())
            ports.append(agent.bind()[1])
            thread = threading.Thread(target=agent.serve_forever, daemon=True)
            thread.start()
            running.append((agent, thread))
        return ports

    yield start
    for agent, thread in running:
        agent.stop()
        thread.join(5)


def _registered(details: Mapping[str, Any]) -> None:
    assert unregistered(details) == [], sorted(details)
    check(details)  # every value of the type the registry says


def _run(
    start: Start, tmp_path: Path, mp: pytest.MonkeyPatch, capsys: Any, *extra: str
) -> list[dict[str, Any]]:
    """A whole ``netqual run`` over new agents (n1, n2 in rack a, n3 in b): the paths of
    results.json, every one measured and its details registered; the file reads them back
    as written."""
    names = [f"n{i}" for i in range(1, 4)]
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(
        "".join(
            f'[[node]]\nname = "{n}"\naddress = "127.0.0.1"\nport = {p}\nrack = "{r}"\n\n'
            for n, p, r in zip(names, start(*names), "aab", strict=True)
        )
    )
    out = tmp_path / "out"
    args = ["run", str(inventory), "--out", str(out), "--insecure", *SMALL, "--allow-short-plan"]
    r = run_in_process([*args, *extra], tmp_path, mp, capsys)
    assert r.returncode == 0, r.stderr  # a completed run, whatever its verdicts
    paths: list[dict[str, Any]] = json.loads((out / "results.json").read_text())["paths"]
    assert len(paths) == 3  # n1 -> n2, n1 -> n3, n2 -> n3
    for path in paths:
        assert path["error"] is None, path["error"]
        _registered(path["details"])
    back = load(out / "results.json")
    assert [back.paths.details[i] for i in range(3)] == [p["details"] for p in paths]
    return paths


def test_a_tcp_runs_details_are_all_registered(
    start_agents: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # one of the two paths between the racks gets no bulk reads (details.bulk_pairs)
    paths = _run(start_agents, tmp_path, monkeypatch, capsys, "--bulk-pairs", "per-rack-pair:1")
    written = {k for p in paths for k in p["details"]}
    # the transport's, the agent's counters, the coordinator's (both phases, their waves)
    assert written >= {
        "tcp_nodelay", "size_bytes", "counters", "initiator", "carried_by",
        "phase_windows_s", "pingpong_counters", "bulk_wave_pairs", "bulk_pairs",
    }, written  # fmt: skip


def test_an_incast_runs_details_are_all_registered(
    start_agents: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    paths = _run(start_agents, tmp_path, monkeypatch, capsys, "--incast", "2")
    assert any("incast_readers" in p["details"] for p in paths), paths


def test_a_tcp_fetch_profiles_details_are_registered(start_agents: Start) -> None:
    """Through the initiating agent (its counters too): the profile's further connections."""
    a, b = start_agents("fa", "fb")
    plan = ProbePlan(
        iterations=1, warmup=0, chunks_bytes=(192 * KIB,), depths=(64,), bulk_bytes=0,
        min_reads=4, timeout_s=60, fetch_profile="mooncake",
    )  # fmt: skip
    src, dst = Node("fa", "127.0.0.1", port=a), Node("fb", "127.0.0.1", port=b)
    out = request_probe(src, dst, TransportKind.TCP, plan, None, 75.0)
    assert set(out.raw.details["fetch"]) == {
        "profile", "slice_bytes", "slices_per_chunk", "slices_in_flight", "round_trips",
        "connections_used",
    }  # fmt: skip
    _registered(out.raw.details)


@pytest.mark.parametrize("fabric", ["python"], indirect=True)
def test_an_rdma_runs_details_are_all_registered(
    fabric: Fabric,
    start_agents: Start,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    monkeypatch.setitem(verbs._loaded, "pyverbs", module(fabric))
    paths = _run(start_agents, tmp_path, monkeypatch, capsys, "--transport", "rdma")
    for path in paths:
        # the RDMA transport's, the responder's, the agent's counters, the coordinator's
        assert set(path["details"]) >= {
            "device", "peer", "pingpong_loop", "pingpong_user_cpu_ns_per_round", "counters",
            "initiator", "phase_windows_s", "carried_by",
        }, path["details"]  # fmt: skip


@pytest.mark.parametrize("fabric", ["python"], indirect=True)
def test_an_rdma_fetch_profiles_details_are_registered(fake_agent: int) -> None:
    plan = ProbePlan(
        iterations=1, warmup=0, chunks_bytes=(192 * KIB,), depths=(64,), bulk_bytes=0,
        min_reads=4, timeout_s=60, fetch_profile="mooncake",
    )  # fmt: skip
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch:
        raw = RdmaTransport(node_name="fakeA").initiate(ch, plan, time.monotonic() + 60, "x")
    assert set(raw.details["fetch"]) == {k.name for k in DETAILS["fetch"].keys}
    _registered(raw.details)
