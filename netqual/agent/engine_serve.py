"""The agent's side of the engine requests (``netqual.agent.engine_request``): each role's
worker started, bounded and ended here, never the engine itself (docs/engines.md).

A worker lives as long as its request: the target's until ``engine.stop`` (or the
coordinator's channel closing, or its deadline), the initiator's until its result. Logs go
to a temporary directory removed with the request; a failure's answer carries the log's
tail. An engine this node lacks is ``unavailable`` (a configuration failure of the path,
never a network verdict).
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import logging
import socket
import tempfile
import time
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from netqual.agent.engine_request import (
    MAX_LANES,
    MAX_TEXT,
    EngineSpec,
    InitiateRequest,
    InitiatorReply,
    OpReply,
    TargetBye,
    availability_to_body,
)
from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel
from netqual.base.errors import BadRequestError, ErrorCode, NetqualError, ProtocolError
from netqual.base.names import printable
from netqual.engines import mooncake, netdev, nixl
from netqual.engines.interface import (
    EngineJob,
    EngineUnavailableError,
    EngineWorkerError,
    Role,
)
from netqual.engines.runner import Worker
from netqual.model.engine import EngineAvailability, EngineName, EngineOp, EngineTransport
from netqual.model.limits import AgentLimits

log = logging.getLogger("netqual.agent")

START_S = 90.0  # a worker's import and engine start (1.5-4 s here; a loaded host takes more)
STOP_S = 30.0  # a target's answer to stop
CHECK_S = 60.0  # ``engines``: one engine's import
# a fan-in reader, ready, waits this long for the coordinator's go (every other reader's
# worker starting and connecting, on a loaded host)
BARRIER_S = START_S
KINDS = ("engine.target", "engine.initiate", "engines")
_MODULES = {EngineName.MOONCAKE: ("mooncake",), EngineName.NIXL: ("nixl_cu12", "nixl")}
EXTRA = {EngineName.MOONCAKE: "netqual[mooncake]", EngineName.NIXL: "netqual[nixl]"}


def installed(engine: EngineName) -> str | None:
    """Why ``engine`` cannot run here (not installed), or None: one of its distributions
    is installed and its top-level module is there. Nothing is imported (a package's
    ``__init__`` may load native code; only workers do)."""
    if version(engine) is not None:
        for name in _MODULES[engine]:
            with contextlib.suppress(ImportError, ValueError):
                if importlib.util.find_spec(name) is not None:
                    return None
    return f"{engine.value} is not installed (pip install '{EXTRA[engine]}'; docs/engines.md)"


def available(engine: EngineName, offered: Collection[EngineName] | None = None) -> str | None:
    """Why this agent cannot run ``engine``, or None: not among the engines it offers
    (``netqual agent --engines``; None: every one installed), else not installed."""
    if offered is not None and engine not in offered:
        listed = ",".join(e.value for e in offered) or "none"
        return (
            f"{engine.value} is not offered by this agent (started with --engines {listed}; "
            "docs/engines.md)"
        )
    return installed(engine)


def version(engine: EngineName) -> str | None:
    return mooncake.version() if engine is EngineName.MOONCAKE else nixl.version()


def _local(spec: EngineSpec, agent: str) -> tuple[str, str | None, str | None]:
    """(address, the interface holding it, the interface towards the peer). The address
    must be this node's: an engine binds and advertises it."""
    address = spec.address
    try:
        ipaddress.ip_address(address)
    except ValueError:
        try:
            address = str(socket.getaddrinfo(address, None)[0][4][0])
        except (OSError, UnicodeError, IndexError) as err:
            raise EngineUnavailableError(f"{agent}: cannot resolve {spec.address}: {err}") from err
    holder = netdev.holder(address)
    if holder is None and not netdev.readable():
        raise EngineUnavailableError(
            f"{agent}: cannot list this node's interfaces (`ip -j address` failed or took "
            f"over {netdev.IP_TIMEOUT_S:g} s)"
        )
    if holder is None:
        raise EngineUnavailableError(f"{agent}: no interface of this node has {address}")
    return address, holder, netdev.route_dev(spec.peer_address, address)


