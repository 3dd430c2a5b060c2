"""The report's view model: everything the templates show, computed from a Results record.

Sizes stay bounded: per-path values go into one compact columnar JSON blob (drawn on
demand by the page's script), for every path up to EMBED_ALL_MAX paths, beyond that for a
bounded set plus the class of every node pair; DOM nodes per path only for small clusters.
Everything that runs over all paths works on the PathTable columns; a path becomes a
record (``row``) only when it is shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from netqual.analysis.matrix import GroupRow
from netqual.base.units import format_us
from netqual.model.node import Node
from netqual.model.path import PathResult, path_label
from netqual.report import fmt
from netqual.report.decision import DecisionView
from netqual.report.fleet import FleetView
from netqual.report.grid import NODE_MATRIX_MAX, pair_rows, report_nodes
from netqual.report.hosts import HostsView
from netqual.report.notes import Recommendation
from netqual.report.waivers import WaiverNote
from netqual.table.paths import FloatArray, IntArray, worst_per_group
from netqual.table.run import Results

if TYPE_CHECKING:
    from netqual.report.engine import EngineView
    from netqual.report.fanin import FaninPanel
    from netqual.report.workload import WorkloadView

DETAIL_MAX = 500  # paths whose histogram, bulk cells and reasons are embedded
# Up to this many paths the page embeds every path's values (about 23 bytes a path: 1.2 MB);
# a larger run is summarised: per rack pair, the class of each node pair, and the values of
# a bounded set of paths (EMBED_WORST worst, the worst of each node and rack pair). At a
# 1,024-node full mesh (523,776 paths) the page would otherwise be 12 MB.
EMBED_ALL_MAX = 50_000
EMBED_WORST = 10_000
WORST_SHOWN = 20
# A rack pair's cell takes the colour of its worst class only when that class holds at
# least this share of the pair's paths; a rarer worse class marks the cell's corner. (Pale
# colour for a small share read as "everything is marginal" where 0.2% of paths were.)
MATERIAL_SHARE = 0.05
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
    mark: str = ""  # rack cells: css class of a worse class too rare to colour the cell


@dataclass(frozen=True)
class Rect:
    cls: str
    x: float
    y: float
    w: float
    h: float
    title: str


@dataclass(frozen=True)
class DistLabel:
    """A class's count written on its bars (SVG pixels within the row's plot)."""

    cls: str
    x: float
    y: float
    text: str
    anchor: str = "middle"


@dataclass(frozen=True)
class DistRow:
    """One topology group (tier and hop count) of the latency distribution plot."""

    label: str
    count: int
    counts: Mapping[str, int]  # css class -> paths
    rects: Sequence[Rect]
    p50_us: float | None  # median over the group's paths of the policy metric
    max_us: float | None
    labels: Sequence[DistLabel] = ()  # each class that is not offload-safe, with its count


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
    cluster_text: str  # "8 nodes", "8 NICs on 4 nodes" (as the terminal says it)
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
    summarised: str | None = None  # the note of a page that embeds only some paths
    incomplete: str | None = None  # first-screen alert: pairs not measured, how to finish
    two_verdicts: str | None = None  # with a workload: both counts, which one the gate uses
    decision: DecisionView | None = None  # the one answer and the fixes, first on the page
    fleet: FleetView | None = None  # the "Configuration" section (report/fleet.py)
    hosts: HostsView | None = None  # the "Host path" section (report/hosts.py)
    fanin: Sequence[FaninPanel] = ()  # run --fanin: per storage node, on the first screen
    engine: EngineView | None = None  # run --engine: each path's engine cell (report/engine.py)
    # Paths between NICs (docs/rails.md): the rails for the matrix's selector, and per rail
    # (label, paths, p50 median, p99 worst, safe, marginal, unsafe) for the "by rail" table.
    rails: tuple[int, ...] = ()
    rail_rows: tuple[GroupRow, ...] = ()
    material_pct: int = round(MATERIAL_SHARE * 100)  # the rack matrix's legend


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


def metric_values(results: Results) -> FloatArray:
    """The policy metric of every path, in path order (NaN when not measured)."""
    return results.paths.values(results.run.policy.metric)


def ranked_indexes(results: Results) -> IntArray:
    """Path indexes, worst first (rank_key; ties in path order)."""
    return results.paths.ranked(results.run.policy.metric)


def opt(value: float) -> float | None:
    """A column value as the formatters take it: None for NaN (not measured)."""
    return None if math.isnan(value) else float(value)


def path_summary(p: PathResult, results: Results) -> str:
    """'gpu03 -> stor02, p99 812 us' or 'gpu03 -> stor02, error: timeout ...'."""
    v = metric_value(p, results)
    if p.error or v is None:
        return f"{fmt.path_label(p.src, p.dst)}, {p.error or 'no samples'}"
    return f"{fmt.path_label(p.src, p.dst)}, {results.run.policy.metric.value} {fmt.us(v)}"


def both_directions(results: Results) -> tuple[IntArray, IntArray]:
    """Every path's (src, dst) and (dst, src) as one int64 each, ``a * names + b`` over the
    table's node codes: joins on pairs without a dict of string tuples."""
    t = results.paths
    n = len(t.names)
    return t.src * n + t.dst, t.dst * n + t.src


def directional(results: Results) -> bool:
    """Some pair was measured in both directions (else one measurement per pair)."""
    forward, reverse = both_directions(results)
    return bool(np.isin(reverse, forward).any())


