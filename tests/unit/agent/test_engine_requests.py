"""The engine requests on the agent's side (netqual.agent.engine_serve) over a socket
pair, the engine itself never loaded: a request a peer cannot make, an engine the node
lacks (configuration, naming the install), an address the node does not have; and the
coordinator's reading of those answers (netqual.run.engine_cells)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from netqual.agent import engine_serve
from netqual.agent.engine_request import EngineSpec, expect
from netqual.agent.wire.protocol import Channel
from netqual.base.errors import BadRequestError, ErrorCode, LimitError, PeerError
from netqual.model.engine import EngineName, EnginePlan
from netqual.model.limits import AgentLimits
from netqual.run import engine_cells

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
