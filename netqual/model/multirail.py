"""Multi-rail bandwidth records (``run --multirail``, docs/rails.md): one node pair read
over 1, 2, ... N of its rails at once. Records and the one rule that judges them; the
measurement is ``netqual.run.multirail``."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MIN_SHARE = 0.5  # an added rail must add at least this share of its line rate


@dataclass(frozen=True)
class RailLevel:
    """k rails read at once: each rail's goodput of the cell and their sum."""

    rails: int
    per_rail_gbps: tuple[float, ...]  # in rail order; the rails' own cells, side by side
    aggregate_gbps: float | None  # None when a rail's read failed
    gain_gbps: float | None  # over k - 1 rails; None for one rail or a failed level
    error: str | None = None


@dataclass(frozen=True)
class MultiRail:
    src: str  # nodes
    dst: str
    rails: tuple[int, ...]  # the rails used, in the order they were added
    chunk_bytes: int
    depth: int
    line_gbps: float  # one rail's line rate (the inventory's nic_gbps, else 100)
    min_share: float
    levels: tuple[RailLevel, ...]
    verdict: str
    short: bool  # some added rail added less than min_share of its line rate
