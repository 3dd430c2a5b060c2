"""Latency by topology tier and hop count: per group, a histogram of the paths' policy
metric on a log axis, stacked by class. Geometry in SVG pixels, computed here."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

from netqual.models import PathResult, Results, Verdict
from netqual.report import fmt
from netqual.report.view import DistRow, Rect

PLOT_W = 640.0
ROW_H = 56.0
BINS = 36
_CLS = {Verdict.SAFE: "safe", Verdict.MARGINAL: "marginal", Verdict.UNSAFE: "unsafe"}


def group_label(p: PathResult) -> str:
    hops = "hops unknown" if p.hops is None else fmt.plural(p.hops, "hop")
    return f"{p.tier.value}, {hops}"


def _group_key(p: PathResult) -> tuple[int, str]:
    return (p.hops if p.hops is not None else 1 << 30, p.tier.value)


class LogAxis:
    def __init__(self, lo_us: float, hi_us: float) -> None:
        self.lo = math.log10(max(lo_us, 0.1))
        self.hi = max(math.log10(max(hi_us, 0.2)), self.lo + 0.5)

    def x(self, value_us: float) -> float:
        v = math.log10(max(value_us, 10**self.lo))
        return min(PLOT_W, (v - self.lo) / (self.hi - self.lo) * PLOT_W)

    def ticks(self) -> list[tuple[float, str]]:
        out = []
        for e in range(math.floor(self.lo), math.ceil(self.hi) + 1):
            for m in (1, 2, 5):
                v = m * 10.0**e
                if self.lo <= math.log10(v) <= self.hi:
                    out.append((self.x(v), f"{v:g}"))
        return out


def distribution(
    results: Results, values: Sequence[float | None]
) -> tuple[list[DistRow], list[tuple[float, str]], list[tuple[float, str, str]]]:
    """values: the policy metric per path, in path order (None when not measured)."""
    policy = results.run.policy
    metric = policy.metric
    measured_all = [v for v in values if v is not None]
    lo = min([*measured_all, policy.safe_max_us / 4]) * 0.9
    hi = max([*measured_all, policy.unsafe_above_us * 1.5]) * 1.1
    axis = LogAxis(lo, hi)
    groups: dict[tuple[int, str], list[tuple[PathResult, float | None]]] = defaultdict(list)
    for p, v in zip(results.paths, values, strict=True):
        groups[_group_key(p)].append((p, v))
    bin_w = PLOT_W / BINS
    rows = []
    for key in sorted(groups):
        members = groups[key]
        paths = [p for p, _ in members]
        bins: dict[int, Counter[Verdict]] = defaultdict(Counter)
        for p, v in members:
            if v is not None:
                bins[min(BINS - 1, int(axis.x(v) / bin_w))][p.verdict] += 1
        peak = max((sum(c.values()) for c in bins.values()), default=1)
        rects = []
        for b, c in sorted(bins.items()):
            y = ROW_H
            lo_us = 10 ** (axis.lo + (axis.hi - axis.lo) * b / BINS)
            hi_us = 10 ** (axis.lo + (axis.hi - axis.lo) * (b + 1) / BINS)
            for verdict in Verdict:
                if not c[verdict]:
                    continue
                h = max(1.5, c[verdict] / peak * (ROW_H - 6))
                y -= h
                title = (
                    f"{group_label(paths[0])}: {fmt.plural(c[verdict], 'path')} {verdict.value} "
                    "with "
                    f"{metric.value} {fmt.us(lo_us)} to {fmt.us(hi_us)}"
                )
                rects.append(Rect(_CLS[verdict], b * bin_w + 0.5, y, bin_w - 1, h, title))
        measured = sorted(v for _, v in members if v is not None)
        rows.append(
            DistRow(
                label=group_label(paths[0]),
                count=len(paths),
                counts={_CLS[v]: n for v, n in Counter(p.verdict for p in paths).items()},
                rects=rects,
                p50_us=_median(measured),
                max_us=measured[-1] if measured else None,
            )
        )
    lines = [
        (axis.x(policy.safe_max_us), "safe", f"offload-safe <= {policy.safe_max_us:g} us"),
        (axis.x(policy.unsafe_above_us), "unsafe", f"unsafe > {policy.unsafe_above_us:g} us"),
    ]
    return rows, axis.ticks(), lines


def _median(sorted_values: Sequence[float]) -> float | None:
    n = len(sorted_values)
    if n == 0:
        return None
    mid = n // 2
    return sorted_values[mid] if n % 2 else (sorted_values[mid - 1] + sorted_values[mid]) / 2
