"""The engine requests on the control channel (docs/engines.md), both sides' records.

A path's engine cell takes three exchanges, each on the authenticated channel of an
agent the coordinator already trusts:

1. ``engine.target`` to the path's target agent: it starts a target worker and answers
   ``engine.descriptor`` (where its buffer is, how to reach it), then keeps the worker
   until ``engine.stop``, answered by ``engine.bye`` (what its counters saw, whether the
   initiator's WRITE arrived);
2. ``engine.initiate`` to the path's initiating agent, carrying that descriptor, which the
   agent checks field by field (``EngineDescriptor.from_wire``: the address must be the
   path's peer): it runs the initiator worker and answers ``engine.result``, then one data
   frame of int64 completion times per operation;
3. ``engine.stop`` to the target agent.

A fan-in level through the engine (``run --fanin --engine``, docs/fanin.md) is one
``engine.target`` on the storage node's agent and one ``engine.initiate`` (READ only, with
``barrier``) on each reader's: each reader's agent answers ``engine.ready`` when its
worker is connected and has read one chunk; once every reader has, the coordinator sends
each ``engine.go`` and the timed READs start together. Each answer's operations say how
long before it they ended (``ended_ago_ns``), so the coordinator places every reader on
its own clock.

``engines`` asks an agent which engines it has (pre-flight and doctor). The agent's side
is ``netqual.agent.engine_serve``; this module holds the bodies and the coordinator's
decoding of every answer (a peer's values, checked like any other).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel, peer_error
from netqual.base.errors import BadRequestError, LimitError, ProtocolError
from netqual.engines.interface import EngineDescriptor
from netqual.model.engine import EngineAvailability, EngineName, EngineOp, EngineTransport
from netqual.model.limits import AgentLimits

_SAMPLE = np.dtype("<i8")
MAX_OPS = 1 << 16  # operations per cell: samples the agent keeps and sends
MAX_LANES = 16
MAX_MOVED = 16
MAX_TEXT = 300
MAX_DEPTHS = 8  # depths one engine cell runs (each READ and WRITE)
MAX_AGO_NS = 3600 * 10**9  # an operation's end, before its answer: within a request's hour


@dataclass(frozen=True)
class EngineSpec:
    """What both ends of a path's engine cell share. ``address``: the end's own address on
    the path; ``pin``: pin the engine to the interface holding it (``--rails``)."""

    engine: EngineName
    address: str
    peer_address: str
    chunk_bytes: int
    depths: tuple[int, ...]
    timeout_s: float
    want: EngineTransport = EngineTransport.TCP
    pin: bool = False
    rdma_device: str | None = None

    def to_body(self) -> dict[str, Any]:
        return {
            "engine": self.engine.value,
            "address": self.address,
            "peer_address": self.peer_address,
            "chunk_bytes": self.chunk_bytes,
            "depths": list(self.depths),
            "timeout_s": self.timeout_s,
            "want": self.want.value,
            "pin": self.pin,
            "rdma_device": self.rdma_device,
        }

    @classmethod
    def decode(cls, f: Fields, limits: AgentLimits) -> EngineSpec:
        chunk = f.integer("chunk_bytes", 1, limits.max_chunk_bytes)
        depths = f.ints("depths", 1, limits.max_depth)
        if len(depths) > MAX_DEPTHS:
            raise LimitError(f.peer, f"{len(depths)} depths exceed {MAX_DEPTHS}")
        if chunk * max(depths) > limits.max_buffer_bytes:
            raise LimitError(
                f.peer,
                f"{chunk} x {max(depths)} bytes exceed max_buffer_bytes={limits.max_buffer_bytes}",
            )
        return cls(
            engine=EngineName(f.choice("engine", tuple(e.value for e in EngineName))),
            address=f.address("address"),
            peer_address=f.address("peer_address"),
            chunk_bytes=chunk,
            depths=depths,
            timeout_s=f.number("timeout_s", 1.0, limits.max_duration_s),
            want=EngineTransport(f.choice("want", ("tcp", "rdma"))),
            pin=f.flag("pin", False),
            rdma_device=None if f.body.get("rdma_device") is None else f.string("rdma_device", 64),
        )

    @property
    def buffer_bytes(self) -> int:
        return self.chunk_bytes * max(self.depths)


@dataclass(frozen=True)
class InitiateRequest:
    """``engine.initiate``. ``operations``: READ and WRITE, or READ alone (a fan-in reader
    fetches). ``barrier``: the fan-in's start barrier (module doc): the agent answers
    ``engine.ready`` once its worker is connected and has read one chunk, and starts the
    timed operations only on ``engine.go``."""

    spec: EngineSpec
    warmup: int
    ops: int
    descriptor: EngineDescriptor
    operations: tuple[EngineOp, ...] = (EngineOp.READ, EngineOp.WRITE)
    barrier: bool = False

    def to_body(self) -> dict[str, Any]:
        return {
            **self.spec.to_body(),
            "warmup": self.warmup,
            "ops": self.ops,
            "descriptor": self.descriptor.to_wire(),
            "operations": [op.value for op in self.operations],
            "barrier": self.barrier,
        }

    @classmethod
    def decode(cls, body: Mapping[str, Any], limits: AgentLimits, peer: str) -> InitiateRequest:
        f = Fields(body, "engine.initiate", peer)
        spec = EngineSpec.decode(f, limits)
        desc = EngineDescriptor.from_wire(
            body.get("descriptor"),
            "engine.initiate.descriptor",
            peer,
            engine=spec.engine,
            peer_address=spec.peer_address,
            need_bytes=spec.buffer_bytes,
        )
        warmup = f.integer("warmup", 0, MAX_OPS)
        ops = f.integer("ops", 1, MAX_OPS)
        operations: tuple[EngineOp, ...] = (EngineOp.READ, EngineOp.WRITE)
        if body.get("operations") is not None:
            names = f.strings("operations", 8)
            if not names or len(names) > len(EngineOp) or len(set(names)) < len(names):
                raise BadRequestError(peer, "engine.initiate.operations", "read and/or write")
            try:
                operations = tuple(EngineOp(n) for n in names)
            except ValueError:
                raise BadRequestError(
                    peer, "engine.initiate.operations", "read and/or write"
                ) from None
        return cls(spec, warmup, ops, desc, operations, f.flag("barrier", False))


# -- answers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetReady:
    """``engine.descriptor``: the target's descriptor, checked against the path."""

    descriptor: EngineDescriptor
    settings: tuple[str, ...]
    intended: str | None  # the target's interface towards the initiator

    @classmethod
    def decode(cls, body: Mapping[str, Any], spec: EngineSpec, peer: str) -> TargetReady:
        f = Fields(body, "engine.descriptor", peer)
        desc = EngineDescriptor.from_wire(
            body.get("descriptor"),
            "engine.descriptor.descriptor",
            peer,
            engine=spec.engine,
            peer_address=spec.peer_address,
            need_bytes=spec.buffer_bytes,
        )
        return cls(desc, f.strings("settings", MAX_TEXT), _opt_string(f, "intended", 64))


