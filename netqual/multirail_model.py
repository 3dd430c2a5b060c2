"""Multi-rail bandwidth records (``run --multirail``, docs/rails.md): one node pair read
over 1, 2, ... N of its rails at once. Records and the one rule that judges them; the
measurement is ``netqual.run.multirail``."""

from __future__ import annotations

from collections.abc import Sequence
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


def judge(levels: Sequence[RailLevel], line_gbps: float, min_share: float) -> tuple[str, bool]:
    """The verdict line: the first added rail that adds less than ``min_share`` of its line
    rate (the Mooncake #1617 case: 3 NICs 135 GB/s, 8 NICs 118 GB/s), or that each adds
    enough. Says only what was measured: a failed level ends the comparison."""
    want = min_share * line_gbps
    for level in levels[1:]:
        if level.aggregate_gbps is None or level.gain_gbps is None:
            return (f"not judged: {level.rails} rails at once failed ({level.error})", False)
        if level.gain_gbps < want:
            return (
                f"going from {level.rails - 1} to {level.rails} rails adds "
                f"{level.gain_gbps:.2f} Gbit/s, less than {min_share:.0%} of one rail's "
                f"{line_gbps:g} Gbit/s line rate: more rails do not add bandwidth on this pair",
                True,
            )
    if len(levels) < 2:
        return ("not judged: one rail only", False)
    return (
        f"each added rail adds at least {min_share:.0%} of one rail's {line_gbps:g} Gbit/s "
        "line rate",
        False,
    )
