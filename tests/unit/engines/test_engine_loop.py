"""The timed loop both engines share (netqual.engines.loop), over a fake mover: depth is
kept, the warm-up drains before the kept operations, failures and the deadline stop it."""

from __future__ import annotations

import time

from netqual.engines.loop import Status, run
from netqual.model.engine import EngineOp


class FakeMover:
    """Each operation completes on its ``delay_polls``-th poll; ``fail_at``: that post fails."""

    def __init__(
        self, delay_polls: int = 2, fail_at: int | None = None, never: bool = False
    ) -> None:
        self.delay = delay_polls
        self.fail_at = fail_at
        self.never = never
        self.posted = 0
        self.polls: dict[int, int] = {}
        self.outstanding = 0
        self.most_outstanding = 0

    def post(self, op: EngineOp, slot: int) -> Status:
        self.posted += 1
        if self.fail_at is not None and self.posted == self.fail_at:
            return Status.FAILED
        self.polls[slot] = 0
        self.outstanding += 1
        self.most_outstanding = max(self.most_outstanding, self.outstanding)
        return Status.PENDING

    def poll(self, op: EngineOp, slot: int) -> Status:
        self.polls[slot] += 1
        if self.never or self.polls[slot] < self.delay:
            return Status.PENDING
        self.outstanding -= 1
        return Status.DONE

    def failure(self, slot: int) -> str:
        return f"slot {slot} broke"


def test_depth_is_kept_and_only_the_kept_operations_are_timed() -> None:
    m = FakeMover()
    t = run(m, EngineOp.READ, slots=8, warmup=5, ops=40, deadline=time.monotonic() + 10)
    assert t.error is None and t.errors == 0
    assert len(t.completion_ns) == 40
    assert m.posted == 1 + 5 + 40  # the first operation alone, the warm-up, the kept ones
    assert m.most_outstanding == 8
    assert t.first_op_ns is not None and t.first_op_ns > 0
    assert t.elapsed_ns > 0 and all(c > 0 for c in t.completion_ns)


def test_a_failed_post_stops_the_loop_keeping_what_completed() -> None:
    m = FakeMover(fail_at=12)
    t = run(m, EngineOp.WRITE, slots=2, warmup=0, ops=40, deadline=time.monotonic() + 10)
    assert t.errors == 1
    assert t.error is not None and "write failed after" in t.error and "slot" in t.error
    assert 0 < len(t.completion_ns) < 40


def test_a_first_operation_that_fails_is_the_cell_error() -> None:
    t = run(FakeMover(fail_at=1), EngineOp.READ, 4, 2, 10, time.monotonic() + 10)
    assert t.error == "first read failed: slot 0 broke"
    assert t.completion_ns == () and t.first_op_ns is None


def test_the_deadline_ends_operations_that_never_complete() -> None:
    t0 = time.monotonic()
    t = run(FakeMover(never=True), EngineOp.READ, 4, 0, 10, time.monotonic() + 0.3)
    assert time.monotonic() - t0 < 5
    assert t.error == "first read did not complete before the deadline"
