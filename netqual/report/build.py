"""Assemble the ReportView from a Results record (and optional waivers)."""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netqual.analysis.matrix import group_paths, rail_groups
from netqual.analysis.narrative import (
    interference_headline,
    nodes_text,
    unmeasured_sentence,
    verdict_sentence,
)
from netqual.files.rundir import RESULTS_JSON
from netqual.model.path import PathResult
from netqual.model.policy import Waiver
from netqual.model.verdict import Verdict
from netqual.report import fmt
from netqual.report.decision import decision_view
from netqual.report.dist import distribution
from netqual.report.engine import engine_view
from netqual.report.fanin import fanin_panels
from netqual.report.fleet import fleet_view
from netqual.report.grid import NODE_MATRIX_MAX, pair_rows, report_nodes
from netqual.report.hosts import hosts_view
from netqual.report.methodology import methodology
from netqual.report.notes import Recommendation
from netqual.report.recommend import recommend
from netqual.report.view import (
    DETAIL_MAX,
    EMBED_ALL_MAX,
    EMBED_WORST,
    WORST_SHOWN,
    GateBanner,
    RackPairs,
    RackSpan,
    ReportView,
    WorstRow,
    both_directions,
    directional,
    metric_values,
    node_cells,
    opt,
    rack_cells,
    rack_pairs,
    rack_spans,
    ranked_indexes,
)
from netqual.report.waivers import WaiverNote, waiver_notes
from netqual.report.workload import workload_view
from netqual.table.paths import FloatArray, IntArray, worst_per_group
from netqual.table.run import Results
from netqual.workload.impact import two_verdicts_sentence


def run_date(results: Results) -> str:
    try:
        t = dt.datetime.fromisoformat(results.run.started_at.replace("Z", "+00:00"))
    except ValueError:
        return results.run.started_at
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M UTC")


def _x10(values: FloatArray) -> list[int]:
    """Tenths of a microsecond as integers, -1 for not measured (round half to even, as
    Python's round)."""
    out = np.full(len(values), -1, dtype=np.int64)
    ok = ~np.isnan(values)
    out[ok] = np.rint(values[ok] * 10).astype(np.int64)
    result: list[int] = out.tolist()
    return result


def _detail(p: PathResult) -> dict[str, Any]:
    d: dict[str, Any] = {
        "reasons": list(p.reasons),
        "error": p.error,
        "tier": p.tier.value,
        "hops": p.hops,
    }
    if p.rtt is not None:
        r = p.rtt
        d["rtt"] = list(r.summary_values())
        d["untrusted"] = list(r.untrusted)
        if r.histogram_counts:
            d["hist"] = {
                "edges": [round(e, 3) for e in r.histogram_edges_us],
                "counts": list(r.histogram_counts),
            }
    d["bulk"] = [
        [
            b.chunk_bytes,
            b.depth,
            round(b.goodput_gbps, 3),
            round(b.completion_p50_us, 2),
            round(b.completion_p99_us, 2),
        ]
        for b in p.bulk
        if b.error is None
    ]
    return d


def waived_rows(results: Results, waived: Mapping[tuple[str, str], str]) -> dict[int, str]:
    """Path index -> waiver text, for the paths a waiver in force covers (a key join of the
    waivers' pairs against every path's, no per-path lookup)."""
    t = results.paths
    code = {name: i for i, name in enumerate(t.names)}
    n = len(t.names)
    text = {code[a] * n + code[b]: w for (a, b), w in waived.items() if a in code and b in code}
    forward, _ = both_directions(results)
    rows = np.flatnonzero(np.isin(forward, np.fromiter(text, np.int64, len(text))))
    return {i: text[k] for i, k in zip(rows.tolist(), forward[rows].tolist(), strict=True)}


def embedded_rows(
    results: Results,
    order: Sequence[str],
    ranked: IntArray,
    pairs: RackPairs,
    waived: Sequence[int],
) -> IntArray:
    """The paths whose values a summarised page carries, in path order: the EMBED_WORST
    worst, the worst path of every node and of every rack pair (so each suspect node and
    each cell of the rack matrix has its evidence), and the waived ones."""
    t = results.paths
    a, b = t.codes(order)
    rows = np.arange(len(t))
    worst = worst_per_group(
        np.concatenate((a, b)), np.concatenate((rows, rows)), ranked, len(order)
    )
    node_worst = worst[worst >= 0]
    rows = np.concatenate(
        (
            ranked[:EMBED_WORST],
            node_worst,
            pairs.worst[pairs.worst >= 0],
            np.asarray(waived, dtype=np.int64),
        )
    )
    out: IntArray = np.unique(rows)
    return out


