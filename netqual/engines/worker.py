"""``python -m netqual.engines.worker``: one engine role in its own process.

The agent (``netqual.engines.runner``) writes the job as one JSON line on stdin. Before
any native code loads, the worker points fd 1 and fd 2 at its log file (engines print
freely: glog, UCX) and speaks JSON lines on a private duplicate of the original stdout,
each flushed as written:

    {"type": "phase", "phase": "init"}                    as it goes (the parent keeps the last)
    {"type": "check", ...}                                check: version, what it would install
    {"type": "descriptor", "descriptor": {...}, ...}      target: then it waits for a stdin line
    {"type": "bye", "written": true, "moved": {...}}      target: after "stop" (or EOF)
    {"type": "ready", "first_op_ns": N, ...}              initiator with a barrier: then it
                                                          waits for a stdin line "go"
    {"type": "op", "op": "read", "completion_ns": [...]}  initiator: each operation as it ends
    {"type": "result", ...}                               initiator: the end
    {"type": "error", "phase": ..., "message": ...}       any role: why it stops

It leaves with ``os._exit`` after flushing everything: NIXL's UCX teardown can crash at
interpreter exit, and nothing after the last line matters. Its scheduling class is reset
to the ordinary one first: an agent may run as a real-time task (the lab's do), and a
spinning engine thread must never inherit that.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from netqual.engines import loop, netdev
from netqual.engines.interface import EngineJob, Role
from netqual.model.engine import EngineName, EngineOp

LOG_NAME = "worker.log"
UCX_LOG_NAME = "ucx.log"
EXIT_FAILED = 3
EXIT_ENV = "NETQUAL_ENGINE_EXIT"


class _Out:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.phase = "start"

    def emit(self, obj: dict[str, Any]) -> None:
        self.stream.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.stream.flush()

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.emit({"type": "phase", "phase": phase})


def _ordinary_scheduling() -> None:
    with contextlib.suppress(OSError, AttributeError, PermissionError):
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _take_over_stdio(log: Path) -> _Out:
    """JSON on a duplicate of fd 1; fd 1 and 2 (whatever native code prints) to the log."""
    sys.stdout.flush()
    sys.stderr.flush()
    proto = os.dup(1)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return _Out(os.fdopen(proto, "w", buffering=1))


def _leave(code: int) -> None:
    """Flush everything, then leave without running native destructors; with
    ``NETQUAL_ENGINE_EXIT=normal`` through the interpreter's own exit instead (to see the
    crash at exit that ``os._exit`` avoids; the parent keeps the result either way)."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
        ctypes.CDLL(None).fflush(None)
    if os.environ.get(EXIT_ENV) == "normal":
        sys.exit(code)
    os._exit(code)


def _module(name: EngineName) -> Any:
    if name is EngineName.MOONCAKE:
        from netqual.engines import mooncake

        return mooncake
    from netqual.engines import nixl

    return nixl


def _prepare(job: EngineJob, module: Any, log_dir: Path) -> tuple[str, ...]:
    if job.engine is EngineName.NIXL:
        return tuple(module.prepare(job, log_dir / UCX_LOG_NAME))
    return tuple(module.prepare(job))


def _engine_log(job: EngineJob, log_dir: Path) -> Path:
    """Where the engine says what it did: UCX's log file, Mooncake's glog (fd 2)."""
    return log_dir / (UCX_LOG_NAME if job.engine is EngineName.NIXL else LOG_NAME)


def _ours(job: EngineJob) -> Callable[[dict[str, int]], dict[str, int]]:
    """Counter deltas without the peer's own interface: where both ends share a network
    namespace (two Soft-RoCE devices on a veth pair in one guest), the peer's end of the
    link counts the same bytes and is not a NIC of this side."""
    own, peer = netdev.holder(job.address), netdev.holder(job.peer_address)

    def keep(moved: dict[str, int]) -> dict[str, int]:
        if peer is None or peer == own:
            return moved
        return {k: v for k, v in moved.items() if k != peer}

    return keep


def check(job: EngineJob, out: _Out) -> None:
    """Import the engine (its native libraries load) and say what it would install."""
    module = _module(job.engine)
    out.enter("import")
    t0 = time.monotonic()
    if job.engine is EngineName.MOONCAKE:
        __import__(module.MODULE)
        ucx = None
    else:
        module._api()
        ucx = module.ucx_version()
    devices = (
        sorted(p.name for p in netdev.SYS_INFINIBAND.glob("*"))
        if netdev.SYS_INFINIBAND.is_dir()
        else []
    )
    out.emit(
        {
            "type": "check",
            "engine": job.engine.value,
            "version": module.version(),
            "ucx": ucx,
            "import_s": round(time.monotonic() - t0, 3),
            "rdma_devices": devices[:16],
        }
    )


