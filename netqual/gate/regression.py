"""Rules against a baseline run (``--baseline OLD_RESULTS``). Paths match by (src, dst)
in either direction. Without a baseline they are skipped (or the profile demands one).

The two runs are joined on their columns: both tables' node codes into one name list, one
int64 key ``src * N + dst`` per path, sorted once and looked up with ``np.searchsorted``.
A key the baseline measured twice (a retest) stands for its last measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netqual.analysis.rise import overlapping, p99_rise_text, p99_rises
from netqual.base.units import plural as _plural
from netqual.gate.model import GateContext, Outcome, Status
from netqual.gate.rules import Rule, _split
from netqual.model.stats import Metric
from netqual.table.join import NOT_FOUND, PairIndex
from netqual.table.paths import (
    VERDICTS,
    BoolArray,
    IntArray,
    PathTable,
    union_names,
)

NONE = -1  # no baseline row


def baseline_rows(table: PathTable, rows: IntArray, base: PathTable) -> IntArray:
    """For each of ``rows``, the baseline row of the same (src, dst), else of (dst, src),
    else NONE."""
    index = PairIndex.of(base, union_names(table.names, base.names))
    if not len(index.keys):
        return np.full(len(rows), NONE, dtype=np.int64)
    pos = index.match(table, rows)
    got: IntArray = np.where(pos != NOT_FOUND, index.last[np.maximum(pos, 0)], NONE)
    return got


def _skipped(rule: Rule) -> Outcome:
    return Outcome(rule.name, Status.SKIP, "no baseline given (--baseline OLD_RESULTS)")


@dataclass(frozen=True)
class MaxP99IncreasePct(Rule):
    """No path's p99 up more than ``pct`` percent and ``min_delta_us`` over the baseline.
    It judges p99 whatever the policy's metric (its key names it; ``diff``'s "worse" is
    the same test). A finding whose two p99 intervals overlap says so and still fails:
    ``min_delta_us`` is the rule's noise floor, the intervals are for the reader."""

    pct: float
    min_delta_us: float = 0.0  # increases smaller than this are noise, whatever the percentage

    @property
    def key(self) -> str:
        return "max_p99_increase_pct"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        if ctx.baseline is None:
            return _skipped(self)
        base = ctx.baseline
        old = baseline_rows(table, rows, base)
        at = np.maximum(old, 0)  # a valid index everywhere; `joined` masks the misses
        joined = (old != NONE) & table.has_rtt[rows]
        if len(base):
            joined &= base.has_rtt[at]
            before = np.where(joined, base.values(Metric.P99)[at], 1.0)
        else:
            before = np.ones(len(rows))
        now = table.values(Metric.P99)[rows]
        offends = joined & p99_rises(before, now, self.pct, self.min_delta_us)
        was = dict(zip(rows[offends].tolist(), before[offends].tolist(), strict=True))
        noisy = set(rows[offends & _p99_noise(table, rows, base, at)].tolist())

        def detail(i: int) -> str:
            return p99_rise_text(was[i], float(table.values(Metric.P99)[i]), i in noisy)

        failing, waived = _split(table, rows, offends, ctx, detail)
        msg = f"{_plural(len(failing), 'path')} with p99 up more than {self.pct:g}%"
        return self._outcome(not failing, msg, failing, waived)


def _p99_noise(table: PathTable, rows: IntArray, base: PathTable, at: IntArray) -> BoolArray:
    """Per row, whether its p99 interval overlaps its baseline row's (``at``)."""
    p99 = Metric.P99
    if not len(base):
        return np.zeros(len(rows), dtype=np.bool_)
    return overlapping(
        base.ci95_low_us[p99][at], base.ci95_high_us[p99][at],
        table.ci95_low_us[p99][rows], table.ci95_high_us[p99][rows],
    )  # fmt: skip


@dataclass(frozen=True)
class NoClassDrop(Rule):
    @property
    def key(self) -> str:
        return "no_class_drop"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        if ctx.baseline is None:
            return _skipped(self)
        base = ctx.baseline
        old = baseline_rows(table, rows, base)
        was = np.full(len(rows), len(VERDICTS), dtype=np.int64)  # no baseline: never a drop
        if len(base):
            was = np.where(old != NONE, base.verdict[np.maximum(old, 0)], was)
        offends: BoolArray = table.verdict[rows] > was
        before = dict(zip(rows[offends].tolist(), was[offends].tolist(), strict=True))

        def detail(i: int) -> str:
            return f"{VERDICTS[before[i]].value} -> {VERDICTS[table.verdict[i]].value}"

        failing, waived = _split(table, rows, offends, ctx, detail)
        msg = f"{_plural(len(failing), 'path')} dropped a class"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class NoMissingPaths(Rule):
    @property
    def key(self) -> str:
        return "no_missing_paths"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        if ctx.baseline is None:
            return _skipped(self)
        base = ctx.baseline
        names = union_names(table.names, base.names)
        src, dst = table.codes(names)
        src, dst, n = src[rows], dst[rows], len(names)
        present = np.concatenate((src * n + dst, dst * n + src))
        old = PairIndex.of(base, names)
        # a baseline key stands for its last row, listed where the key first appeared
        gone = ~np.isin(old.keys, present) & self.scope.mask(base, ctx.nodes)[old.last]
        missing = old.last[gone][np.argsort(old.first[gone], kind="stable")]
        offends = np.ones(len(missing), dtype=np.bool_)
        failing, waived = _split(
            base, missing, offends, ctx, lambda _: "in the baseline, not measured now"
        )
        msg = f"{_plural(len(failing), 'baseline path')} missing"
        return self._outcome(not failing, msg, failing, waived)
