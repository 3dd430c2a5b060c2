"""Judging a path by a workload: the chunk fetch time against the budget.

The fetch time of one chunk for all ranks of a node is the bulk cell at chunk
``chunk_bytes`` and depth ``ranks_per_node`` (``--workload`` adds it to the probe plan).
On an older run without that cell, it is estimated from the nearest measured cells and
the result says so (``interpolated``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.errors import UsageError, WorkloadError
from netqual.models import (
    AgentLimits,
    BulkStats,
    PathResult,
    ProbePlan,
    Results,
    Verdict,
    WorkloadResult,
)
from netqual.pathtable import PathTable
from netqual.units import format_bytes, format_duration_us, format_size, format_us
from netqual.workload.model import BaselineKind, Workload


def add_to_plan(plan: ProbePlan, w: Workload, limits: AgentLimits | None = None) -> ProbePlan:
    """The plan with the workload's cell (chunk_bytes at depth ranks_per_node) in its grid."""
    if not plan.bulk:
        raise UsageError("--no-bulk", "a workload is judged by bulk reads; drop --no-bulk")
    limits = limits or AgentLimits()
    if w.chunk_bytes > limits.max_chunk_bytes:
        raise WorkloadError(
            w.source,
            f"one chunk per rank is {format_bytes(w.chunk_bytes)}, over the agent's limit of "
            f"{format_bytes(limits.max_chunk_bytes)} per read: lower chunk_tokens",
            "workload.chunk_tokens",
        )
    if w.ranks_per_node > limits.max_depth:
        raise WorkloadError(
            w.source,
            f"{w.ranks_per_node} reads in flight is over the agent's limit of {limits.max_depth}",
            "workload.ranks_per_node",
        )
    chunks = plan.chunks_bytes
    depths = plan.depths
    if w.chunk_bytes not in chunks:
        chunks = (*chunks, w.chunk_bytes)
    if w.ranks_per_node not in depths:
        depths = (*depths, w.ranks_per_node)
    return dataclasses.replace(plan, chunks_bytes=chunks, depths=depths)


@dataclass(frozen=True)
class Fetch:
    """Completion time of one node's chunk reads, measured or estimated."""

    p50_us: float
    p99_us: float
    interpolated: bool
    basis: str  # the cells it came from, in words


def _cell_label(b: BulkStats) -> str:
    return f"{format_size(b.chunk_bytes)} x depth {b.depth}"


def estimate_fetch(bulk: Sequence[BulkStats], chunk_bytes: int, depth: int) -> Fetch | None:
    """The cell itself, else a linear estimate in bytes in flight (chunk x depth).

    A completion time at depth d is about one round trip plus d x chunk bytes at the
    path's rate, so it is linear in bytes in flight: between two measured cells it is
    interpolated; beyond them it is the nearest cell plus the extra bytes at that cell's
    goodput."""
    good = [b for b in bulk if b.error is None and b.goodput_gbps > 0]
    for b in good:
        if b.chunk_bytes == chunk_bytes and b.depth == depth:
            return Fetch(b.completion_p50_us, b.completion_p99_us, False, f"{_cell_label(b)} cell")
    if not good:
        return None
    target = chunk_bytes * depth

    def inflight(b: BulkStats) -> int:
        return b.chunk_bytes * b.depth

    below = [b for b in good if inflight(b) <= target]
    above = [b for b in good if inflight(b) >= target]
    if below and above:
        lo = max(below, key=lambda b: (inflight(b), b.depth == depth))
        hi = min(above, key=lambda b: (inflight(b), b.depth != depth))
        if inflight(hi) != inflight(lo):
            t = (target - inflight(lo)) / (inflight(hi) - inflight(lo))
            return Fetch(
                lo.completion_p50_us + t * (hi.completion_p50_us - lo.completion_p50_us),
                lo.completion_p99_us + t * (hi.completion_p99_us - lo.completion_p99_us),
                True,
                f"{_cell_label(lo)} and {_cell_label(hi)} cells",
            )
        return Fetch(lo.completion_p50_us, lo.completion_p99_us, True, f"{_cell_label(lo)} cell")
    near = min(good, key=lambda b: abs(math.log(inflight(b) / target)))
    extra_us = (target - inflight(near)) * 8 / (near.goodput_gbps * 1e3)
    return Fetch(
        max(0.0, near.completion_p50_us + extra_us),
        max(0.0, near.completion_p99_us + extra_us),
        True,
        f"{_cell_label(near)} cell (scaled at its {near.goodput_gbps:.1f} Gbit/s)",
    )


