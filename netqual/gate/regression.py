"""Rules against a baseline run (``--baseline OLD_RESULTS``). Paths match by (src, dst)
in either direction. Without a baseline they are skipped (or the profile demands one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from netqual.diff import p99_increase
from netqual.gate.model import GateContext, Outcome, Status
from netqual.gate.rules import Rule, _plural, _split
from netqual.models import PathResult


def baseline_of(
    path: PathResult, baseline: Mapping[tuple[str, str], PathResult]
) -> PathResult | None:
    return baseline.get(path.key) or baseline.get((path.dst, path.src))


def _skipped(rule: Rule) -> Outcome:
    return Outcome(rule.name, Status.SKIP, "no baseline given (--baseline OLD_RESULTS)")


@dataclass(frozen=True)
class MaxP99IncreasePct(Rule):
    pct: float
    min_delta_us: float = 0.0  # increases smaller than this are noise, whatever the percentage

    @property
    def key(self) -> str:
        return "max_p99_increase_pct"

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        if ctx.baseline is None:
            return _skipped(self)
        base = ctx.baseline

        def offends(p: PathResult) -> str | None:
            old = baseline_of(p, base)
            return None if old is None else p99_increase(old, p, self.pct, self.min_delta_us)

        failing, waived = _split(paths, ctx, offends)
        msg = f"{_plural(len(failing), 'path')} with p99 up more than {self.pct:g}%"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class NoClassDrop(Rule):
    @property
    def key(self) -> str:
        return "no_class_drop"

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        if ctx.baseline is None:
            return _skipped(self)
        base = ctx.baseline

        def offends(p: PathResult) -> str | None:
            old = baseline_of(p, base)
            if old is None or p.verdict.rank <= old.verdict.rank:
                return None
            return f"{old.verdict.value} -> {p.verdict.value}"

        failing, waived = _split(paths, ctx, offends)
        msg = f"{_plural(len(failing), 'path')} dropped a class"
        return self._outcome(not failing, msg, failing, waived)


@dataclass(frozen=True)
class NoMissingPaths(Rule):
    @property
    def key(self) -> str:
        return "no_missing_paths"

    def check(self, paths: Sequence[PathResult], ctx: GateContext) -> Outcome:
        if ctx.baseline is None:
            return _skipped(self)
        present = {p.key for p in paths} | {(p.dst, p.src) for p in paths}
        scoped_old = [
            p
            for k, p in ctx.baseline.items()
            if k not in present and self.scope.matches(p, ctx.nodes)
        ]
        failing, waived = _split(scoped_old, ctx, lambda p: "in the baseline, not measured now")
        msg = f"{_plural(len(failing), 'baseline path')} missing"
        return self._outcome(not failing, msg, failing, waived)
