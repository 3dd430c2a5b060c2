"""Rules over the run's interference check (``interference`` in the results file): a gate
can refuse results that were measured in a way that disturbed itself.

Both rules look at the sampled paths that fall in the rule's scope. A run without an
interference check fails them: nothing shows that its numbers are undisturbed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netqual.analysis import stats
from netqual.analysis.interference import TOLERANCE, by_tier, tier_record
from netqual.base.units import format_us
from netqual.gate.model import (
    Finding,
    GateContext,
    Outcome,
    Status,
    pair_codes,
)
from netqual.gate.rules import Rule
from netqual.model.run import SampledPath
from netqual.table.paths import IntArray, PathTable, union_names


def _in_scope(table: PathTable, rows: IntArray, ctx: GateContext) -> list[SampledPath] | None:
    """The measured sampled paths whose (src, dst) is one of ``rows`` (few: a sample)."""
    if ctx.interference is None:
        return None
    sampled = [s for s in ctx.interference.paths if s.error is None]
    names = union_names(table.names, (e for s in sampled for e in (s.src, s.dst)))
    keys = pair_codes(names, ((s.src, s.dst) for s in sampled))
    inside = np.isin(keys, table.pair_keys(names, rows)).tolist()
    return [s for s, ok in zip(sampled, inside, strict=True) if ok]


def _finding(s: SampledPath) -> Finding:
    ratio = s.p99_ratio
    detail = (
        f"p99 {format_us(s.run_p99_us)} us in the run, {format_us(s.alone_p99_us or 0)} us alone"
    )
    return Finding(s.src, s.dst, detail + (f" (x{ratio:.1f})" if ratio else ""))


def _not_checked(rule: Rule) -> Outcome:
    return Outcome(
        rule.name,
        Status.FAIL,
        "the results have no interference check (the run used --interference-sample 0)",
    )


@dataclass(frozen=True)
class InterferenceClean(Rule):
    """No tier may be affected (netqual.analysis.interference: its median p99 ratio above the
    tolerance and at least one sampled path disturbed), among the sampled paths in scope."""

    @property
    def key(self) -> str:
        return "interference_clean"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        sampled = _in_scope(table, rows, ctx)
        if sampled is None:
            return _not_checked(self)
        tolerance = ctx.interference.tolerance if ctx.interference else TOLERANCE
        affected = [
            t.value
            for t, members in by_tier(sampled).items()
            if tier_record(t, members, tolerance).affected
        ]
        failing = [_finding(s) for s in sampled if s.disturbed and s.tier.value in affected]
        if affected:
            msg = f"the run disturbed its own measurement on {', '.join(affected)}"
        else:
            msg = f"{len(sampled)} sampled paths match their alone measurement"
        status = Status.FAIL if affected else Status.PASS
        return Outcome(self.name, status, msg, tuple(failing))


@dataclass(frozen=True)
class MaxInterferenceRatio(Rule):
    """Median over the sampled paths of run p99 / alone p99 at most ``limit``."""

    limit: float

    @property
    def key(self) -> str:
        return "max_interference_p99_ratio"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        sampled = _in_scope(table, rows, ctx)
        if sampled is None:
            return _not_checked(self)
        ratios = [r for s in sampled if (r := s.p99_ratio) is not None]
        if not ratios:
            return Outcome(self.name, Status.PASS, "no sampled path in scope")
        median = stats.median(ratios)
        assert median is not None
        failing = [_finding(s) for s in sampled if (s.p99_ratio or 0) > self.limit]
        ok = median <= self.limit
        msg = f"median run/alone p99 ratio {median:.2f} (limit {self.limit:g})"
        return Outcome(self.name, Status.PASS if ok else Status.FAIL, msg, tuple(failing))
