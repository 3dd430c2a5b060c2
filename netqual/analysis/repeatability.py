"""How much a run's own numbers move: the line a suspect or a warning must clear.

A node, NIC, rack pair or link is blamed only when it differs from its peers by more than
this (``analysis/localise``), and a warning about the run itself fires only beyond it.
Each measure says how far apart one path's metric reads when it is read twice, as a ratio
(larger over smaller, >= 1):

- ``floor``: 1.2, the practical noise line (the interference check's tolerance); the
  threshold is never below it;
- ``intervals``: the median over the paths of their metric's 95% confidence interval,
  high over low (``analysis/stats.quantile_ci``): how far the same samples could put it;
- ``interference``: the paths re-measured alone after the run (``run.interference``),
  run against alone, the 90th percentile over them (the p50 for a p50 policy, else the p99,
  which is what the check measures);
- ``retest``: a re-test's paths, their metric before and after, the 90th percentile.

The threshold is the largest. Bulk goodput has its own (``of_goodput``): the goodput
floor, 2x (above what the same path's goodput moved from run to run in the lab), and a
re-test's before and after. The 90th percentile of re-measured paths, not their median:
a path that reads 3x apart when measured again is what a noisy run looks like, and a
suspect must stand out from that. The intervals' median, not a high quantile: a faulty
path's tail is wide too (a lossy path's p99 sits on retransmission timeouts), and a high
quantile over a run with many faulty paths would hide exactly them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from netqual.model.run import Interference
from netqual.model.stats import Metric
from netqual.model.suspects import Repeatability, RepeatMeasure, RepeatSource
from netqual.table.paths import PathTable

FLOOR = 1.2
QUANTILE = 0.9
# Bulk goodput: the same path read 1.01x apart at the median and 1.44x at the 90th
# percentile (max 1.66x) over six runs of the star-faults lab (20 paths each, load 10-15
# on two cores, docs/report.md); a suspect on goodput must read less than half its peers'.
GOODPUT_FLOOR = 2.0

FloatArray = npt.NDArray[np.float64]


def ratios(a: FloatArray, b: FloatArray) -> FloatArray:
    """Larger over smaller per pair, where both are finite and positive."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    return np.maximum(a[ok], b[ok]) / np.minimum(a[ok], b[ok])


def remeasured(source: RepeatSource, a: FloatArray, b: FloatArray) -> RepeatMeasure | None:
    """The 90th percentile of the per-path ratios of two readings; None without any."""
    r = ratios(a, b)
    if not len(r):
        return None
    return RepeatMeasure(source, max(1.0, float(np.quantile(r, QUANTILE))), len(r))


def intervals(table: PathTable, metric: Metric) -> RepeatMeasure | None:
    """The median path's confidence interval of ``metric``, high over low."""
    low, high = table.ci95_low_us[metric], table.ci95_high_us[metric]
    r = ratios(high, low)
    if not len(r):
        return None
    return RepeatMeasure(RepeatSource.INTERVALS, max(1.0, float(np.median(r))), len(r))


def interference(inter: Interference | None, metric: Metric) -> RepeatMeasure | None:
    """Run against alone over the interference sample's paths."""
    if inter is None:
        return None
    ok = [s for s in inter.paths if s.error is None and s.alone_p99_us is not None]
    if metric is Metric.P50:
        run = [s.run_p50_us for s in ok]
        alone = [s.alone_p50_us if s.alone_p50_us is not None else np.nan for s in ok]
    else:
        run = [s.run_p99_us for s in ok]
        alone = [s.alone_p99_us if s.alone_p99_us is not None else np.nan for s in ok]
    return remeasured(RepeatSource.INTERFERENCE, np.array(run), np.array(alone))


def of_run(
    table: PathTable,
    metric: Metric,
    inter: Sequence[Interference | None] = (),
    more: Sequence[RepeatMeasure | None] = (),
) -> Repeatability:
    """The floor, the paths' intervals, each interference sample, and ``more`` (a
    re-test's before and after)."""
    found = [RepeatMeasure(RepeatSource.FLOOR, FLOOR, 0), intervals(table, metric)]
    found += [interference(i, metric) for i in inter]
    found += list(more)
    return Repeatability(tuple(m for m in found if m is not None))


def of_goodput(more: Sequence[RepeatMeasure | None] = ()) -> Repeatability:
    """The line for bulk goodput: its floor, and a re-test's before and after."""
    found = [RepeatMeasure(RepeatSource.GOODPUT_FLOOR, GOODPUT_FLOOR, 0), *more]
    return Repeatability(tuple(m for m in found if m is not None))


def describe(m: RepeatMeasure) -> str:
    """'x1.9 (8 paths re-measured alone)' for the evidence's text."""
    what = {
        RepeatSource.FLOOR: "the floor",
        RepeatSource.GOODPUT_FLOOR: "the goodput floor",
        RepeatSource.INTERVALS: f"the median 95% interval of {m.paths:,} paths",
        RepeatSource.INTERFERENCE: f"{m.paths:,} paths re-measured alone",
        RepeatSource.RETEST: f"{m.paths:,} paths re-tested",
    }[m.source]
    return f"x{m.ratio:.2f} ({what})"
