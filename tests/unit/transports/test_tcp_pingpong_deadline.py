"""TCP ping-pong never hangs: a silent peer ends the loop at the deadline with ProbeError.

Pins the behaviour any change to the hot loop in tcp.py (bench/, docs/performance.md)
must keep: kept samples only, and a bounded wait on either side.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
from sockets import _tcp_pair

from netqual.agent.wire.protocol import Channel
from netqual.base.errors import BusyError, ProbeError
from netqual.model.plan import ProbePlan
from netqual.transports.interface import AgentLimits, BufferBudget
from netqual.transports.tcp import TcpTransport


def _pair() -> tuple[Channel, Channel]:
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    return Channel(a, "initiator"), Channel(b, "responder")  # labelled by their peer


NONCE = "00" * 16


def _serve(ch: Channel, echo: bool) -> threading.Thread:
    """A peer that serves the ping-pong as an agent does, or accepts it and stays silent."""

    def run() -> None:
        msg = ch.recv()
        if msg.kind != "tcp.pingpong":
            return
        if echo:
            TcpTransport().respond(ch, msg.kind, msg.body, AgentLimits())
        else:
            ch.send("ok")
            time.sleep(3.0)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_pingpong_returns_kept_samples_only() -> None:
    responder, initiator = _pair()
    peer = _serve(responder, echo=True)
    plan = ProbePlan(iterations=300, warmup=50, size_bytes=64, bulk=False)
    raw = TcpTransport().initiate(initiator, plan, time.monotonic() + 10, "127.0.0.1")
    peer.join(5)
    assert len(raw.rtt_ns) == 300
    assert np.all(raw.rtt_ns > 0)
    assert raw.warmup_discarded == 50


def test_initiator_gives_up_at_deadline_when_responder_is_silent() -> None:
    responder, initiator = _pair()
    _serve(responder, echo=False)
    plan = ProbePlan(iterations=100, warmup=0, size_bytes=64, bulk=False)
    start = time.monotonic()
    with pytest.raises(ProbeError, match="no echo from responder"):
        TcpTransport().initiate(initiator, plan, start + 0.5, "127.0.0.1")
    assert time.monotonic() - start < 2.5
    responder.close()


def test_responder_gives_up_when_initiator_is_silent() -> None:
    responder, initiator = _pair()
    start = time.monotonic()
    with pytest.raises(ProbeError, match="initiator went silent"):
        TcpTransport().respond(
            responder,
            "tcp.pingpong",
            {"size_bytes": 64, "count": 10, "timeout_s": 0.5, "nonce": NONCE},
            AgentLimits(),
        )
    assert time.monotonic() - start < 2.5
    assert initiator.expect("ok") == {}
    initiator.close()


def test_bulk_send_to_a_peer_that_never_reads_ends_at_its_timeout() -> None:
    """A silent peer (docs/security.md): this ran 2-3x its timeout (15.6 s for 5 s): the
    deadline was checked between chunks only, and a chunk larger than the socket buffers
    is several sends, each waiting a full kernel timeout."""
    initiator, responder = _tcp_pair()
    body = {"chunk_bytes": 32 << 20, "reads": 4, "depth": 1, "timeout_s": 2.0, "nonce": NONCE}
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            TcpTransport().respond(responder, "tcp.bulk", body, AgentLimits())
        except BaseException as err:
            errors.append(err)

    t = threading.Thread(target=serve)
    start = time.monotonic()
    t.start()
    assert initiator.expect("ok") == {}
    initiator.sock.sendall(b"\0" * 8 * 4)  # every request at once, then never read
    t.join(30)
    elapsed = time.monotonic() - start
    assert errors and isinstance(errors[0], ProbeError), errors
    assert elapsed < 3.5, f"bulk send outlived its 2 s timeout: {elapsed:.1f} s"
    initiator.close()
    responder.close()


def test_buffers_over_the_agent_budget_are_refused_busy() -> None:
    initiator, responder = _pair()
    budget = BufferBudget(1 << 20)
    with budget.hold(1 << 20), pytest.raises(BusyError, match=r"max_buffer_bytes"):
        TcpTransport().respond(
            responder, "tcp.bulk", {"chunk_bytes": 65536, "reads": 1, "depth": 1, "nonce": NONCE},
            AgentLimits(), budget,
        )  # fmt: skip
    with budget.hold(1 << 20):  # released: the budget is whole again
        pass
    initiator.close()
    responder.close()
