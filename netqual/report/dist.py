"""Latency by topology tier and hop count: per group, a histogram of the paths' policy
metric on a log axis, stacked by class. Geometry in SVG pixels, computed here.

Over the path columns: a group code per path (hops, tier), a bin per path, and one
bincount over (group, bin, class); Python only loops over groups and non-empty bins."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from netqual.analysis.stats import median
from netqual.model.path import Tier
from netqual.model.verdict import Verdict
from netqual.report import fmt
from netqual.report.view import DistLabel, DistRow, Rect
from netqual.table.paths import NO_HOPS, TIERS, VERDICTS, FloatArray, IntArray
from netqual.table.run import Results

PLOT_W = 640.0
ROW_H = 56.0
BINS = 36
MIN_BAD_H = 6.0  # px: the thinnest a marginal or unsafe bar is drawn
_CHAR_PX = 6.2  # width of a character of the labels (11 px text), to keep them apart
_BAD = (Verdict.MARGINAL, Verdict.UNSAFE)
_CLS = {Verdict.SAFE: "safe", Verdict.MARGINAL: "marginal", Verdict.UNSAFE: "unsafe"}
_UNKNOWN_HOPS = 1 << 30  # sorts groups of unknown hop count last
# Groups sort by (hops, tier name): tier codes in alphabetical order, and each code's rank.
_BY_NAME = sorted(range(len(TIERS)), key=lambda k: TIERS[k].value)
_TIER_RANK = np.argsort(np.array(_BY_NAME, dtype=np.int64))


def group_label(hops: int | None, tier: Tier) -> str:
    text = "hops unknown" if hops is None else fmt.plural(hops, "hop")
    return f"{tier.value}, {text}"


class LogAxis:
    def __init__(self, lo_us: float, hi_us: float) -> None:
        self.lo = math.log10(max(lo_us, 0.1))
        self.hi = max(math.log10(max(hi_us, 0.2)), self.lo + 0.5)

    def x(self, value_us: float) -> float:
        v = math.log10(max(value_us, 10**self.lo))
        return min(PLOT_W, (v - self.lo) / (self.hi - self.lo) * PLOT_W)

    def xs(self, values_us: FloatArray) -> FloatArray:
        """``x`` of every value at once (the same arithmetic, elementwise)."""
        v = np.log10(np.maximum(values_us, 10**self.lo))
        out: FloatArray = np.minimum(PLOT_W, (v - self.lo) / (self.hi - self.lo) * PLOT_W)
        return out

    def ticks(self) -> list[tuple[float, str]]:
        out = []
        for e in range(math.floor(self.lo), math.ceil(self.hi) + 1):
            for m in (1, 2, 5):
                v = m * 10.0**e
                if self.lo <= math.log10(v) <= self.hi:
                    out.append((self.x(v), f"{v:g}"))
        return out


def _groups(results: Results) -> tuple[IntArray, IntArray]:
    """(the sorted distinct group codes, each path's index into them); a code is
    hops * tiers + the tier's alphabetical rank, so code order is (hops, tier name)."""
    t = results.paths
    hops = np.where(t.hops == NO_HOPS, _UNKNOWN_HOPS, t.hops)
    codes = hops * len(TIERS) + _TIER_RANK[t.tier]
    keys, inverse = np.unique(codes, return_inverse=True)
    return keys, inverse.reshape(-1)


def _key_label(code: int) -> str:
    hops, rank = divmod(code, len(TIERS))
    return group_label(None if hops == _UNKNOWN_HOPS else hops, TIERS[_BY_NAME[rank]])


def _heights(c: Sequence[int], peak: int) -> dict[Verdict, float]:
    """One bin's bar height per class present: proportional, but a marginal or unsafe bar
    never thinner than MIN_BAD_H (1,025 unsafe paths beside 500,000 safe ones would be a
    sliver); the safe bar gives up what the stack would overflow."""
    h = {
        v: max(MIN_BAD_H if v in _BAD else 1.5, c[v.rank] / peak * (ROW_H - 6))
        for v in Verdict
        if c[v.rank]
    }
    over = sum(h.values()) - (ROW_H - 2)
    if over > 0 and Verdict.SAFE in h:
        h[Verdict.SAFE] = max(1.5, h[Verdict.SAFE] - over)
    return h


def _rects(
    label: str, axis: LogAxis, counts: list[list[int]], metric: str
) -> tuple[list[Rect], dict[Verdict, tuple[float, float, float]]]:
    """One group's stacked bars (counts[bin][verdict rank]), and per class not offload-safe
    where its bars are: (left x, right x, the highest stack top over them)."""
    bin_w = PLOT_W / BINS
    peak = max((sum(c) for c in counts if sum(c)), default=1)
    rects = []
    spans: dict[Verdict, tuple[float, float, float]] = {}
    for b, c in enumerate(counts):
        if not sum(c):
            continue
        y = ROW_H
        lo_us = 10 ** (axis.lo + (axis.hi - axis.lo) * b / BINS)
        hi_us = 10 ** (axis.lo + (axis.hi - axis.lo) * (b + 1) / BINS)
        for verdict, h in _heights(c, peak).items():
            n = c[verdict.rank]
            y -= h
            title = (
                f"{label}: {fmt.plural(n, 'path')} {verdict.value} with "
                f"{metric} {fmt.us(lo_us)} to {fmt.us(hi_us)}"
            )
            rects.append(Rect(_CLS[verdict], b * bin_w + 0.5, y, bin_w - 1, h, title))
        for verdict in _BAD:
            if c[verdict.rank]:
                x0, _, top = spans.get(verdict, (b * bin_w, b * bin_w, ROW_H))
                spans[verdict] = (min(x0, b * bin_w), (b + 1) * bin_w, min(top, y))
    return rects, spans


def _labels(
    spans: dict[Verdict, tuple[float, float, float]], totals: Sequence[int]
) -> list[DistLabel]:
    """Each class not offload-safe labelled with its count above its bars (a class whose
    paths have no value, failed measurements, is said at the plot's left)."""
    out: list[DistLabel] = []
    right = -math.inf
    for verdict in _BAD:
        n = totals[verdict.rank]
        if not n:
            continue
        text = f"{n:,} {verdict.value}"
        if verdict not in spans:
            out.append(
                DistLabel(
                    _CLS[verdict],
                    6.0,
                    ROW_H / 2 + 4,
                    f"{text}, no RTT: the measurement failed",
                    "start",
                )
            )
            continue
        x0, x1, top = spans[verdict]
        half = len(text) * _CHAR_PX / 2
        x = min(max((x0 + x1) / 2, half + 2), PLOT_W - half - 2)
        y = max(11.0, top - 3)
        if x - half < right + 6:  # would overlap the label before it: one line lower
            y = min(ROW_H - 3, y + 13)
        out.append(DistLabel(_CLS[verdict], x, y, text))
        right = x + half
    return out


def distribution(
    results: Results, values: FloatArray
) -> tuple[list[DistRow], list[tuple[float, str]], list[tuple[float, str, str]]]:
    """values: the policy metric per path, in path order (NaN when not measured)."""
    policy = results.run.policy
    measured = ~np.isnan(values)
    seen = values[measured]
    lo = min(float(seen.min()) if len(seen) else math.inf, policy.safe_max_us / 4) * 0.9
    hi = max(float(seen.max()) if len(seen) else -math.inf, policy.unsafe_above_us * 1.5) * 1.1
    axis = LogAxis(lo, hi)
    keys, group = _groups(results)
    n_groups, n_cls = len(keys), len(VERDICTS)
    verdict = results.paths.verdict
    bins = np.minimum(BINS - 1, (axis.xs(seen) / (PLOT_W / BINS)).astype(np.int64))
    g = group[measured]
    hist = np.bincount(
        (g * BINS + bins) * n_cls + verdict[measured], minlength=n_groups * BINS * n_cls
    ).reshape(n_groups, BINS, n_cls)
    sizes = np.bincount(group, minlength=n_groups).tolist()
    by_class = np.bincount(group * n_cls + verdict, minlength=n_groups * n_cls)
    classes = by_class.reshape(n_groups, n_cls).tolist()
    order = np.lexsort((seen, g))
    by_group = np.split(seen[order], np.cumsum(np.bincount(g, minlength=n_groups))[:-1])
    rows = []
    for k, code in enumerate(keys.tolist()):
        label = _key_label(code)
        members = by_group[k].tolist()
        rects, spans = _rects(label, axis, hist[k].tolist(), policy.metric.value)
        rows.append(
            DistRow(
                label=label,
                count=sizes[k],
                counts={_CLS[v]: classes[k][v.rank] for v in Verdict if classes[k][v.rank]},
                rects=rects,
                p50_us=median(members),
                max_us=members[-1] if members else None,
                labels=_labels(spans, classes[k]),
            )
        )
    lines = [
        (axis.x(policy.safe_max_us), "safe", f"offload-safe <= {policy.safe_max_us:g} us"),
        (axis.x(policy.unsafe_above_us), "unsafe", f"unsafe > {policy.unsafe_above_us:g} us"),
    ]
    return rows, axis.ticks(), lines