@dataclass(frozen=True)
class TargetBye:
    """``engine.bye``: the target's side after the initiator is done."""

    written: bool | None
    moved: Mapping[str, int]
    exit_note: str | None
    error: str | None

    def to_body(self) -> dict[str, Any]:
        return {
            "written": self.written,
            "moved": dict(self.moved),
            "exit": self.exit_note,
            "error": self.error,
        }

    @classmethod
    def decode(cls, body: Mapping[str, Any], peer: str) -> TargetBye:
        f = Fields(body, "engine.bye", peer)
        written = body.get("written")
        return cls(
            None if written is None else f.flag("written"),
            _moved(f),
            _opt_text(f, "exit"),
            _opt_text(f, "error"),
        )


@dataclass(frozen=True)
class OpReply:
    """One operation as the initiating agent measured it."""

    op: EngineOp
    depth: int
    first_op_ns: int | None
    completion_ns: npt.NDArray[np.int64]
    elapsed_ns: int
    errors: int
    error: str | None
    data_ok: bool | None
    moved: Mapping[str, int]
    lanes: tuple[str, ...]
    transport: EngineTransport
    # the last completion on the holder's monotonic clock (time.monotonic_ns): the
    # agent's (its worker shares the host's clock), then, once received, the
    # coordinator's (the agent says how long before its answer; ``receive``). A fan-in
    # level's readers are placed on one clock by it. None: not known
    ended_ns: int | None = None

    def header(self, now_ns: int | None = None) -> dict[str, Any]:
        return {
            "op": self.op.value,
            "depth": self.depth,
            "first_op_ns": self.first_op_ns,
            "count": len(self.completion_ns),
            "elapsed_ns": self.elapsed_ns,
            "errors": self.errors,
            "error": self.error,
            "data_ok": self.data_ok,
            "moved": dict(self.moved),
            "lanes": list(self.lanes),
            "transport": self.transport.value,
            "ended_ago_ns": None
            if self.ended_ns is None or now_ns is None
            else max(0, now_ns - self.ended_ns),
        }