def _job(
    role: Role,
    spec: EngineSpec,
    address: str,
    holder: str | None,
    log_dir: str,
    own_device: str | None = None,
    **extra: Any,
) -> EngineJob:
    """The worker's job: pinned to the interface that holds the path's address with
    ``--rails`` (``spec.pin``) and for a loopback address (nothing else can carry it); the
    RDMA device filter the run's (or the path's NIC's), else this agent's own
    (``--rdma-device``), else none (the engine looks for itself)."""
    pin = holder if spec.pin or holder == "lo" else None
    return EngineJob(
        role=role,
        engine=spec.engine,
        address=address,
        peer_address=spec.peer_address,
        want=spec.want,
        netdev=pin,
        rdma_device=spec.rdma_device or own_device,
        length_bytes=spec.buffer_bytes,
        chunk_bytes=spec.chunk_bytes,
        depths=spec.depths,
        timeout_s=spec.timeout_s,
        log_dir=log_dir,
        **extra,
    )


def _failure(
    engine: EngineName, role: Role, agent: str, err: NetqualError
) -> tuple[ErrorCode, str]:
    tail = getattr(err, "log_tail", "")
    last = f"; log: ...{printable(tail[-400:], 400)}" if tail else ""
    code = (
        ErrorCode.UNAVAILABLE if isinstance(err, EngineUnavailableError) else ErrorCode.PROBE_FAILED
    )
    return code, f"{engine.value} {role.value} on {agent}: {err}{last}"


def serve_target(
    ch: Channel,
    body: Mapping[str, Any],
    agent: str,
    limits: AgentLimits,
    own_device: str | None = None,
    offered: Collection[EngineName] | None = None,
) -> None:
    """``engine.target``: a target worker, its descriptor, then wait for ``engine.stop``."""
    spec = EngineSpec.decode(Fields(body, "engine.target", ch.peer), limits)
    if (problem := available(spec.engine, offered)) is not None:
        ch.send_error(ErrorCode.UNAVAILABLE, f"{agent}: {problem}")
        return
    with tempfile.TemporaryDirectory(prefix="netqual-engine-") as tmp:
        try:
            address, holder, intended = _local(spec, agent)
            job = _job(Role.TARGET, spec, address, holder, tmp, own_device)
            deadline = time.monotonic() + START_S + spec.timeout_s + 2 * START_S
            worker = Worker(job, deadline, START_S)
        except EngineUnavailableError as err:
            ch.send_error(*_failure(spec.engine, Role.TARGET, agent, err))
            return
        with worker:
            try:
                ready = worker.message("descriptor")
            except EngineWorkerError as err:
                ch.send_error(*_failure(spec.engine, Role.TARGET, agent, err))
                return
            ch.send(
                "engine.descriptor",
                {
                    "descriptor": ready.get("descriptor"),
                    "settings": _strings(ready.get("settings")),
                    "intended": intended,
                },
            )
            _await_stop(ch, spec, limits)
            worker.send("stop")
            try:
                bye = worker.message("bye")
                written = bye.get("written")
                moved = bye.get("moved") if isinstance(bye.get("moved"), dict) else {}
                error = None
            except EngineWorkerError as err:
                written, moved, error = None, {}, str(err)
            note = worker.finish()
        ch.send(
            "engine.bye",
            TargetBye(
                written if isinstance(written, bool) else None, _ints(moved), note, error
            ).to_body(),
        )


