"""The three classes every path, node and run is judged into."""

from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    SAFE = "offload-safe"
    MARGINAL = "marginal"
    UNSAFE = "unsafe"

    @property
    def rank(self) -> int:
        """0 best .. 2 worst; used to order paths and to detect a class drop."""
        return _VERDICT_RANK[self]


_VERDICT_RANK = {Verdict.SAFE: 0, Verdict.MARGINAL: 1, Verdict.UNSAFE: 2}