def _alternative(w: Workload) -> str:
    kind = w.budget[0]
    return "recompute" if kind is BaselineKind.RECOMPUTE else "read it from local NVMe"


def judge(path: PathResult, w: Workload) -> WorkloadResult:
    """The workload verdict of one path, with reasons that carry the path's own numbers."""
    budget = w.budget_us
    chunk = (
        f"a {w.chunk_tokens}-token chunk of {w.model.name} at TP{w.tp} is "
        f"{format_bytes(w.chunk_bytes)} per rank"
    )
    if path.error is not None:
        return WorkloadResult(
            Verdict.UNSAFE, (f"{chunk}; this path failed, nothing was fetched",), budget
        )
    failed = next(
        (
            b
            for b in path.bulk
            if b.chunk_bytes == w.chunk_bytes and b.depth == w.ranks_per_node and b.error
        ),
        None,
    )
    if failed is not None:
        return WorkloadResult(
            Verdict.UNSAFE, (f"{chunk}; the {_cell_label(failed)} read failed: {failed.error}",),
            budget,
        )  # fmt: skip
    fetch = estimate_fetch(path.bulk, w.chunk_bytes, w.ranks_per_node)
    if fetch is None:
        return WorkloadResult(
            Verdict.UNSAFE,
            (f"{chunk}; no bulk read was measured on this path (run with --workload)",),
            budget,
        )
    rtt_p99 = path.rtt.p99_us if path.rtt is not None else None
    extra_trips = w.round_trips_per_chunk - 1
    p50, p99 = fetch.p50_us, fetch.p99_us
    reasons: list[str] = []
    if extra_trips and path.rtt is not None:
        p50 += extra_trips * path.rtt.p50_us
        p99 += extra_trips * path.rtt.p99_us
    speedup = budget / p99 if p99 > 0 else math.inf
    lead = (
        f"{chunk}; this path delivers it to all {w.ranks_per_node} ranks of a node in "
        f"{format_duration_us(p99)} at p99 against {format_duration_us(budget)} to "
        f"{_alternative(w)}"
    )
    if speedup >= w.safe_speedup:
        verdict = Verdict.SAFE
        reasons.append(f"{lead}: offload pays {speedup:.1f}x")
    elif speedup < w.unsafe_speedup:
        verdict = Verdict.UNSAFE
        if speedup < 1:
            reasons.append(f"{lead}: the alternative is {1 / speedup:.1f}x faster than the fetch")
        else:
            reasons.append(
                f"{lead}: offload pays only {speedup:.1f}x, below the {w.unsafe_speedup:g}x line"
            )
    else:
        verdict = Verdict.MARGINAL
        reasons.append(
            f"{lead}: offload pays {speedup:.1f}x, short of the {w.safe_speedup:g}x "
            "needed for offload-safe"
        )
    if extra_trips:
        if path.rtt is None:
            reasons.append(
                f"round_trips_per_chunk = {w.round_trips_per_chunk}, but no RTT was measured: "
                "the fetch counts one round trip"
            )
        else:
            reasons.append(
                f"the fetch counts {w.round_trips_per_chunk} sequential round trips: the "
                f"measured read plus {extra_trips} x p99 RTT {format_us(path.rtt.p99_us)} us"
            )
    if fetch.interpolated:
        reasons.append(
            f"fetch time interpolated from the measured {fetch.basis}; run with "
            f"--workload to measure {format_size(w.chunk_bytes)} x depth {w.ranks_per_node}"
        )
    break_even = None
    if rtt_p99 is not None:
        room = rtt_p99 + (budget - p99) / w.round_trips_per_chunk
        break_even = room if room > 0 else None
        if break_even is None:
            reasons.append("no round trip makes offload pay here: the transfer alone is too slow")
        else:
            reasons.append(
                f"break-even RTT for this workload on this path: {format_duration_us(break_even)} "
                f"(p99 RTT now {format_us(rtt_p99)} us)"
            )
    return WorkloadResult(
        verdict=verdict,
        reasons=tuple(reasons),
        budget_us=budget,
        fetch_p50_us=p50,
        fetch_p99_us=p99,
        speedup=speedup,
        break_even_rtt_us=break_even,
        interpolated=fetch.interpolated,
    )


def judged(path: PathResult, w: Workload | None) -> PathResult:
    return path if w is None else dataclasses.replace(path, workload=judge(path, w))


def apply(results: Results, w: Workload) -> Results:
    """Re-judge every path of a run by a workload (the RTT verdicts stay as they are)."""
    return dataclasses.replace(
        results,
        paths=PathTable.from_paths((judged(p, w) for p in results.paths), results.paths.names),
        workload=w,
    )
