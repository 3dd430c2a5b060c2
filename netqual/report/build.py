"""Assemble the ReportView from a Results record (and optional waivers)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from typing import Any

from netqual import __version__
from netqual.interference import headline
from netqual.models import PathResult, Results, Verdict, Waiver
from netqual.narrative import verdict_sentence
from netqual.report import fmt
from netqual.report.dist import distribution
from netqual.report.recommend import recommend
from netqual.report.view import (
    DETAIL_MAX,
    NODE_MATRIX_MAX,
    WORST_SHOWN,
    GateBanner,
    RackSpan,
    ReportView,
    WorstRow,
    directional,
    metric_values,
    node_cells,
    rack_cells,
    rack_spans,
    ranked_indexes,
    report_nodes,
)
from netqual.report.waivers import waiver_notes
from netqual.report.workload import workload_view
from netqual.units import format_size


def run_date(results: Results) -> str:
    try:
        t = dt.datetime.fromisoformat(results.run.started_at.replace("Z", "+00:00"))
    except ValueError:
        return results.run.started_at
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M UTC")


def _x10(v: float | None) -> int:
    return -1 if v is None else round(v * 10)


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


def compact_data(
    results: Results,
    order: Sequence[str],
    spans: Sequence[RackSpan],
    values: Sequence[float | None],
    ranked: Sequence[int],
    waived: dict[tuple[str, str], str],
) -> dict[str, Any]:
    """Every path in columns (for the node view and on-demand drill-down) plus full detail
    for a bounded set: the worst DETAIL_MAX paths, or all when there are no more."""
    index = {name: i for i, name in enumerate(order)}
    paths = results.paths
    detail_ids = ranked[:DETAIL_MAX]
    policy = results.run.policy
    return {
        "metric": policy.metric.value,
        "safe_max_us": policy.safe_max_us,
        "unsafe_above_us": policy.unsafe_above_us,
        "nodes": list(order),
        "racks": [[s.name, s.start, s.end] for s in spans],
        "src": [index[p.src] for p in paths],
        "dst": [index[p.dst] for p in paths],
        "cls": [p.verdict.rank + 1 for p in paths],
        "p50x10": [_x10(p.rtt.p50_us if p.rtt else None) for p in paths],
        "metricx10": [_x10(v) for v in values],
        "p999x10": [_x10(p.rtt.p999_us if p.rtt else None) for p in paths],
        "detail": {str(i): _detail(paths[i]) for i in detail_ids},
        "waived": {str(i): waived[p.key] for i, p in enumerate(paths) if p.key in waived},
    }


def methodology(results: Results) -> list[tuple[str, str]]:
    run, plan, pol = results.run, results.run.plan, results.run.policy
    clock = ", ".join(f"{k}={v}" for k, v in run.clock.items()) or "not recorded"
    host = ", ".join(f"{k}={v}" for k, v in run.host.items()) or "not recorded"
    bulk = (
        f"chunks {', '.join(format_size(c) for c in plan.chunks_bytes)}; depths "
        f"{', '.join(str(d) for d in plan.depths)}; {format_size(plan.bulk_bytes)} per cell, "
        f"at least {plan.min_reads} reads"
        if plan.bulk
        else "not measured (--no-bulk)"
    )
    return [
        (
            "Run",
            f"{run.started_at} to {run.finished_at}; {run.mode.value}; transport {run.transport}",
        ),
        ("Inventory", run.inventory or "not recorded"),
        (
            "Policy",
            f"{pol.metric.value} of small-message RTT: offload-safe <= {pol.safe_max_us:g} us, "
            "unsafe > "
            f"{pol.unsafe_above_us:g} us, marginal in between; at least {pol.min_samples:,} kept "
            "samples "
            "to be offload-safe; unreachable or erroring paths are unsafe",
        ),
        (
            "Ping-pong",
            f"{plan.size_bytes} B messages; {plan.iterations:,} kept iterations after "
            f"{plan.warmup:,} "
            "warm-up iterations (measured and discarded)",
        ),
        ("Bulk read", bulk),
        *_schedule_rows(results),
        ("Timeout", f"{plan.timeout_s:g} s per path"),
        (
            "RTT",
            "full round trip measured at the initiator with time.perf_counter_ns (perftest "
            "ib_write_lat and "
            "sockperf without --full-rtt print half of it); p99.9 is trusted only from 10,000 "
            "samples",
        ),
        ("Clock", clock),
        ("Coordinator", host),
        (
            "Versions",
            f"measured with {results.tool_name} {results.tool_version}; results schema "
            f"{results.schema_version}; report by netqual {__version__}",
        ),
    ]


def _schedule_rows(results: Results) -> list[tuple[str, str]]:
    """Methodology rows for how the run was scheduled (files from before phases: none)."""
    rows = []
    sched = results.run.schedule
    if sched:
        caps = ", ".join(
            f"{k} {sched[k]}" for k in ("bulk_per_node", "bulk_per_rack", "incast") if sched.get(k)
        )
        phases = sched.get("phases")
        text = f"{sched.get('name', '?')}: " + (
            " then ".join(str(x) for x in phases) if isinstance(phases, list) else "?"
        )
        rows.append(("Schedule", text + (f"; bulk caps: {caps}" if caps else "")))
    inter = results.interference
    if inter is not None:
        p50 = "-" if inter.p50_ratio is None else f"{inter.p50_ratio:.2f}"
        p99 = "-" if inter.p99_ratio is None else f"{inter.p99_ratio:.2f}"
        rows.append(
            (
                "Interference",
                f"{inter.sample} paths re-measured alone: run/alone p50 x{p50}, p99 x{p99}; "
                f"{inter.verdict_changes} verdict changes; affected tiers: "
                + (", ".join(t.value for t in inter.affected_tiers) or "none"),
            )
        )
    return rows


def _interference_headline(results: Results) -> str | None:
    if results.interference is None:
        return None
    return headline(results.interference, str(results.run.schedule.get("name")))


def build_view(
    results: Results,
    waivers: Sequence[Waiver] = (),
    today: dt.date | None = None,
    gate: GateBanner | None = None,
) -> ReportView:
    today = today or dt.datetime.now(dt.timezone.utc).date()
    notes = waiver_notes(results, waivers, today)
    waived: dict[tuple[str, str], str] = {}
    for n in notes:
        if not n.expired:
            text = f"until {n.waiver.until.isoformat()}, {n.waiver.owner}: {n.waiver.reason}"
            waived[(n.waiver.src, n.waiver.dst)] = waived[(n.waiver.dst, n.waiver.src)] = text
    nodes = report_nodes(results)
    spans = rack_spans(nodes)
    index = {n.name: i for i, n in enumerate(nodes)}
    node_level = len(nodes) <= NODE_MATRIX_MAX
    values = metric_values(results)
    ranked = ranked_indexes(results)
    if node_level:
        cells = node_cells(nodes, {p.key: p for p in results.paths}, results, waived)
    else:
        cells = rack_cells(spans, index, results, ranked)
    counts = Counter(p.verdict for p in results.paths)
    rack_of = {n.name: n.rack or "-" for n in nodes}
    metric = results.run.policy.metric.value
    worst = [
        WorstRow(
            index=i,
            path=results.paths[i],
            src_rack=rack_of.get(results.paths[i].src, "-"),
            dst_rack=rack_of.get(results.paths[i].dst, "-"),
            metric_text=fmt.us(values[i]),
            waived=waived.get(results.paths[i].key),
        )
        for i in ranked[:WORST_SHOWN]
    ]
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
        total=len(results.paths),
        policy_text=(
            f"{metric} RTT <= {pol.safe_max_us:g} us offload-safe, > {pol.unsafe_above_us:g} us "
            "unsafe, "
            f"marginal between; min {pol.min_samples:,} samples"
        ),
        date=run_date(results),
        transport=results.run.transport,
        mode=results.run.mode.value,
        n_nodes=len(nodes),
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
        recommendations=recommend(
            results, [f"{n.waiver.label} (expired {n.waiver.until})" for n in notes if n.expired]
        ),
        waivers=notes,
        methodology=methodology(results),
        data=compact_data(results, [n.name for n in nodes], spans, values, ranked, waived),
        workload=workload_view(results),
        interference=_interference_headline(results),
        directional=directional(results),
        gate=gate,
    )
