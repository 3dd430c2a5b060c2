"""The report's view model: everything the templates show, computed from a Results record.

Sizes stay bounded: per-path data for every path goes into one compact columnar JSON
blob (drawn on demand by the page's script); DOM nodes per path only for small clusters.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netqual.matrix import matrix_nodes
from netqual.models import Node, PathResult, Results, rank_key
from netqual.report import fmt
from netqual.report.recommend import Recommendation
from netqual.report.waivers import WaiverNote

if TYPE_CHECKING:
    from netqual.report.workload import WorkloadView

NODE_MATRIX_MAX = 48  # up to this many nodes the page draws one SVG cell per node pair
DETAIL_MAX = 500  # paths whose histogram, bulk cells and reasons are embedded
WORST_SHOWN = 20
DIST_BINS = 36


@dataclass(frozen=True)
class RackSpan:
    name: str
    start: int
    end: int  # exclusive, indexes into the ordered node list


@dataclass(frozen=True)
class Cell:
    x: int
    y: int
    cls: str  # css class: safe | marginal | unsafe | none | self
    title: str
    text: str = ""
    rack_pair: tuple[int, int] | None = None
    opacity: float = 1.0  # rack cells: paler when only a few of the pair's paths are bad


@dataclass(frozen=True)
class Rect:
    cls: str
    x: float
    y: float
    w: float
    h: float
    title: str


@dataclass(frozen=True)
class DistRow:
    """One topology group (tier and hop count) of the latency distribution plot."""

    label: str
    count: int
    counts: Mapping[str, int]  # css class -> paths
    rects: Sequence[Rect]
    p50_us: float | None  # median over the group's paths of the policy metric
    max_us: float | None


@dataclass(frozen=True)
class WorstRow:
    index: int
    path: PathResult
    src_rack: str
    dst_rack: str
    metric_text: str
    waived: str | None


@dataclass(frozen=True)
class ReportView:
    title: str
    sentence: str
    counts: Sequence[tuple[str, str, int]]  # (css class, label, count)
    total: int
    policy_text: str
    date: str
    transport: str
    mode: str
    n_nodes: int
    n_racks: int
    metric: str
    nodes: Sequence[Node]
    racks: Sequence[RackSpan]
    node_level: bool
    cells: Sequence[Cell]
    dist: Sequence[DistRow]
    dist_axis: Sequence[tuple[float, str]]  # x px, label
    dist_lines: Sequence[tuple[float, str, str]]  # x px, css class, label
    worst: Sequence[WorstRow]
    recommendations: Sequence[Recommendation]
    waivers: Sequence[WaiverNote]
    methodology: Sequence[tuple[str, str]]
    data: Mapping[str, Any] = field(default_factory=dict)
    workload: WorkloadView | None = None  # when the run was judged by a workload
    interference: str | None = None  # first-screen warning: the run disturbed itself
    directional: bool = False  # some pair measured both ways; else each cell pair mirrors one
    gate: GateBanner | None = None  # when the report was written with a gate profile


def report_nodes(results: Results) -> list[Node]:
    """The matrix rows, as the terminal orders them."""
    return matrix_nodes(results.nodes, results.paths)


def rack_spans(nodes: Sequence[Node]) -> list[RackSpan]:
    spans: list[RackSpan] = []
    for i, n in enumerate(nodes):
        name = n.rack or "(no rack)"
        if spans and spans[-1].name == name:
            spans[-1] = RackSpan(name, spans[-1].start, i + 1)
        else:
            spans.append(RackSpan(name, i, i + 1))
    return spans


def metric_value(p: PathResult, results: Results) -> float | None:
    return p.rtt.value(results.run.policy.metric) if p.rtt else None


def metric_values(results: Results) -> list[float | None]:
    """The policy metric of every path, in path order (None when not measured)."""
    metric = results.run.policy.metric
    return [p.rtt.value(metric) if p.rtt is not None else None for p in results.paths]


def ranked_indexes(results: Results) -> list[int]:
    """Path indexes, worst first (rank_key)."""
    keys = [rank_key(p, results.run.policy.metric) for p in results.paths]
    return sorted(range(len(keys)), key=keys.__getitem__, reverse=True)


def describe(p: PathResult, results: Results) -> str:
    """'gpu03 -> stor02, p99 812 us' or 'gpu03 -> stor02, error: timeout ...'."""
    v = metric_value(p, results)
    if p.error or v is None:
        return f"{fmt.path_label(p)}, {p.error or 'no samples'}"
    return f"{fmt.path_label(p)}, {results.run.policy.metric.value} {fmt.us(v)}"


def _compact_us(value_us: float) -> str:
    """At most four characters: 9.8, 31, 812, 1.3k, 45k."""
    if value_us < 10:
        return f"{value_us:.1f}"
    if value_us < 1000:
        return f"{value_us:.0f}"
    return f"{value_us / 1000:.1f}k" if value_us < 10_000 else f"{value_us / 1000:.0f}k"


def directional(results: Results) -> bool:
    """Some pair was measured in both directions (else one measurement per pair)."""
    keys = {p.key for p in results.paths}
    return any((d, s) in keys for s, d in keys)


@dataclass(frozen=True)
class GateBanner:
    """The gate's decision for the report's first screen (computed by the command)."""

    profile: str
    passed: bool
    failed_rules: tuple[str, ...]


def _cell_title(p: PathResult, results: Results, waived: Mapping[tuple[str, str], str]) -> str:
    text = f"{describe(p, results)}: {p.verdict.value}"
    w = waived.get(p.key)
    return f"{text} (waived: {w})" if w else text


def node_cells(
    nodes: Sequence[Node],
    by_key: Mapping[tuple[str, str], PathResult],
    results: Results,
    waived: Mapping[tuple[str, str], str],
) -> list[Cell]:
    cells = []
    for y, a in enumerate(nodes):
        for x, b in enumerate(nodes):
            if a.name == b.name:
                cells.append(Cell(x, y, "self", f"{a.name} (same node)"))
                continue
            p = by_key.get((a.name, b.name)) or by_key.get((b.name, a.name))
            if p is None:
                cells.append(Cell(x, y, "none", f"{a.name} -> {b.name}: not measured"))
            else:
                value = metric_value(p, results)
                cells.append(
                    Cell(
                        x,
                        y,
                        p.verdict.value.replace("offload-", ""),
                        _cell_title(p, results, waived),
                        # The value in the cell itself, so a printout carries it too.
                        text="fail" if value is None else _compact_us(value),
                    )
                )
    return cells


def rack_cells(
    spans: Sequence[RackSpan],
    index: Mapping[str, int],
    results: Results,
    ranked: Sequence[int],
) -> list[Cell]:
    rack_of = [0] * (max(index.values(), default=0) + 1)
    for r, s in enumerate(spans):
        for i in range(s.start, s.end):
            rack_of[i] = r
    agg: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    worst: dict[tuple[int, int], int] = {}
    paths = results.paths
    # walk worst-first so the first path seen in a rack pair is its worst
    for i in ranked:
        p = paths[i]
        ra, rb = rack_of[index[p.src]], rack_of[index[p.dst]]
        rank = p.verdict.rank
        agg[(ra, rb)][rank] += 1
        worst.setdefault((ra, rb), i)
        if ra != rb:
            agg[(rb, ra)][rank] += 1
            worst.setdefault((rb, ra), i)
    cells = []
    for y, a in enumerate(spans):
        for x, b in enumerate(spans):
            c = agg.get((y, x))
            if not c:
                cells.append(
                    Cell(x, y, "none", f"{a.name} -> {b.name}: not measured", rack_pair=(y, x))
                )
                continue
            n = sum(c)
            bad = c[1] + c[2]
            top = paths[worst[(y, x)]]
            title = (
                f"rack {a.name} -> {b.name}: {n:,} paths; {c[0]:,} offload-safe, "
                f"{c[1]:,} marginal, {c[2]:,} unsafe; "
                f"worst {describe(top, results)}. Click for the node view."
            )
            # a single bad path should not paint a 256-path rack pair as loudly as a dead uplink
            opacity = 1.0 if not bad else min(1.0, 0.4 + 0.6 * min(1.0, 4 * bad / n))
            cls = top.verdict.value.replace("offload-", "")
            cells.append(Cell(x, y, cls, title, str(bad) if bad else "", (y, x), opacity))
    return cells


__all__ = [
    "DETAIL_MAX",
    "NODE_MATRIX_MAX",
    "WORST_SHOWN",
    "Cell",
    "DistRow",
    "RackSpan",
    "Rect",
    "ReportView",
    "WorstRow",
    "describe",
    "rack_spans",
    "report_nodes",
]
