"""Synthetic, realistic ``Results`` records of any size, for report, gate and diff tests.

Deterministic for a given seed. Nodes are grouped in racks (compute ``gpuNN`` and a storage
node ``storNN`` every ``storage_every`` nodes); every unordered pair is one path (full mesh).
RTTs depend on the tier (same-rack vs cross-rack) and the transport; chosen nodes or rack
pairs are made slow so a results file has a realistic mix of classes. Verdicts and reasons
are ``policy.judge``'s, so the records are what the coordinator writes.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from netqual.analysis.policy import judge
from netqual.analysis.stats import bin_edges, bin_index
from netqual.model.node import Node, Role
from netqual.model.path import PathResult, Tier
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode, RunMeta
from netqual.model.stats import BulkStats, Metric, RttStats
from netqual.results import summarize, write_json
from netqual.table.paths import PathTable
from netqual.table.run import Results

_BASE_RTT_US = {
    ("tcp", Tier.SAME_RACK): 18.0,
    ("tcp", Tier.CROSS_RACK): 34.0,
    ("rdma", Tier.SAME_RACK): 3.2,
    ("rdma", Tier.CROSS_RACK): 5.5,
}
_LINE_RATE_GBPS = 100.0
HIST_BINS = 24


def make_nodes(n_nodes: int, *, rack_size: int | None = None, storage_every: int = 4) -> list[Node]:
    size = rack_size or (4 if n_nodes <= 16 else 16)
    nodes = []
    n_gpu = n_stor = 0
    for i in range(n_nodes):
        rack = f"r{i // size + 1:02d}"
        if storage_every and i % storage_every == storage_every - 1:
            n_stor += 1
            name, role = f"stor{n_stor:02d}", Role.STORAGE
        else:
            n_gpu += 1
            name, role = f"gpu{n_gpu:02d}", Role.COMPUTE
        nodes.append(
            Node(
                name=name,
                address=f"198.18.{i // 250}.{i % 250 + 1}",
                role=role,
                rack=rack,
                labels={"leaf": f"leaf-{rack}", "pod": f"p{i // (size * 8) + 1}"},
            )
        )
    return nodes


def rank_key(path: PathResult, metric: Metric) -> tuple[int, float]:
    """The per-record oracle of ``table.columns.worst_first``: sort with reverse=True (ties
    aside) and the worst path comes first; a path without RTT is the slowest of its class."""
    return (path.verdict.rank, path.rtt.value(metric) if path.rtt is not None else math.inf)


@functools.cache
def _hist_shape(
    spread_tenths: int, tail_hundredths: int, samples: int
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Bin edges as ratios to p50, and counts, of a log-normal-ish RTT distribution.

    Cached: a 512-node run has 130,816 paths but only a few hundred distinct shapes."""
    spread = spread_tenths / 10
    lo, hi = (
        math.log(0.8),
        math.log((1.0 + 0.9 * spread) * (1.2 + 0.3 * spread) * tail_hundredths / 100 * 1.06),
    )
    ratios = tuple(math.exp(lo + (hi - lo) * k / HIST_BINS) for k in range(HIST_BINS + 1))
    sigma = 0.05 + 0.12 * spread
    weights = [
        math.exp(-(math.log(math.sqrt(a * b)) ** 2) / (2 * sigma**2))
        for a, b in itertools.pairwise(ratios)
    ]
    total = sum(weights) or 1.0
    return ratios, tuple(max(0, round(w / total * samples)) for w in weights)


