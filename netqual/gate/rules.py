"""Gate rules: tiny frozen objects whose ``check`` returns an Outcome naming failing paths.

Every rule sees only the paths of its scope. A path excused by an active waiver is moved
from ``failing`` to ``waived``; count rules count only unwaived paths.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from netqual.gate.model import Finding, GateContext, Outcome, Scope, Status
from netqual.models import Metric, PathResult, Verdict
from netqual.units import format_us


def describe(path: PathResult, metric: Metric) -> str:
    if path.error:
        return f"{path.verdict.value}, error: {path.error}"
    if path.rtt is None:
        return f"{path.verdict.value}, no RTT samples"
    text = f"{path.verdict.value}, {metric.value} {format_us(path.rtt.value(metric))} us"
    # A verdict the metric alone does not explain (too few samples, a failed bulk read)
    # carries its first reason, so the gate never lists "marginal, p99 55.6 us" bare.
    first = path.reasons[0] if path.reasons else ""
    if path.verdict is not Verdict.SAFE and first and not first.startswith(f"{metric.value} "):
        text += f" ({first})"
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _split(
    paths: Sequence[PathResult], ctx: GateContext, offends: Callable[[PathResult], str | None]
) -> tuple[list[Finding], list[Finding]]:
    failing: list[Finding] = []
    waived: list[Finding] = []
    for p in paths:
        detail = offends(p)
        if detail is None:
            continue
        (waived if ctx.waiver_for(p.key) else failing).append(Finding(p.src, p.dst, detail))
    return failing, waived


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
    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome: ...

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

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        failing, waived = _split(
            paths, ctx, lambda p: describe(p, ctx.metric) if p.verdict is self.verdict else None
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

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        failing, waived = _split(
            paths, ctx, lambda p: describe(p, ctx.metric) if p.verdict is not Verdict.SAFE else None
        )
        total = len(paths)
        ok_count = total - len(failing)
        share = ok_count / total if total else 1.0
        msg = (
            f"{ok_count} of {total} paths offload-safe or waived "
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

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        def offends(p: PathResult) -> str | None:
            if p.rtt is None:
                return describe(p, self.metric)
            return describe(p, self.metric) if p.rtt.value(self.metric) > self.limit_us else None

        failing, waived = _split(paths, ctx, offends)
        msg = f"{_plural(len(failing), 'path')} above {self.limit_us:g} us {self.metric.value}"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class MinSamples(Rule):
    samples: int

    @property
    def key(self) -> str:
        return "min_samples"

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        def offends(p: PathResult) -> str | None:
            n = p.rtt.samples if p.rtt else 0
            return f"{n} samples" if n < self.samples else None

        failing, waived = _split(paths, ctx, offends)
        msg = f"{_plural(len(failing), 'path')} with fewer than {self.samples} samples"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class NoErrors(Rule):
    @property
    def key(self) -> str:
        return "no_errors"

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        failing, waived = _split(paths, ctx, lambda p: f"error: {p.error}" if p.error else None)
        msg = f"{_plural(len(failing), 'path')} failed to measure"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class MinWorkloadVerdict(Rule):
    """Every path's workload verdict (docs/workload.md) at least this good. A path with
    no workload verdict (a run without --workload) fails: the gate asked for it."""

    verdict: Verdict

    @property
    def key(self) -> str:
        return "min_workload_verdict"

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        def offends(p: PathResult) -> str | None:
            wr = p.workload
            if wr is None:
                return "no workload verdict (run, report or gate with --workload)"
            if wr.verdict.rank <= self.verdict.rank:
                return None
            speedup = "no fetch" if wr.speedup is None else f"speedup {wr.speedup:.1f}x"
            return f"workload {wr.verdict.value}, {speedup}"

        failing, waived = _split(paths, ctx, offends)
        msg = f"{_plural(len(failing), 'path')} below {self.verdict.value} for the workload"
        if waived:
            msg += f", {len(waived)} waived"
        return self._outcome(not failing, msg, failing, waived)