@dataclass(frozen=True)
class InitiatorReply:
    """``engine.result``: everything the initiator's worker said, and how it ended."""

    version: str | None
    ops: tuple[OpReply, ...]
    start_s: float | None = None
    connect_us: float | None = None
    claimed: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    intended: str | None = None
    error: str | None = None  # the worker failed (after the ops listed, if any)
    exit_note: str | None = None  # how it ended when not cleanly (a crash after its result)

    def to_body(self, now_ns: int | None = None) -> dict[str, Any]:
        return {
            "version": self.version,
            "ops": [o.header(now_ns) for o in self.ops],
            "start_s": self.start_s,
            "connect_us": self.connect_us,
            "claimed": list(self.claimed),
            "settings": list(self.settings),
            "intended": self.intended,
            "error": self.error,
            "exit": self.exit_note,
        }

    def send(self, ch: Channel) -> None:
        ch.send("engine.result", self.to_body(time.monotonic_ns()))
        for o in self.ops:
            ch.send_bytes(np.asarray(o.completion_ns, dtype=_SAMPLE).tobytes())

    @classmethod
    def receive(
        cls, ch: Channel, body: Mapping[str, Any], request: InitiateRequest
    ) -> InitiatorReply:
        """The coordinator's side: the header checked against the request (counts size the
        sample frames), then exactly one frame per operation. Called as the header has
        arrived: each operation's end is placed on this process's monotonic clock."""
        arrived_ns = time.monotonic_ns()
        peer = ch.peer
        f = Fields(body, "engine.result", peer)
        items = body.get("ops", [])
        most = len(EngineOp) * len(request.spec.depths)
        if not isinstance(items, list) or len(items) > most:
            raise BadRequestError(peer, "engine.result.ops", f"must be a list of <= {most}")
        headers = []
        for i, item in enumerate(items):
            g = Fields(item, f"engine.result.ops[{i}]", peer)
            first = (
                None if item.get("first_op_ns") is None else g.integer("first_op_ns", 0, 1 << 62)
            )
            data_ok = None if item.get("data_ok") is None else g.flag("data_ok")
            headers.append(
                (
                    EngineOp(g.choice("op", tuple(o.value for o in EngineOp))),
                    _depth(g, request.spec.depths),
                    first,
                    g.integer("count", 0, request.ops),
                    g.integer("elapsed_ns", 0, 1 << 62),
                    g.integer("errors", 0, MAX_OPS),
                    _opt_text(g, "error"),
                    data_ok,
                    _moved(g),
                    g.strings("lanes", MAX_TEXT)[:MAX_LANES],
                    EngineTransport(g.choice("transport", tuple(t.value for t in EngineTransport))),
                    None
                    if item.get("ended_ago_ns") is None
                    else arrived_ns - g.integer("ended_ago_ns", 0, MAX_AGO_NS),
                )
            )
        ops = []
        for (
            op,
            depth,
            first,
            count,
            elapsed,
            errors,
            error,
            data_ok,
            moved,
            lanes,
            transport,
            ended,
        ) in headers:
            data = ch.recv_bytes(count * _SAMPLE.itemsize)
            if len(data) != count * _SAMPLE.itemsize:
                raise ProtocolError(peer, f"sent {len(data) // 8} samples, announced {count}")
            samples = np.frombuffer(data, dtype=_SAMPLE).astype(np.int64)
            ops.append(
                OpReply(
                    op, depth, first, samples, elapsed, errors, error, data_ok, moved, lanes,
                    transport, ended,
                )
            )  # fmt: skip
        start = None if body.get("start_s") is None else f.number("start_s", 0.0, 3600.0)
        connect = None if body.get("connect_us") is None else f.number("connect_us", 0.0, 1e10)
        return cls(
            version=_opt_string(f, "version", 64),
            ops=tuple(ops),
            start_s=start,
            connect_us=connect,
            claimed=f.strings("claimed", MAX_TEXT),
            settings=f.strings("settings", MAX_TEXT),
            intended=_opt_string(f, "intended", 64),
            error=_opt_text(f, "error"),
            exit_note=_opt_text(f, "exit"),
        )


