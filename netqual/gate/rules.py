"""Gate rules: tiny frozen objects whose ``check`` returns an Outcome naming failing paths.

Every rule sees only the rows of its scope (indexes into the run's ``PathTable``) and
decides which of them offend with numpy over the columns: a 1,024-node run is half a
million paths. Only offending rows become ``Finding`` records, their text read from the few
columns it needs. A path excused by an active waiver is moved from ``failing`` to
``waived``; count rules count only unwaived paths.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from netqual.base.units import format_us
from netqual.base.units import plural as _plural
from netqual.gate.model import Finding, GateContext, Outcome, Scope, Status
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.table.paths import VERDICTS, BoolArray, IntArray, PathTable

Detail = Callable[[int], str]  # the finding text of one offending row


def finding_detail(table: PathTable, i: int, metric: Metric) -> str:
    """Row i's verdict and what explains it, as a finding lists it."""
    verdict = VERDICTS[table.verdict[i]]
    error = table.error[i]
    if error:
        return f"{verdict.value}, error: {error}"
    if not table.has_rtt[i]:
        return f"{verdict.value}, no RTT samples"
    text = f"{verdict.value}, {metric.value} {format_us(float(table.values(metric)[i]))} us"
    # A verdict the metric alone does not explain (too few samples, a failed bulk read)
    # carries its first reason, so the gate never lists "marginal, p99 55.6 us" bare.
    reasons = table.reasons[i]
    first = reasons[0] if reasons else ""
    if verdict is not Verdict.SAFE and first and not first.startswith(f"{metric.value} "):
        text += f" ({first})"
    return text


def errored(table: PathTable, rows: IntArray) -> BoolArray:
    """Which of ``rows`` failed to measure (a non-empty ``error``; truthiness in C)."""
    flags: BoolArray = np.array(table.error, dtype=object)[rows].astype(np.bool_)
    return flags


def findings(table: PathTable, rows: IntArray, detail: Detail) -> list[Finding]:
    names = table.names
    ends = zip(rows.tolist(), table.src[rows].tolist(), table.dst[rows].tolist(), strict=True)
    return [Finding(names[s], names[d], detail(i)) for i, s, d in ends]


def _split(
    table: PathTable, rows: IntArray, offends: BoolArray, ctx: GateContext, detail: Detail
) -> tuple[list[Finding], list[Finding]]:
    """Findings of the offending ``rows`` (in row order): (failing, waived)."""
    hit = rows[offends]
    excused = ctx.waived(table, hit)
    return findings(table, hit[~excused], detail), findings(table, hit[excused], detail)


@dataclass(frozen=True)
class Rule(ABC):
    scope: Scope

    @property
    @abstractmethod
    def key(self) -> str:
        """The profile key that asks for this rule (e.g. ``max_unsafe``)."""

    @property
    def name(self) -> str:
        return self.key if self.scope.is_all else f"{self.scope.name}: {self.key}"

    @abstractmethod
    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        """Judge ``rows`` of ``table``: the paths of the rule's scope, in row order."""

    def _outcome(
        self, ok: bool, message: str, failing: list[Finding], waived: list[Finding]
    ) -> Outcome:
        status = Status.PASS if ok else Status.FAIL
        return Outcome(self.name, status, message, tuple(failing), tuple(waived))


@dataclass(frozen=True)
class MaxVerdictCount(Rule):
    verdict: Verdict
    limit: int

    @property
    def key(self) -> str:
        return "max_unsafe" if self.verdict is Verdict.UNSAFE else "max_marginal"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        offends = table.verdict[rows] == self.verdict.rank
        failing, waived = _split(
            table, rows, offends, ctx, lambda i: finding_detail(table, i, ctx.metric)
        )
        msg = f"{_plural(len(failing), self.verdict.value + ' path')} (limit {self.limit})"
        if waived:
            msg += f", {len(waived)} waived"
        return self._outcome(len(failing) <= self.limit, msg, failing, waived)


