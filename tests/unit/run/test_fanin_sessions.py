"""The fan-in sweep's session count against the agents' --max-sessions, before anything is
measured (``run.fanin.check_sessions``): pre-flight reports in, a usage error out."""

from __future__ import annotations

import pytest

from netqual.base.errors import UsageError
from netqual.model.fanin import FaninConfig
from netqual.model.node import Node, Role
from netqual.model.preflight import AgentCheck, PreflightReport
from netqual.run.fanin import check_sessions, sessions_at
from netqual.transports import TransportKind

NODES = [Node(f"c{i}", f"10.0.0.{i}", rack=f"r{i % 2}", role=Role.COMPUTE) for i in range(4)]
NODES.append(Node("st", "10.0.1.1", rack="s", role=Role.STORAGE))


def report(**served: int | None) -> PreflightReport:
    checks = tuple(
        AgentCheck(n.name, n.endpoint, max_sessions=served.get(n.name, 64)) for n in NODES
    )
    return PreflightReport("tcp", "0", checks, 0.1)


def test_sessions_count_every_tcp_connection_and_one_session_per_rdma_rank() -> None:
    moon = FaninConfig((1, 4), "mooncake", 1 << 20)  # 16 slices: 2 connections used
    assert sessions_at(moon, TransportKind.TCP, 4) == 4 * 8 * 2 + 1
    assert sessions_at(moon, TransportKind.RDMA, 4) == 4 * 8 + 1  # QPs share the session
    one_slice = FaninConfig((1,), "mooncake", 64 << 10)  # one slice: one connection
    assert sessions_at(one_slice, TransportKind.TCP, 1) == 9
    assert sessions_at(FaninConfig((1,)), TransportKind.TCP, 4) == 5  # plain: 1 rank


def test_levels_that_fit_pass_and_the_first_that_does_not_is_named_with_the_fix() -> None:
    moon = FaninConfig((1, 2, 4), "mooncake", 1 << 20)
    check_sessions(NODES, moon, TransportKind.TCP, report(st=65))  # 4 readers: 65
    with pytest.raises(UsageError) as err:
        check_sessions(NODES, moon, TransportKind.TCP, report(st=64))
    assert err.value.problem == (
        "st's agent serves 64 sessions at once; level 4 needs 65 (4 readers x 8 ranks x 2 "
        "connections, + 1 for its counters): start it with --max-sessions 65, or sweep up "
        "to 2 readers. Nothing was measured"
    )
    # a resumed run that has level 4 already needs nothing more; an agent that does not
    # say its limit is not judged; a level beyond the compute nodes is skipped, not counted
    check_sessions(NODES, moon, TransportKind.TCP, report(st=64), done={("st", 4)})
    check_sessions(NODES, moon, TransportKind.TCP, report(st=None))
    check_sessions(NODES, FaninConfig((1, 2, 8), "mooncake", 1 << 20), TransportKind.RDMA, report())


def test_a_compute_agent_too_small_for_its_ranks_is_named() -> None:
    with pytest.raises(UsageError, match="c0's agent serves 4 sessions at once, its 8 ranks"):
        check_sessions(NODES, FaninConfig((1,), "nixl"), TransportKind.TCP, report(c0=4))