def availability_to_body(a: EngineAvailability) -> dict[str, Any]:
    return {
        "engine": a.engine.value,
        "installed": a.installed,
        "version": a.version,
        "ucx": a.ucx,
        "import_s": a.import_s,
        "rdma_devices": list(a.rdma_devices),
        "problem": a.problem,
    }


def availability_from_peer(item: object, where: str, peer: str) -> EngineAvailability:
    g = Fields(item, where, peer)
    imp = None if g.body.get("import_s") is None else g.number("import_s", 0.0, 3600.0)
    return EngineAvailability(
        engine=EngineName(g.choice("engine", tuple(e.value for e in EngineName))),
        installed=g.flag("installed"),
        version=_opt_string(g, "version", 64),
        ucx=_opt_string(g, "ucx", 64),
        import_s=imp,
        rdma_devices=g.strings("rdma_devices", 64)[:16],
        problem=_opt_text(g, "problem"),
    )


def check_engines(ch: Channel, engines: tuple[EngineName, ...]) -> tuple[EngineAvailability, ...]:
    """Coordinator side of ``engines``: what the agent at ``ch`` has of ``engines``."""
    body = ch.request("engines", {"engines": [e.value for e in engines]}, reply="engines")
    items = body.get("engines")
    if not isinstance(items, list) or len(items) > len(EngineName):
        raise BadRequestError(ch.peer, "engines.engines", "must be a list of engines")
    return tuple(
        availability_from_peer(x, f"engines.engines[{i}]", ch.peer) for i, x in enumerate(items)
    )


def expect(ch: Channel, kind: str) -> dict[str, Any]:
    msg = ch.recv()
    if msg.kind == "error":
        raise peer_error(msg.body, ch.peer)
    if msg.kind != kind:
        raise ProtocolError(ch.peer, f"expected {kind!r}, got {msg.kind!r}")
    return msg.body


def _depth(f: Fields, depths: tuple[int, ...]) -> int:
    depth = f.integer("depth", 1, max(depths))
    if depth not in depths:
        raise BadRequestError(f.peer, f"{f.where}.depth", f"{depth} was not asked")
    return depth


def _opt_text(f: Fields, key: str) -> str | None:
    return None if f.body.get(key) is None else f.text(key)[:1000]


def _opt_string(f: Fields, key: str, most: int) -> str | None:
    return None if f.body.get(key) is None else f.string(key, most)


def _moved(f: Fields) -> dict[str, int]:
    """``moved``: interface (or ``rdma:DEV/PORT``) -> bytes, bounded."""
    value = f.body.get("moved") or {}
    if not isinstance(value, Mapping) or len(value) > MAX_MOVED:
        raise BadRequestError(f.peer, f"{f.where}.moved", f"must be an object of <= {MAX_MOVED}")
    g = Fields(value, f"{f.where}.moved", f.peer)
    out = {}
    for name in value:
        if not isinstance(name, str) or not 0 < len(name) <= 80 or not name.isprintable():
            raise BadRequestError(f.peer, f"{f.where}.moved", "interface names must be printable")
        out[name] = g.integer(name, 0, 1 << 62)
    return out