@functools.cache
def _grid(first: int, last: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The fixed grid's edges from bin ``first`` to ``last``, and each bin's geometric
    middle: a 512-node run's 130,816 histograms use a few dozen grids."""
    edges = bin_edges(first, last - first + 1)
    return edges, tuple(math.sqrt(a * b) for a, b in itertools.pairwise(edges))


def _grid_histogram(
    p50_us: float, spread: float, max_us: float, samples: int
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """A log-normal-ish shape on the fixed grid netqual's statistics use."""
    edges, middles = _grid(bin_index(p50_us * 0.8), bin_index(max_us))
    sigma = 0.05 + 0.12 * spread
    twice_var, log, exp = 2 * sigma**2, math.log, math.exp
    weights = [exp(-(log(m / p50_us) ** 2) / twice_var) for m in middles]
    total = sum(weights) or 1.0
    return edges, tuple(max(0, round(w / total * samples)) for w in weights)


def make_rtt(
    p50_us: float, spread: float, samples: int, rng: random.Random, *, histogram: bool
) -> RttStats:
    """Percentiles of a right-skewed distribution with median p50_us; more spread, longer tail."""
    spread = round(spread, 1)
    tail = round(rng.uniform(1.05, 1.6), 2)
    p90 = p50_us * (1.0 + 0.25 * spread)
    p99 = p50_us * (1.0 + 0.9 * spread) * rng.uniform(0.95, 1.05)
    p999 = p99 * (1.2 + 0.3 * spread)
    edges: tuple[float, ...] = ()
    counts: tuple[int, ...] = ()
    if histogram:
        edges, counts = _grid_histogram(p50_us, spread, p999 * tail, samples)
    return RttStats(
        samples=samples,
        min_us=p50_us * 0.8,
        p50_us=p50_us,
        p90_us=p90,
        p99_us=p99,
        p999_us=p999,
        max_us=p999 * tail,
        mean_us=p50_us * (1.0 + 0.08 * spread),
        stdev_us=p50_us * 0.05 * spread,
        untrusted=() if samples >= 10_000 else ("p999",),
        histogram_edges_us=edges,
        histogram_counts=counts,
    )


def make_bulk(rtt_p50_us: float, plan: ProbePlan) -> tuple[BulkStats, ...]:
    return tuple(
        BulkStats(
            chunk_bytes=chunk,
            depth=depth,
            reads=reads,
            goodput_gbps=min(
                _LINE_RATE_GBPS * 0.94, bits / ((rtt_p50_us + wire_depth) / depth * 1e3)
            ),
            completion_p50_us=(p50 := rtt_p50_us + wire_spread),
            completion_p99_us=p50 * 1.35,
            completion_max_us=p50 * 1.9,
        )
        for chunk, depth, reads, bits, wire_depth, wire_spread in _bulk_cells(plan)
    )


@functools.cache
def _bulk_cells(plan: ProbePlan) -> tuple[tuple[int, int, int, int, float, float], ...]:
    """Per cell of the plan what does not depend on the path: chunk, depth, reads, bits,
    the chunk's wire time x depth and x (1 + 0.6 (depth - 1))."""
    out = []
    for chunk in plan.chunks_bytes:
        wire_us = chunk * 8 / (_LINE_RATE_GBPS * 1e3)
        for depth in plan.depths:
            cell = (chunk, depth, plan.reads_for(chunk), chunk * 8)
            out.append((*cell, wire_us * depth, wire_us * (1 + 0.6 * (depth - 1))))
    return tuple(out)


def make_results(
    n_nodes: int = 8,
    *,
    seed: int = 7,
    rack_size: int | None = None,
    storage_every: int = 4,
    transport: str = "tcp",
    slow_nodes: Iterable[str] = (),
    slow_rack_pairs: Iterable[tuple[str, str]] = (),
    slow_paths: Iterable[tuple[str, str, float]] = (),
    marginal_fraction: float = 0.0,
    error_paths: int = 0,
    all_safe: bool = False,
    histogram: bool = True,
    bulk: bool = True,
    samples: int = 10_000,
    policy: Policy | None = None,
    started_at: str = "2026-11-29T12:00:00+00:00",
) -> Results:
    """A full-mesh run over ``n_nodes`` nodes.

    ``slow_nodes``: every path touching these has a p99 of 600-900 us (unsafe).
    ``slow_rack_pairs``: paths between these racks sit at 250-450 us (marginal).
    ``slow_paths``: (src, dst, p99_us) pins one path's p99 exactly.
    ``marginal_fraction``: that share of other paths is randomly marginal.
    ``error_paths``: that many paths failed to measure (unsafe, with an error).
    """
    rng = random.Random(seed)
    policy = policy or Policy()
    plan = ProbePlan(iterations=samples)
    nodes = make_nodes(n_nodes, rack_size=rack_size, storage_every=storage_every)
    slow = set(slow_nodes)
    slow_racks = {frozenset(p) for p in slow_rack_pairs}
    pinned = {(s, d): v for s, d, v in slow_paths}
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    failing = (
        set(rng.sample(range(len(pairs)), min(error_paths, len(pairs)))) if not all_safe else set()
    )
    paths = []
    for idx, (a, b) in enumerate(pairs):
        tier = Tier.SAME_RACK if a.rack == b.rack else Tier.CROSS_RACK
        hops = 2 if tier is Tier.SAME_RACK else 4
        base = _BASE_RTT_US[(transport, tier)] * rng.uniform(0.9, 1.15)
        spread = rng.uniform(0.8, 1.6)
        target_p99: float | None = None
        if all_safe:
            pass
        elif (a.name, b.name) in pinned:
            target_p99 = pinned[(a.name, b.name)]
        elif a.name in slow or b.name in slow:
            target_p99 = rng.uniform(600, 900)
        elif frozenset((a.rack, b.rack)) in slow_racks:
            target_p99 = rng.uniform(250, 450)
        elif rng.random() < marginal_fraction:
            target_p99 = rng.uniform(210, 480)
        if target_p99 is not None:
            spread = 3.0
            base = target_p99 / (1.0 + 0.9 * spread)
        rtt: RttStats | None = make_rtt(base, spread, samples, rng, histogram=histogram)
        if target_p99 is not None and rtt is not None:
            rtt = replace(rtt, p99_us=target_p99)
        error = None
        if idx in failing:
            rtt, error = None, "timeout: no reply within 120 s"
        cells = make_bulk(rtt.p50_us, plan) if (bulk and rtt is not None) else ()
        # judged as the coordinator judges a measured path: the same verdicts and reasons
        verdict, reasons = judge(policy, rtt, cells, error)
        paths.append(
            PathResult(
                src=a.name,
                dst=b.name,
                transport=transport,
                verdict=verdict,
                reasons=reasons,
                rtt=rtt,
                bulk=cells,
                hops=hops,
                tier=tier,
                error=error,
                started_at=started_at,
                duration_s=2.5,
            )
        )
    run = RunMeta(
        started_at=started_at,
        finished_at=started_at.replace("T12:", "T13:"),
        transport=transport,
        mode=Mode.FULL_MESH,
        policy=policy,
        plan=plan,
        clock={
            "function": "time.perf_counter_ns",
            "implementation": "clock_gettime(CLOCK_MONOTONIC)",
            "resolution_s": 1e-09,
            "monotonic": True,
        },
        host={"hostname": "coord01", "python": "3.11.2", "platform": "Linux-6.1-x86_64"},
        inventory="inventory.toml",
    )
    table = PathTable.from_paths(paths)
    return Results(
        run=run,
        nodes=tuple(nodes),
        paths=table,
        summary=summarize(table, policy.metric),  # the same table: built once
        tool_version="0.1.0",
    )


def write_results(path: Path, results: Results) -> Path:
    write_json(path, results)
    return path