def class_grid(results: Results, order: Sequence[str]) -> str:
    """The class of every ordered node pair (0 not measured, 1 offload-safe, 2 marginal,
    3 unsafe; row-major over ``order``; a pair measured one way shows in both cells), two
    bits a cell, three cells a base64 letter: 350 kB for 1,024 nodes. The summarised
    page's node view draws from it, so every bad node or rack block stays visible."""
    grid = pair_rows(results, order)
    cls = np.where(grid >= 0, results.paths.verdict[np.maximum(grid, 0)] + 1, 0)
    cls = np.concatenate((cls, np.zeros(-len(cls) % 3, dtype=np.int64)))
    triples = cls.reshape(-1, 3)
    letters = (triples[:, 0] << 4) | (triples[:, 1] << 2) | triples[:, 2]
    text: str = np.frombuffer(_B64, dtype=np.uint8)[letters].tobytes().decode("ascii")
    return text


_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def summarised(total: int) -> bool:
    """Whether a page embeds only a bounded set of paths (see EMBED_ALL_MAX)."""
    return total > EMBED_ALL_MAX


def compact_data(
    results: Results,
    order: Sequence[str],
    spans: Sequence[RackSpan],
    values: FloatArray,
    ranked: IntArray,
    waived: Mapping[int, str],
    rows: IntArray,
) -> dict[str, Any]:
    """Paths in columns (for the node view and on-demand drill-down): every path, or on a
    summarised page the ``rows`` given (embedded_rows) plus the class grid of every node
    pair; full detail for a bounded set: the worst DETAIL_MAX paths, or all when there are
    no more. Path numbers in the page (``detail``, ``waived``, the worst table) index the
    embedded columns."""
    t = results.paths
    a, b = t.codes(order)
    embed = {i: k for k, i in enumerate(rows.tolist())}
    detail_ids = ranked[:DETAIL_MAX].tolist()
    policy = results.run.policy
    metric_rows = values[rows]
    data: dict[str, Any] = {
        "metric": policy.metric.value,
        "safe_max_us": policy.safe_max_us,
        "unsafe_above_us": policy.unsafe_above_us,
        "nodes": list(order),
        "racks": [[s.name, s.start, s.end] for s in spans],
        "src": a[rows].tolist(),
        "dst": b[rows].tolist(),
        "cls": (t.verdict[rows] + 1).tolist(),
        "p50x10": _x10(t.rtt["p50"][rows]),
        "metricx10": _x10(metric_rows),
        "p999x10": _x10(t.rtt["p999"][rows]),
        "detail": {str(embed[i]): _detail(t.row(i)) for i in detail_ids if i in embed},
        "waived": {str(embed[i]): w for i, w in sorted(waived.items()) if i in embed},
    }
    rail_of = {n.name: n.nic.rail for n in results.nodes if n.nic is not None}
    if rail_of:  # the matrix's rail selector: each row's rail, -1 for none
        data["rails"] = [rail_of.get(name, -1) for name in order]
    if len(rows) < len(t):
        data["summary"] = {"paths": len(t), "embedded": len(rows)}
        data["grid"] = class_grid(results, order)
    return data


def _interference_headline(results: Results) -> str | None:
    return interference_headline(results)


def _waived_pairs(notes: Sequence[WaiverNote]) -> dict[tuple[str, str], str]:
    """(src, dst) -> text for every waiver in force, in both directions."""
    waived: dict[tuple[str, str], str] = {}
    for n in notes:
        if not n.expired:
            text = f"until {n.waiver.until.isoformat()}, {n.waiver.owner}: {n.waiver.reason}"
            waived[(n.waiver.src, n.waiver.dst)] = waived[(n.waiver.dst, n.waiver.src)] = text
    return waived


def _summary_note(total: int, embedded: int, source: str | None) -> str:
    """What a summarised page leaves out, and where the rest is (``source``: the results
    file the report was made from, when the caller knows it)."""
    where = source or "the run's results.json"
    arg = shlex.quote(source) if source else RESULTS_JSON
    return (
        f"Summarised: {total:,} paths are more than a page should carry, so this one has the "
        f"counts of every rack pair, the class of every node pair (node view), and values "
        f"and drill-down for {embedded:,} paths: the {EMBED_WORST:,} worst, and the worst "
        "path of every node and of every rack pair (histograms, bulk cells and reasons for "
        f"the {DETAIL_MAX:,} worst). Every path is in {where}; "
        f"netqual report {arg} --csv paths.csv writes one row per path."
    )