def _await_stop(ch: Channel, spec: EngineSpec, limits: AgentLimits) -> None:
    """The coordinator's ``engine.stop``; anything else (or its channel closing) ends the
    worker with the session (the ``with worker`` kills it)."""
    ch.set_timeout(START_S + spec.timeout_s + START_S)
    try:
        msg = ch.recv()
    finally:
        ch.set_timeout(limits.idle_timeout_s)
    if msg.kind != "engine.stop":
        raise ProtocolError(ch.peer, f"expected 'engine.stop', got {msg.kind[:40]!r}")


def serve_initiate(
    ch: Channel,
    body: Mapping[str, Any],
    agent: str,
    limits: AgentLimits,
    own_device: str | None = None,
    offered: Collection[EngineName] | None = None,
) -> None:
    """``engine.initiate``: the initiator worker, every operation it reports kept (also
    when it fails or crashes after some), answered as ``engine.result``."""
    req = InitiateRequest.decode(body, limits, ch.peer)
    spec = req.spec
    if (problem := available(spec.engine, offered)) is not None:
        ch.send_error(ErrorCode.UNAVAILABLE, f"{agent}: {problem}")
        return
    with tempfile.TemporaryDirectory(prefix="netqual-engine-") as tmp:
        try:
            address, holder, intended = _local(spec, agent)
            job = _job(
                Role.INITIATOR, spec, address, holder, tmp, own_device,
                warmup=req.warmup, ops=req.ops, descriptor=req.descriptor,
                ops_list=req.operations, barrier=req.barrier,
            )  # fmt: skip
            limit = START_S + spec.timeout_s
            wait = BARRIER_S if req.barrier else 0.0
            worker = Worker(job, time.monotonic() + limit + wait + 10.0, limit)
        except EngineUnavailableError as err:
            ch.send_error(*_failure(spec.engine, Role.INITIATOR, agent, err))
            return
        ops: list[OpReply] = []
        result: dict[str, Any] = {}
        error = note = None
        with worker:
            try:
                if req.barrier:
                    _barrier(ch, worker, limits)
                while True:
                    msg = worker.message("op", "result")
                    if msg["type"] == "result":
                        result = msg
                        break
                    ops.append(_op(msg, req.ops, spec.depths))
                note = worker.finish()
            except EngineWorkerError as err:
                error = str(err) + (f"; log: ...{err.log_tail[-400:]}" if err.log_tail else "")
                note = worker.finish(0.0)
    if not ops and error is not None:
        ch.send_error(ErrorCode.PROBE_FAILED, f"{spec.engine.value} initiator on {agent}: {error}")
        return
    start = result.get("start_s")
    connect = result.get("connect_us")
    InitiatorReply(
        version=_string(result.get("version")) or version(spec.engine),
        ops=tuple(ops),
        start_s=float(start) if isinstance(start, (int, float)) else None,
        connect_us=float(connect) if isinstance(connect, (int, float)) else None,
        claimed=_strings(result.get("claimed")),
        settings=_strings(result.get("settings")),
        intended=intended,
        error=error,
        exit_note=note,
    ).send(ch)


def _barrier(ch: Channel, worker: Worker, limits: AgentLimits) -> None:
    """The fan-in's start barrier: the worker's ``ready`` (connected, one chunk read) as
    ``engine.ready``, then the coordinator's ``engine.go`` to the worker. Anything else
    from the coordinator, its silence past ``BARRIER_S`` or its channel closing raises:
    the session ends and the ``with worker`` kills the worker."""
    ready = worker.message("ready")
    first = ready.get("first_op_ns")
    connect = ready.get("connect_us")
    ch.send(
        "engine.ready",
        {
            "first_op_ns": first if isinstance(first, int) and first >= 0 else None,
            "connect_us": float(connect) if isinstance(connect, (int, float)) else None,
        },
    )
    ch.set_timeout(BARRIER_S)
    try:
        msg = ch.recv()
    finally:
        ch.set_timeout(limits.idle_timeout_s)
    if msg.kind != "engine.go":
        raise ProtocolError(ch.peer, f"expected 'engine.go', got {msg.kind[:40]!r}")
    worker.send("go")


