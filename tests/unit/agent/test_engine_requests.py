"""The engine requests on the agent's side (netqual.agent.engine_serve) over a socket
pair, the engine itself never loaded: a request a peer cannot make, an engine the node
lacks (configuration, naming the install), an address the node does not have; and the
coordinator's reading of those answers (netqual.run.engine_cells)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from netqual.agent import engine_serve
from netqual.agent.engine_request import (
    EngineSpec,
    InitiateRequest,
    InitiatorReply,
    OpReply,
    expect,
)
from netqual.agent.wire.protocol import Channel
from netqual.base.errors import BadRequestError, ErrorCode, LimitError, PeerError, ProtocolError
from netqual.engines.interface import EngineDescriptor
from netqual.model.engine import EngineName, EngineOp, EnginePlan, EngineTransport
from netqual.model.fanin import FaninConfig
from netqual.model.limits import AgentLimits
from netqual.model.node import Node
from netqual.model.node import Role as NodeRole
from netqual.run import engine_cells, fanin_engine

LIMITS = AgentLimits()


def spec(**over: object) -> dict[str, object]:
    body = EngineSpec(EngineName.MOONCAKE, "127.0.0.1", "127.0.0.1", 65536, (1, 8), 30.0).to_body()
    body.update(over)
    return body


def exchange(serve: Callable[[Channel], None], kind: str, body: dict[str, object]) -> PeerError:
    a, b = socket.socketpair()
    client, agent = Channel(a, "coordinator"), Channel(b, "h2")
    for ch in (client, agent):
        ch.set_timeout(10)
    t = threading.Thread(target=serve, args=(agent,))
    t.start()
    try:
        client.send(kind, body)
        with pytest.raises(PeerError) as caught:
            expect(client, "engine.descriptor")
        return caught.value
    finally:
        t.join(10)
        client.close()
        agent.close()


def test_an_engine_the_node_lacks_is_unavailable_and_names_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_serve, "version", lambda engine: None)
    err = exchange(
        lambda ch: engine_serve.serve_target(ch, spec(), "h2", LIMITS), "engine.target", spec()
    )
    assert err.code is ErrorCode.UNAVAILABLE
    assert "h2: mooncake is not installed (pip install 'netqual[mooncake]'" in err.message
    # the coordinator makes it a configuration failure of the path, never a network verdict
    plan = EnginePlan(EngineName.MOONCAKE, 65536, (1,))
    refused = engine_cells._refused(plan, err)
    assert refused is not None and refused.cells == ()
    assert refused.configuration == f"engine mooncake: {err.message}"
    other = PeerError("h2", ErrorCode.PROBE_FAILED, "worker silent")
    assert engine_cells._refused(plan, other) is None


def test_an_address_the_node_does_not_have_is_refused_before_any_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_serve, "installed", lambda engine: None)
    body = spec(address="198.18.99.99")
    err = exchange(
        lambda ch: engine_serve.serve_target(ch, body, "h2", LIMITS), "engine.target", body
    )
    assert err.code is ErrorCode.UNAVAILABLE
    assert "no interface of this node has 198.18.99.99" in err.message


@pytest.mark.parametrize(
    ("over", "error", "words"),
    [
        ({"engine": "rdma-magic"}, BadRequestError, "engine.target.engine"),
        ({"address": "not/an address"}, BadRequestError, "engine.target.address"),
        ({"depths": [1, 65]}, BadRequestError, "engine.target.depths[1]"),
        ({"depths": list(range(1, 10))}, LimitError, "9 depths exceed 8"),
        ({"chunk_bytes": 64 << 20, "depths": [32]}, LimitError, "max_buffer_bytes"),
        ({"chunk_bytes": 1 << 40}, BadRequestError, "engine.target.chunk_bytes"),
        ({"timeout_s": 1e9}, BadRequestError, "engine.target.timeout_s"),
        ({"want": "shm"}, BadRequestError, "engine.target.want"),
        ({"pin": "yes"}, BadRequestError, "engine.target.pin"),
        ({"rdma_device": "x" * 65}, BadRequestError, "engine.target.rdma_device"),
    ],
)
def test_a_request_over_the_agents_bounds_is_refused_by_field(
    over: dict[str, object], error: type[Exception], words: str
) -> None:
    a, b = socket.socketpair()
    pattern = words.replace("[", r"\[").replace("]", r"\]")
    with (
        Channel(a, "coordinator"),
        Channel(b, "h2") as agent,
        pytest.raises(error, match=pattern),
    ):
        engine_serve.serve_target(agent, spec(**over), "h2", LIMITS)


def test_an_engine_the_agent_does_not_offer_is_one_the_node_lacks() -> None:
    """``netqual agent --engines mooncake``: NIXL is refused as unavailable (configuration)
    whether installed or not, and the ``engines`` answer says so without a worker."""
    offered = (EngineName.MOONCAKE,)
    body = spec(engine="nixl")
    err = exchange(
        lambda ch: engine_serve.serve_target(ch, body, "h2", LIMITS, None, offered),
        "engine.target",
        body,
    )
    assert err.code is ErrorCode.UNAVAILABLE
    assert "h2: nixl is not offered by this agent (started with --engines mooncake" in err.message
    found = engine_serve.check(EngineName.NIXL, offered)
    assert not found.installed and found.would_install is None
    assert found.problem is not None and "--engines mooncake" in found.problem
    nothing = engine_serve.check(EngineName.MOONCAKE, ())
    assert nothing.problem is not None and "--engines none" in nothing.problem


# -- the fan-in's start barrier (run --fanin --engine, docs/fanin.md) -------------------


def _descriptor() -> EngineDescriptor:
    return EngineDescriptor(
        EngineName.MOONCAKE, "m 0.3", "127.0.0.1", "127.0.0.1:15588", 1 << 30, 1 << 20
    )


def test_a_fanin_reader_asks_reads_only_behind_the_barrier() -> None:
    sp = EngineSpec(EngineName.MOONCAKE, "127.0.0.1", "127.0.0.1", 65536, (1,), 30.0)
    req = InitiateRequest(sp, 0, 200, _descriptor(), (EngineOp.READ,), True)
    back = InitiateRequest.decode(req.to_body(), LIMITS, "coordinator")
    assert back == req
    plain = {k: v for k, v in req.to_body().items() if k not in ("operations", "barrier")}
    old = InitiateRequest.decode(plain, LIMITS, "coordinator")  # an older coordinator
    assert old.operations == (EngineOp.READ, EngineOp.WRITE) and not old.barrier
    for bad in (["read", "read"], ["delete"], [], ["read", "write", "read"]):
        with pytest.raises(BadRequestError, match=r"engine\.initiate\.operations"):
            InitiateRequest.decode({**req.to_body(), "operations": bad}, LIMITS, "coordinator")


class HeldWorker:
    """The worker as the agent's barrier sees it (``runner.Worker``'s two calls): ready at
    once, then whatever the agent sends it."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def message(self, *kinds: str) -> dict[str, object]:
        assert kinds == ("ready",)
        return {"type": "ready", "first_op_ns": 12345, "connect_us": 40.5}

    def send(self, line: str) -> None:
        self.sent.append(line)


