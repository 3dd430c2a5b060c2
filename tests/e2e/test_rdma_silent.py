"""A silent RDMA responder (a real process that passes the handshake and ``info``, then
never answers ``rdma.connect``) costs ACCEPT_TIMEOUT_S, not the probe's deadline, and is a
``peer-silent`` failure naming it, which a run turns into "drop the node after its first
timeout" (tests/e2e/test_agent_lifetime.py shows the run side). The initiating agent runs on
the fake verbs (no RDMA device here); the silent responder is the process."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from agentpool import cli_env
from paths import SUPPORT
from rdma_fakeverbs import Fabric, module

from netqual.agent.counters import ProbeWindow
from netqual.agent.probe_request import request_probe
from netqual.agent.wire.protocol import connect
from netqual.base.errors import ErrorCode, PeerError, PeerSilentError
from netqual.model.limits import AgentLimits
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.transports import TransportKind, interface
from netqual.transports.rdma import verbs
from netqual.transports.rdma.transport import RdmaTransport

HERE = SUPPORT  # silent_agent.py
BOUND_S = 2.0  # ACCEPT_TIMEOUT_S for these tests (10 s by default)
PLAN = ProbePlan(iterations=200, warmup=10, size_bytes=64, bulk=False, timeout_s=120)


@pytest.fixture
def silent() -> Iterator[tuple[int, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "silent_agent.py"), "gpu03"],
        env=cli_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield port, proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def fake_verbs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(verbs._loaded, "pyverbs", module(Fabric()))
    monkeypatch.setattr(interface, "ACCEPT_TIMEOUT_S", BOUND_S)


@pytest.mark.usefixtures("fake_verbs")
def test_a_silent_rdma_responder_fails_fast_naming_it(silent: tuple[int, object]) -> None:
    port, _ = silent
    ch, _hello = connect("127.0.0.1", port, None, "gpu03", 10, expect_name="gpu03")
    start = time.monotonic()
    with ch, pytest.raises(PeerSilentError) as caught:
        RdmaTransport(node_name="gpu01").initiate(ch, PLAN, start + PLAN.timeout_s, "127.0.0.1")
    took = time.monotonic() - start
    assert BOUND_S - 0.1 < took < BOUND_S + 3.0, took  # not the probe's 120 s
    assert str(caught.value) == (
        f"gpu03 never answered the rdma.connect request (waited {BOUND_S:.1f} s; its agent "
        "passed the pre-flight check, so it is up but not serving measurements)"
    )


@pytest.mark.usefixtures("fake_verbs")
def test_a_probe_into_a_silent_rdma_responder_is_peer_silent(
    silent: tuple[int, subprocess.Popen[str]],
) -> None:
    """Through a real (in-process) agent: the answer the coordinator gets is the
    ``peer-silent`` error that drops the node for the rest of the run."""
    from netqual.agent.server import Agent

    port, proc = silent
    agent = Agent("127.0.0.1", 0, None, name="gpu01", limits=AgentLimits())
    _host, agent_port = agent.bind()
    thread = threading.Thread(target=agent.serve_forever, daemon=True)
    thread.start()
    try:
        src = Node(name="gpu01", address="127.0.0.1", port=agent_port)
        dst = Node(name="gpu03", address="127.0.0.1", port=port)
        start = time.monotonic()
        with pytest.raises(PeerError) as caught:
            request_probe(src, dst, TransportKind.RDMA, PLAN, None, PLAN.timeout_s + 15)
        took = time.monotonic() - start
    finally:
        agent.stop()
        thread.join(5)
    assert caught.value.code is ErrorCode.PEER_SILENT, caught.value
    assert "gpu01 -> gpu03: gpu03 never answered the rdma.connect request" in str(caught.value)
    # The source's counter window (ProbeWindow.WAIT_S) gives up on it first, then connect.
    assert took < BOUND_S + ProbeWindow.WAIT_S + 5.0, took
    proc.kill()
    assert proc.stdout is not None
    asked = proc.stdout.read().split()
    assert asked in (["rdma.connect"], ["counters.begin"]), asked  # the first request: sat on
