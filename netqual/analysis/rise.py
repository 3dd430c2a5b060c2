"""Is a path worse than in an earlier run? The p99 rise test and the run-to-run noise test,
one copy each, for ``diff``, the gate's baseline rules and the campaign's history rules.

The rise judges p99 whatever a policy's metric (the gate's key, ``max_p99_increase_pct``,
names it). The noise test compares two runs' 95% confidence intervals of one metric
(results ``ci95_by_metric``): where they overlap, the change lies within the noise.
"""

from __future__ import annotations

import numpy as np

from netqual.base.units import format_us
from netqual.table.paths import BoolArray, FloatArray, IntArray

# What is worse when nothing says otherwise (`diff` without --profile, a campaign's
# [history]): the re-qualification example profile's numbers (docs/gate-profiles/requalify.toml).
DEFAULT_INCREASE_PCT = 25.0
DEFAULT_MIN_DELTA_US = 5.0


def p99_rises(
    old_p99: FloatArray, new_p99: FloatArray, pct: float, min_delta_us: float
) -> BoolArray:
    """Where p99 rose by more than ``pct`` percent and at least ``min_delta_us``: the one
    p99 rise test of ``diff``, the gate's ``max_p99_increase_pct`` and the campaign's
    history rules (NaN = no RTT, and an old p99 of 0 or less never rose)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = new_p99 - old_p99
        rise = 100.0 * delta / old_p99
        got: BoolArray = (old_p99 > 0) & (rise > pct) & (delta >= min_delta_us)
    return got  # NaN compares False: no RTT on either side is never worse


def worse(
    old_rank: IntArray,
    new_rank: IntArray,
    old_p99: FloatArray,
    new_p99: FloatArray,
    pct: float,
    min_delta_us: float,
) -> BoolArray:
    """Worse than before: a worse class (a higher verdict rank) or a p99 rise
    (``p99_rises``): the one "worse" of ``diff`` and the campaign's movements. Run
    backwards (new as old) it is the campaign's "better", where not worse."""
    got: BoolArray = (new_rank > old_rank) | p99_rises(old_p99, new_p99, pct, min_delta_us)
    return got


def p99_rise_text(old_p99_us: float, new_p99_us: float, within_noise: bool = False) -> str:
    """'p99 a -> b us (+n%)': how a rise that ``p99_rises`` found is shown; ``within_noise``:
    the two runs' 95% CIs of p99 overlap (``overlapping``), which the text says."""
    rise = 100.0 * (new_p99_us - old_p99_us) / old_p99_us
    noise = ", within run-to-run noise: the 95% CIs overlap" if within_noise else ""
    return f"p99 {format_us(old_p99_us)} -> {format_us(new_p99_us)} us (+{rise:.0f}%{noise})"


def overlapping(
    a_low: FloatArray, a_high: FloatArray, b_low: FloatArray, b_high: FloatArray
) -> BoolArray:
    """Where two runs' 95% confidence intervals overlap: the change lies within their
    run-to-run noise (False where either has none, NaN)."""
    got: BoolArray = (a_low <= b_high) & (b_low <= a_high)
    return got