def target(job: EngineJob, out: _Out, log_dir: Path, t0: float) -> None:
    module = _module(job.engine)
    settings = _prepare(job, module, log_dir)
    out.enter("init")
    side = module.Target(job, _engine_log(job, log_dir))
    desc = side.descriptor(round(time.monotonic() - t0, 3))
    ours = _ours(job)
    before = netdev.counters()
    out.emit({"type": "descriptor", "descriptor": desc.to_wire(), "settings": list(settings)})
    out.enter("serving")
    sys.stdin.buffer.readline()  # "stop", or EOF when the agent is gone
    moved = ours(netdev.moved(before, netdev.counters()))
    out.emit({"type": "bye", "written": side.written(), "moved": moved})


def _barrier(job: EngineJob, side: Any, out: _Out, connect_us: float | None) -> int:
    """A fan-in reader: one operation alone (the connection is up after it), "ready", then
    wait for the agent's "go" (every reader of the level is ready). Its first operation's
    time, ns; anything but "go" (EOF: the agent is gone) ends the worker."""
    op = job.ops_list[0]
    out.enter(f"first_op:{op.value}")
    first_ns, error = loop.first_op(side, op, time.monotonic() + job.timeout_s)
    if error is not None or first_ns is None:
        raise RuntimeError(error or "first operation failed")
    out.emit({"type": "ready", "first_op_ns": first_ns, "connect_us": connect_us})
    out.enter("barrier")
    if sys.stdin.buffer.readline().strip() != b"go":
        raise RuntimeError("not released by the agent (no 'go')")
    return first_ns


def initiator(job: EngineJob, out: _Out, log_dir: Path, t0: float) -> None:
    module = _module(job.engine)
    settings = _prepare(job, module, log_dir)
    deadline = time.monotonic() + job.timeout_s
    out.enter("init")
    side = module.Initiator(job, _engine_log(job, log_dir))
    start_s = time.monotonic() - t0
    out.enter("connect")
    connect_us = side.connect()
    ours = _ours(job)
    first_ns: int | None = None
    if job.barrier:
        first_ns = _barrier(job, side, out, connect_us)
        deadline = time.monotonic() + job.timeout_s  # the operations' time, from "go"
    # every READ before any WRITE: a READ proves it brought the target's own bytes
    for op, depth in [(op, d) for op in job.ops_list for d in job.depths]:
        out.enter(f"first_op:{op.value}@{depth}")
        before = netdev.counters()
        timed = loop.run(side, op, depth, job.warmup, job.ops, deadline, first_ns is None)
        if first_ns is not None:
            timed = dataclasses.replace(timed, first_op_ns=first_ns)
            first_ns = None  # the barrier's operation was the first of the first cell only
        # the last completion on the host's monotonic clock, which the agent shares
        ended = time.monotonic_ns() - (time.perf_counter_ns() - timed.last_ns)
        moved = ours(netdev.moved(before, netdev.counters()))
        data_ok = None
        if op is EngineOp.READ and timed.error is None:
            data_ok = side.read_ok()
            side.refill()
        out.emit(
            {
                "type": "op",
                "op": op.value,
                "depth": depth,
                "first_op_ns": timed.first_op_ns,
                "completion_ns": list(timed.completion_ns),
                "elapsed_ns": timed.elapsed_ns,
                "ended_mono_ns": ended if timed.last_ns else None,
                "errors": timed.errors,
                "error": timed.error,
                "data_ok": data_ok,
                "moved": moved,
                "lanes": list(side.lanes(op)),
                "transport": side.transport(op).value,
            }
        )
        if timed.error is not None and time.monotonic() > deadline:
            break
    out.emit(
        {
            "type": "result",
            "version": side.version(),
            "start_s": round(start_s, 3),
            "connect_us": connect_us,
            "claimed": list(side.claimed()),
            "settings": list(settings),
        }
    )


def main() -> None:
    t0 = time.monotonic()
    _ordinary_scheduling()
    line = sys.stdin.buffer.readline()
    try:
        job = EngineJob.from_json(json.loads(line))
    except (ValueError, KeyError, TypeError) as err:
        sys.stdout.write(
            json.dumps({"type": "error", "phase": "job", "message": f"bad job: {err}"}) + "\n"
        )
        _leave(EXIT_FAILED)
        return
    log_dir = Path(job.log_dir or ".")
    out = _take_over_stdio(log_dir / LOG_NAME)
    code = 0
    try:
        if job.role is Role.CHECK:
            check(job, out)
        elif job.role is Role.TARGET:
            target(job, out, log_dir, t0)
        else:
            initiator(job, out, log_dir, t0)
    except BaseException as err:  # the engine's own exceptions: said, then leave
        traceback.print_exc()
        code = EXIT_FAILED
        with contextlib.suppress(Exception):
            out.emit(
                {
                    "type": "error",
                    "phase": out.phase,
                    "message": f"{type(err).__name__}: {err}"[:1000],
                }
            )
    _leave(code)


if __name__ == "__main__":
    main()
