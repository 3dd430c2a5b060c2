"""A run's agent sessions (netqual.agent.wire.sessions) against simulated agents speaking the real
protocol and token handshake (bench/simagents.py): requests reuse one session, a session
the agent closed while idle is never used, and one lost before the answer is replaced once
(the probe is still measured, not reported as a failed path)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from paths import REPO

from netqual.agent.probe_request import request_probe
from netqual.agent.wire import sessions as sessions_mod
from netqual.agent.wire.sessions import Sessions
from netqual.base.errors import PeerUnreachableError
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.transports import TransportKind

sys.path.insert(0, str(REPO / "bench"))
from simagents import address, simulated  # bench/simagents.py

PLAN = ProbePlan(iterations=20, warmup=0, bulk=False)


def _nodes(agents: object, count: int) -> list[Node]:
    ports = agents.ports  # type: ignore[attr-defined]
    return [Node(f"a{i:04d}", address(i), ports[i]) for i in range(count)]


def _probe(src: Node, dst: Node, token: bytes | None, pool: Sessions) -> int:
    out = request_probe(src, dst, TransportKind.TCP, PLAN, token, 10.0, sessions=pool)
    return len(out.raw.rtt_ns)


def test_requests_reuse_one_session_and_close_it_at_the_end(tmp_path: Path) -> None:
    with simulated(2, tmp_path) as (agents, _inv):
        a, b = _nodes(agents, 2)
        pool = Sessions(agents.token)
        assert [_probe(a, b, agents.token, pool) for _ in range(5)] == [20] * 5
        assert (agents.sessions, agents.probes, pool.opened, pool.reused) == (1, 5, 1, 4)
        pool.close()
        assert _probe(a, b, agents.token, pool) == 20  # after close: a new session
        assert agents.sessions == 2
        pool.close()


def test_a_session_the_agent_closed_is_not_used(tmp_path: Path) -> None:
    with simulated(2, tmp_path) as (agents, _inv):
        a, b = _nodes(agents, 2)
        pool = Sessions(agents.token)
        _probe(a, b, agents.token, pool)
        ((_, ch),) = next(iter(pool._idle.values()))
        ch.sock.shutdown(socket.SHUT_RD)  # reads EOF now, as after the agent's close
        assert _probe(a, b, agents.token, pool) == 20
        assert (pool.opened, pool.reused, agents.sessions) == (2, 0, 2)
        pool.close()


def test_a_reused_session_lost_before_the_answer_is_replaced_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with simulated(2, tmp_path) as (agents, _inv):
        a, b = _nodes(agents, 2)
        pool = Sessions(agents.token)
        _probe(a, b, agents.token, pool)
        ((_, ch),) = next(iter(pool._idle.values()))
        ch.sock.shutdown(socket.SHUT_RDWR)
        monkeypatch.setattr(sessions_mod, "_spoke", lambda ch: False)  # the race: looks idle
        assert _probe(a, b, agents.token, pool) == 20
        assert (pool.opened, pool.reused, agents.probes, agents.sessions) == (2, 1, 2, 2)
        pool.close()


def test_a_new_session_lost_is_the_error_and_no_session_is_kept(tmp_path: Path) -> None:
    with simulated(2, tmp_path) as (agents, _inv):
        a, _b = _nodes(agents, 2)
        pool = Sessions(agents.token)

        def lost(ch: object) -> int:
            raise sessions_mod.SessionLost(PeerUnreachableError("a0000", "connection closed"))

        with pytest.raises(PeerUnreachableError, match="connection closed"):
            pool.use(a, 5.0, lost)
        assert (pool.opened, pool._count) == (1, 0)


def test_idle_sessions_kept_are_capped(tmp_path: Path) -> None:
    with simulated(3, tmp_path) as (agents, _inv):
        a, b, c = _nodes(agents, 3)
        pool = Sessions(agents.token, max_idle=1)
        _probe(a, c, agents.token, pool)
        _probe(b, c, agents.token, pool)  # a's session is kept; b's is ended after its probe
        assert pool._count == 1
        _probe(b, c, agents.token, pool)
        assert (pool.opened, pool.reused, agents.sessions) == (3, 0, 3)
        pool.close()