def _op(msg: Mapping[str, Any], most: int, depths: tuple[int, ...]) -> OpReply:
    """An ``op`` line of this agent's own worker (read defensively all the same)."""
    samples = msg.get("completion_ns")
    values = [int(x) for x in samples if isinstance(x, int)] if isinstance(samples, list) else []
    first = msg.get("first_op_ns")
    elapsed = msg.get("elapsed_ns")
    errors = msg.get("errors")
    data_ok = msg.get("data_ok")
    depth = msg.get("depth")
    ended = msg.get("ended_mono_ns")
    if depth not in depths:
        raise EngineWorkerError("ops", f"worker wrote an op at depth {depth!r}")
    try:
        transport = EngineTransport(msg.get("transport"))
        op = EngineOp(msg.get("op"))
    except ValueError as err:
        raise EngineWorkerError("ops", f"worker wrote a bad op line: {err}") from err
    return OpReply(
        op=op,
        depth=int(str(depth)),
        first_op_ns=first if isinstance(first, int) and first >= 0 else None,
        completion_ns=np.asarray(values[:most], dtype=np.int64),
        elapsed_ns=elapsed if isinstance(elapsed, int) and elapsed >= 0 else 0,
        errors=errors if isinstance(errors, int) and errors >= 0 else 0,
        error=_string(msg.get("error")),
        data_ok=data_ok if isinstance(data_ok, bool) else None,
        moved=_ints(msg.get("moved")),
        lanes=_strings(msg.get("lanes"))[:MAX_LANES],
        transport=transport,
        ended_ns=ended if isinstance(ended, int) and 0 <= ended <= time.monotonic_ns() else None,
    )


def serve_engines(
    ch: Channel, body: Mapping[str, Any], offered: Collection[EngineName] | None = None
) -> None:
    """``engines``: each asked engine, imported in a worker of its own (never here);
    ``offered``: the engines this agent offers (None: every one installed)."""
    f = Fields(body, "engines", ch.peer)
    names = f.strings("engines", 16)
    found = []
    for name in names[: len(EngineName)]:
        try:
            engine = EngineName(name)
        except ValueError:
            raise BadRequestError(
                ch.peer, "engines.engines", f"unknown engine {name[:20]!r}"
            ) from None
        found.append(availability_to_body(check(engine, offered)))
    ch.send("engines", {"engines": found})


def check(engine: EngineName, offered: Collection[EngineName] | None = None) -> EngineAvailability:
    """Whether ``engine`` is offered, installed and loads on this node (a worker imports
    it). One the agent does not offer reads as not installed: it runs none of its cells."""
    if (problem := available(engine, offered)) is not None:
        return EngineAvailability(engine, False, problem=problem)
    with tempfile.TemporaryDirectory(prefix="netqual-engine-") as tmp:
        job = EngineJob(Role.CHECK, engine, "", "", log_dir=tmp)
        with Worker(job, time.monotonic() + CHECK_S, CHECK_S) as worker:
            try:
                msg = worker.message("check")
            except EngineWorkerError as err:
                return EngineAvailability(
                    engine, True, version(engine), problem=f"does not load: {err}"
                )
            worker.finish()
    imp = msg.get("import_s")
    return EngineAvailability(
        engine=engine,
        installed=True,
        version=_string(msg.get("version")),
        ucx=_string(msg.get("ucx")),
        import_s=float(imp) if isinstance(imp, (int, float)) else None,
        rdma_devices=_strings(msg.get("rdma_devices"))[:16],
    )


def _string(value: object) -> str | None:
    return printable(value, MAX_TEXT) if isinstance(value, str) else None


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(printable(x, MAX_TEXT) for x in value[:64] if isinstance(x, str))


def _ints(value: object) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {
        printable(str(k), 64): v
        for k, v in list(value.items())[:16]
        if isinstance(v, int) and v >= 0
    }