def _barrier_with(reply: str) -> tuple[dict[str, object], list[str], list[ProtocolError]]:
    """The agent's barrier against a coordinator that answers ``reply``: (what it said
    ready, what the worker was sent, what the agent raised)."""
    a, b = socket.socketpair()
    coordinator, agent = Channel(a, "h2"), Channel(b, "coordinator")
    worker, errors = HeldWorker(), list[ProtocolError]()

    def serve() -> None:
        try:
            engine_serve._barrier(agent, worker, LIMITS)  # type: ignore[arg-type]
        except ProtocolError as err:
            errors.append(err)

    with coordinator, agent:
        coordinator.set_timeout(10)
        t = threading.Thread(target=serve)
        t.start()
        ready = expect(coordinator, "engine.ready")
        held = list(worker.sent)
        coordinator.send(reply)
        t.join(10)
    assert held == []  # nothing reached the worker before the coordinator's answer
    return ready, worker.sent, errors


def test_the_agent_holds_its_worker_at_the_barrier_until_go() -> None:
    ready, sent, errors = _barrier_with("engine.go")
    assert ready == {"first_op_ns": 12345, "connect_us": 40.5}
    assert sent == ["go"] and errors == []


def test_anything_but_go_ends_the_reader() -> None:
    """The agent raises (its session ends, the ``with worker`` kills the worker)."""
    _, sent, errors = _barrier_with("engine.stop")
    assert sent == [] and len(errors) == 1
    assert "expected 'engine.go', got 'engine.stop'" in str(errors[0])


def test_each_reads_end_is_placed_on_the_receivers_clock() -> None:
    """The agent says how long before its answer an operation ended; the coordinator
    counts back from the answer's arrival (microseconds off: the transit)."""
    sp = EngineSpec(EngineName.MOONCAKE, "127.0.0.1", "127.0.0.1", 65536, (1,), 30.0)
    req = InitiateRequest(sp, 0, 3, _descriptor(), (EngineOp.READ,), True)
    ended = time.monotonic_ns() - 5_000_000  # 5 ms ago on the agent's clock
    op = OpReply(
        EngineOp.READ, 1, 100, np.array([10, 20, 30], dtype=np.int64), 60, 0, None, True, {},
        (), EngineTransport.TCP, ended,
    )  # fmt: skip
    a, b = socket.socketpair()
    with Channel(a, "coordinator") as agent, Channel(b, "h2") as coordinator:
        InitiatorReply("m 0.3", (op,)).send(agent)
        got = InitiatorReply.receive(coordinator, expect(coordinator, "engine.result"), req)
        now = time.monotonic_ns()
    placed = got.ops[0].ended_ns
    assert placed is not None and now - 2_000_000_000 < placed <= now - 5_000_000
    assert got.ops[0].completion_ns.tolist() == [10, 20, 30]


def test_a_level_whose_storage_agent_is_gone_is_data_not_a_crash() -> None:
    """No agent listens where the storage node should be: the level says so for every
    reader, and the sweep goes on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    storage = Node("st1", "127.0.0.1", port=port, role=NodeRole.STORAGE)
    readers = [Node(f"c{i}", "127.0.0.1", port=port) for i in range(2)]
    cfg = FaninConfig((2,), chunks=10)
    ctx = fanin_engine.EngineSweep(EnginePlan(EngineName.MOONCAKE, 65536, (1,)), None)
    lv, version = fanin_engine.measure_level(storage, readers, cfg, ctx)
    assert version is None and lv.level.chunk is None and lv.readers == 2
    assert len(lv.level.errors) == 2
    assert all(e.startswith(f"c{i}: target on st1: agent: ") for i, e in enumerate(lv.level.errors))
