"""The multi-rail rule: does each added rail add bandwidth (docs/rails.md)? The records
it judges are ``netqual.model.multirail``."""

from __future__ import annotations

from collections.abc import Sequence

from netqual.model.multirail import RailLevel


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