@dataclass(frozen=True)
class MinSafeFraction(Rule):
    fraction: float

    @property
    def key(self) -> str:
        return "min_safe_fraction"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        offends = table.verdict[rows] != Verdict.SAFE.rank
        failing, waived = _split(
            table, rows, offends, ctx, lambda i: finding_detail(table, i, ctx.metric)
        )
        total = len(rows)
        ok_count = total - len(failing)
        share = ok_count / total if total else 1.0
        msg = (
            f"{ok_count:,} of {total:,} paths offload-safe or waived "
            f"({share:.1%}, minimum {self.fraction:.1%})"
        )
        return self._outcome(share >= self.fraction, msg, failing, waived)


@dataclass(frozen=True)
class MaxMetric(Rule):
    metric: Metric
    limit_us: float

    @property
    def key(self) -> str:
        return "max_metric_us"  # the profile key; the message names the metric

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        # a path without RTT offends: nothing shows it is under the limit; nor does a
        # metric from too few samples to trust (a preliminary measurement never passes)
        name = self.metric.value
        untrusted = np.fromiter(
            (name in table.untrusted[i] for i in rows.tolist()), np.bool_, len(rows)
        )
        offends = (
            ~table.has_rtt[rows] | (table.values(self.metric)[rows] > self.limit_us) | untrusted
        )

        def detail(i: int) -> str:
            text = finding_detail(table, i, self.metric)
            if name in table.untrusted[i]:
                text += f" (untrusted: {int(table.samples[i]):,} samples are too few for {name})"
            return text

        failing, waived = _split(table, rows, offends, ctx, detail)
        msg = f"{_plural(len(failing), 'path')} above {self.limit_us:g} us {self.metric.value}"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class MinSamples(Rule):
    samples: int

    @property
    def key(self) -> str:
        return "min_samples"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        offends = table.samples[rows] < self.samples  # 0 where a path has no RTT
        failing, waived = _split(
            table, rows, offends, ctx, lambda i: f"{int(table.samples[i])} samples"
        )
        msg = f"{_plural(len(failing), 'path')} with fewer than {self.samples} samples"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class NoErrors(Rule):
    @property
    def key(self) -> str:
        return "no_errors"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        failing, waived = _split(
            table, rows, errored(table, rows), ctx, lambda i: f"error: {table.error[i]}"
        )
        msg = f"{_plural(len(failing), 'path')} failed to measure"
        return self._outcome(not failing, msg, failing, waived)


NO_WORKLOAD = "no workload verdict (run, report or gate with --workload)"


@dataclass(frozen=True)
class MinWorkloadVerdict(Rule):
    """Every path's workload verdict (docs/workload.md) at least this good. A path with
    no workload verdict (a run without --workload) fails: the gate asked for it."""

    verdict: Verdict
    implied: bool = False  # not asked by the profile: a workload always applies

    @property
    def key(self) -> str:
        return "min_workload_verdict"

    @property
    def name(self) -> str:
        return self.scope.name if self.implied else super().name

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        wl = table.workload
        if wl is None:
            offends = np.ones(len(rows), dtype=np.bool_)
            failing, waived = _split(table, rows, offends, ctx, lambda _: NO_WORKLOAD)
        else:
            got = wl.verdict[rows]  # -1: this path has no workload verdict
            offends = (got < 0) | (got > self.verdict.rank)

            def detail(i: int) -> str:
                if wl.verdict[i] < 0:
                    return NO_WORKLOAD
                speedup = float(wl.speedup[i])
                text = "no fetch" if np.isnan(speedup) else f"speedup {speedup:.1f}x"
                return f"workload {VERDICTS[wl.verdict[i]].value}, {text}"

            failing, waived = _split(table, rows, offends, ctx, detail)
        msg = f"{_plural(len(failing), 'path')} below {self.verdict.value} for the workload"
        if waived:
            msg += f", {len(waived)} waived"
        return self._outcome(not failing, msg, failing, waived)