def build_view(
    results: Results,
    waivers: Sequence[Waiver] = (),
    today: dt.date | None = None,
    gate: GateBanner | None = None,
    source: str | None = None,
) -> ReportView:
    """The report's view; ``source`` names the results file in a summarised page's note."""
    today = today or dt.datetime.now(dt.timezone.utc).date()
    notes = waiver_notes(results, waivers, today)
    waived = _waived_pairs(notes)
    nodes = report_nodes(results)
    order = [n.name for n in nodes]
    spans = rack_spans(nodes)
    node_level = len(nodes) <= NODE_MATRIX_MAX
    values = metric_values(results)
    ranked = ranked_indexes(results)
    pairs = rack_pairs(results, order, spans, ranked)
    cells = node_cells(nodes, results, waived) if node_level else rack_cells(results, spans, pairs)
    waived_at = waived_rows(results, waived)
    total = len(results.paths)
    rows = (
        embedded_rows(results, order, ranked, pairs, list(waived_at))
        if summarised(total)
        else np.arange(total, dtype=np.int64)
    )
    counts = results.paths.counts()
    rack_of = {n.name: n.rack or "-" for n in nodes}
    metric = results.run.policy.metric.value
    worst = []
    for i in ranked[:WORST_SHOWN].tolist():
        p = results.paths.row(i)
        worst.append(
            WorstRow(
                index=int(np.searchsorted(rows, i)),  # its place in the embedded columns
                path=p,
                src_rack=rack_of.get(p.src, "-"),
                dst_rack=rack_of.get(p.dst, "-"),
                metric_text=fmt.us(opt(values[i])),
                waived=waived.get(p.key),
            )
        )
    dist_rows, axis, lines = distribution(results, values)
    pol = results.run.policy
    sentence = verdict_sentence(results)
    return ReportView(
        title=f"netqual: {sentence}",
        sentence=sentence,
        counts=[
            ("safe", "offload-safe", counts[Verdict.SAFE]),
            ("marginal", "marginal", counts[Verdict.MARGINAL]),
            ("unsafe", "unsafe", counts[Verdict.UNSAFE]),
        ],
        total=total,
        policy_text=(
            f"{metric} RTT <= {pol.safe_max_us:g} us offload-safe, > {pol.unsafe_above_us:g} us "
            "unsafe, "
            f"marginal between; min {pol.min_samples:,} samples"
        ),
        date=run_date(results),
        transport=results.run.transport,
        mode=results.run.mode.value,
        n_nodes=len(nodes),
        cluster_text=nodes_text(nodes),
        n_racks=len([s for s in spans if s.name != "(no rack)"]),
        metric=metric,
        nodes=nodes,
        racks=spans,
        node_level=node_level,
        cells=cells,
        dist=dist_rows,
        dist_axis=axis,
        dist_lines=lines,
        worst=worst,
        recommendations=_cards(
            results, [f"{n.waiver.label} (expired {n.waiver.until})" for n in notes if n.expired]
        ),
        waivers=notes,
        methodology=methodology(results),
        data=compact_data(results, order, spans, values, ranked, waived_at, rows),
        workload=workload_view(results),
        interference=_interference_headline(results),
        directional=directional(results),
        gate=gate,
        summarised=_summary_note(total, len(rows), source) if len(rows) < total else None,
        incomplete=unmeasured_sentence(results),
        two_verdicts=two_verdicts_sentence(results),
        decision=decision_view(results),
        fleet=fleet_view(results),
        hosts=hosts_view(results),
        fanin=fanin_panels(results),
        engine=engine_view(results),
        **_rails(results),
    )


def _cards(results: Results, expired: Sequence[str]) -> list[Recommendation]:
    """ "What to do" beside the decision's ranked fixes: with a fix to list, only the cards
    that say what no fix says (issue 36: "Keep KV offload inside each rack" under a fix
    "cross-rack paths ... keep KV offload inside each rack", every thing to do twice)."""
    cards = recommend(results, expired)
    d = results.decision
    if d is None or not d.blocking:
        return cards
    return [c for c in cards if not c.fix]


def _rails(results: Results) -> dict[str, Any]:
    """The per-rail parts of the view (docs/rails.md); none without NICs."""
    grouping = rail_groups(results.paths)
    if grouping is None or results.paths.nics is None:
        return {}
    return {
        "rails": tuple(results.paths.nics.rails()),
        "rail_rows": tuple(group_paths(results.paths, grouping)),
    }