@dataclass(frozen=True)
class GateBanner:
    """The gate's decision for the report's first screen (computed by the command)."""

    profile: str
    passed: bool
    failed_rules: tuple[str, ...]


def _cell_title(p: PathResult, results: Results, waived: Mapping[tuple[str, str], str]) -> str:
    text = f"{path_summary(p, results)}: {p.verdict.value}"
    w = waived.get(p.key)
    return f"{text} (waived: {w})" if w else text


def node_cells(
    nodes: Sequence[Node],
    results: Results,
    waived: Mapping[tuple[str, str], str],
) -> list[Cell]:
    """One cell per node pair (small clusters only: NODE_MATRIX_MAX)."""
    grid = pair_rows(results, [n.name for n in nodes]).tolist()
    rows: dict[int, PathResult] = {}
    cells = []
    for y, a in enumerate(nodes):
        for x, b in enumerate(nodes):
            i = grid[y * len(nodes) + x]
            if a.name == b.name:
                cells.append(Cell(x, y, "self", f"{a.name} (same node)"))
                continue
            if i < 0:
                cells.append(Cell(x, y, "none", f"{path_label(a.name, b.name)}: not measured"))
                continue
            p = rows.get(i) or rows.setdefault(i, results.paths.row(i))
            value = metric_value(p, results)
            cells.append(
                Cell(
                    x,
                    y,
                    p.verdict.value.replace("offload-", ""),
                    _cell_title(p, results, waived),
                    # The value in the cell itself, so a printout carries it too: the
                    # terminal matrix's digits (1,435, never 1.4k; the font shrinks to fit)
                    text="fail" if value is None else format_us(value),
                )
            )
    return cells


@dataclass(frozen=True)
class RackPairs:
    """Every ordered rack pair's paths by class, and its worst path (a path between two racks
    counts in both cells of the pair, as the symmetric matrix draws it)."""

    counts: IntArray  # (racks * racks, 3): paths per class (Verdict.rank)
    worst: IntArray  # racks * racks: path index of the worst path, -1 for no path


def rack_pairs(
    results: Results, order: Sequence[str], spans: Sequence[RackSpan], ranked: IntArray
) -> RackPairs:
    """Per ordered rack pair: bincount of ``ra * R + rb`` by class, and the worst path as the
    first of the pair in ``ranked`` order."""
    n_racks = len(spans)
    rack_of_pos = np.zeros(max(len(order), 1), dtype=np.int64)
    for r, s in enumerate(spans):
        rack_of_pos[s.start : s.end] = r
    a, b = results.paths.codes(order)
    ra, rb = rack_of_pos[a], rack_of_pos[b]
    cross = ra != rb
    keys = np.concatenate((ra * n_racks + rb, (rb * n_racks + ra)[cross]))
    verdict = np.concatenate((results.paths.verdict, results.paths.verdict[cross]))
    counts = np.bincount(keys * 3 + verdict, minlength=n_racks * n_racks * 3)
    rows = np.arange(len(results.paths))
    members = np.concatenate((rows, rows[cross]))
    worst = worst_per_group(keys, members, ranked, n_racks * n_racks)
    return RackPairs(counts.reshape(n_racks * n_racks, 3), worst)


def rack_cell_classes(counts: Sequence[int]) -> tuple[str, str]:
    """(fill, corner mark) of a rack pair with ``counts`` paths per class (Verdict.rank):
    the fill is the worst class holding at least MATERIAL_SHARE of the paths, the mark the
    worst class present when that is worse ("" when none). One unsafe path of 1,024 marks a
    green cell red; 1,024 marginal paths of 1,024 fill it amber."""
    n = sum(counts)
    names = ("safe", "marginal", "unsafe")
    worst = max((k for k in range(3) if counts[k]), default=0)
    fill = max((k for k in range(3) if counts[k] and counts[k] >= MATERIAL_SHARE * n), default=0)
    return names[fill], names[worst] if worst > fill else ""


def rack_cells(results: Results, spans: Sequence[RackSpan], pairs: RackPairs) -> list[Cell]:
    """One cell per rack pair: its worst class, its non-safe count, its worst path."""
    counts, worst = pairs.counts.tolist(), pairs.worst.tolist()
    rows: dict[int, PathResult] = {}
    cells = []
    for y, a in enumerate(spans):
        for x, b in enumerate(spans):
            k = y * len(spans) + x
            if worst[k] < 0:
                cells.append(
                    Cell(
                        x,
                        y,
                        "none",
                        f"{path_label(a.name, b.name)}: not measured",
                        rack_pair=(y, x),
                    )
                )
                continue
            c = counts[k]
            n = sum(c)
            bad = c[1] + c[2]
            top = rows.get(worst[k]) or rows.setdefault(worst[k], results.paths.row(worst[k]))
            title = (
                f"rack {a.name} -> {b.name}: {n:,} paths; {c[0]:,} offload-safe, "
                f"{c[1]:,} marginal, {c[2]:,} unsafe; "
                f"worst {path_summary(top, results)}. Click for the node view."
            )
            cls, mark = rack_cell_classes(c)
            cells.append(Cell(x, y, cls, title, f"{bad:,}" if bad else "", (y, x), mark))
    return cells


__all__ = [
    "DETAIL_MAX",
    "MATERIAL_SHARE",
    "NODE_MATRIX_MAX",
    "WORST_SHOWN",
    "Cell",
    "DistLabel",
    "DistRow",
    "RackSpan",
    "Rect",
    "ReportView",
    "WorstRow",
    "path_summary",
    "rack_spans",
    "report_nodes",
]
