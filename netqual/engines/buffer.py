"""What both engines' sides share: the registered buffer, filled with its side's pattern,
and the checks that the bytes the engine moved are the other side's (a READ brings the
target's pattern back, a WRITE leaves the initiator's at the target), and each slot's
failure as the engine said it."""

from __future__ import annotations

import numpy as np

from netqual.engines.interface import EngineJob

TARGET_FILL = 0x5A  # the target's buffer: a READ must bring this back
INITIATOR_FILL = 0xA5  # the initiator's buffer: a WRITE must leave this at the target


class PatternBuffer:
    def __init__(self, job: EngineJob, size: int, fill: int) -> None:
        self.job = job
        self.buf = np.full(size, fill, dtype=np.uint8)
        self.addr = int(self.buf.ctypes.data)
        self.failed: dict[int, str] = {}

    def written(self) -> bool:
        """The initiator's WRITE reached this (target's) buffer: its first chunk holds the
        initiator's pattern."""
        return bool((self.buf[: max(1, self.job.chunk_bytes)] == INITIATOR_FILL).all())

    def read_ok(self) -> bool:
        """The READ brought the target's pattern into this (initiator's) buffer."""
        return bool((self.buf[: self.job.chunk_bytes] == TARGET_FILL).all())

    def refill(self) -> None:
        self.buf[:] = INITIATOR_FILL

    def failure(self, slot: int) -> str:
        return self.failed.get(slot, "unknown")
