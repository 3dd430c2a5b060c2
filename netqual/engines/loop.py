"""The timed loop both engines run: ``depth`` operations outstanding, each timed from
post to completion, warm-up first and drained before the kept operations start, the whole
bounded by a deadline. The engine is reached through ``Mover`` (post one operation into a
slot, poll it), so Mooncake's batch ids and NIXL's transfer handles share one loop.
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass
from typing import Protocol

from netqual.model.engine import EngineOp


class Status(enum.Enum):
    DONE = "done"
    PENDING = "pending"
    FAILED = "failed"


class Mover(Protocol):
    def post(self, op: EngineOp, slot: int) -> Status:
        """Start one operation on buffer slot ``slot`` (its chunk at both ends); DONE when
        it completed at once, FAILED when it could not be posted."""
        ...

    def poll(self, op: EngineOp, slot: int) -> Status: ...

    def failure(self, slot: int) -> str:
        """Why the operation in ``slot`` failed, in the engine's words."""
        ...


@dataclass(frozen=True)
class Timed:
    first_op_ns: int | None
    completion_ns: tuple[int, ...]
    elapsed_ns: int
    errors: int
    error: str | None
    # the last kept completion on this process's perf_counter_ns clock (0: none); a fan-in
    # reader's operations are placed on its agent's clock from it
    last_ns: int = 0


def first_op(mover: Mover, op: EngineOp, deadline: float) -> tuple[int | None, str | None]:
    """One operation alone (a connection set up on first use shows here)."""
    t0 = time.perf_counter_ns()
    status = mover.post(op, 0)
    while status is Status.PENDING:
        if time.monotonic() > deadline:
            return None, f"first {op.value} did not complete before the deadline"
        status = mover.poll(op, 0)
    if status is Status.FAILED:
        return None, f"first {op.value} failed: {mover.failure(0)}"
    return time.perf_counter_ns() - t0, None


def run(
    mover: Mover,
    op: EngineOp,
    slots: int,
    warmup: int,
    ops: int,
    deadline: float,
    first: bool = True,
) -> Timed:
    """``warmup`` then ``ops`` operations, at most ``slots`` outstanding. Stops at the first
    failure or at ``deadline``, keeping what completed. ``first``: one operation alone
    before them (``first_op``); False when the caller ran it (a fan-in reader, before its
    start barrier)."""
    first_ns: int | None = None
    if first:
        first_ns, error = first_op(mover, op, deadline)
        if error is not None:
            return Timed(first_ns, (), 0, 1, error)
    total = warmup + ops
    posted_at = [0] * slots
    seq = [-1] * slots  # the operation number in each slot, -1 = free
    kept: list[int] = []
    nxt = done = 0
    started: int | None = None if warmup else time.perf_counter_ns()
    last = started or 0
    while done < total:
        for i in range(slots):
            if seq[i] >= 0 or nxt >= total:
                continue
            if nxt == warmup and started is None:
                if any(s >= 0 for s in seq):
                    break  # the warm-up drains before the kept operations start
                started = time.perf_counter_ns()
            seq[i], posted_at[i] = nxt, time.perf_counter_ns()
            nxt += 1
            status = mover.post(op, i)
            if status is Status.FAILED:
                return _failed(first_ns, kept, started, last, mover.failure(i), op, done, total)
            if status is Status.DONE:
                last = _complete(i, seq, posted_at, warmup, kept)
                done += 1
        progressed = False
        for i in range(slots):
            if seq[i] < 0:
                continue
            status = mover.poll(op, i)
            if status is Status.PENDING:
                continue
            if status is Status.FAILED:
                return _failed(first_ns, kept, started, last, mover.failure(i), op, done, total)
            last = _complete(i, seq, posted_at, warmup, kept)
            done += 1
            progressed = True
        if not progressed:
            if time.monotonic() > deadline:
                why = f"{op.value}: deadline reached after {done} of {total} operations"
                return _failed(first_ns, kept, started, last, why, op, done, total, timeout=True)
            os.sched_yield()  # the engine's own threads need the CPU on a small host
    elapsed = last - started if started is not None and kept else 0
    return Timed(first_ns, tuple(kept), elapsed, 0, None, last if kept else 0)


def _complete(i: int, seq: list[int], posted_at: list[int], warmup: int, kept: list[int]) -> int:
    now = time.perf_counter_ns()
    if seq[i] >= warmup:
        kept.append(now - posted_at[i])
    seq[i] = -1
    return now


def _failed(
    first_ns: int | None,
    kept: list[int],
    started: int | None,
    last: int,
    why: str,
    op: EngineOp,
    done: int,
    total: int,
    timeout: bool = False,
) -> Timed:
    elapsed = last - started if started is not None and kept else 0
    text = why if timeout else f"{op.value} failed after {done} of {total} operations: {why}"
    return Timed(first_ns, tuple(kept), elapsed, 1, text, last if kept else 0)
