"""The per-path workload judgement, kept as the oracle that ``netqual.workload.columns``
(the one rule the product uses) must agree with path for path."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.model.path import PathResult, WorkloadResult
from netqual.model.stats import BulkStats
from netqual.model.verdict import Verdict
from netqual.model.workload import Workload
from netqual.workload.wording import Wording, cell_label


@dataclass(frozen=True)
class Fetch:
    """Completion time of one node's chunk reads, measured or estimated."""

    p50_us: float
    p99_us: float
    interpolated: bool
    basis: str  # the cells it came from, in words


def _cell_label(b: BulkStats) -> str:
    return cell_label(b.chunk_bytes, b.depth)


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


def judge(path: PathResult, w: Workload) -> WorkloadResult:
    """The workload verdict of one path, with reasons that carry the path's own numbers.

    The reference for ``judge_columns`` (every path of a run at once): the two must agree
    path for path (tests/unit/workload/test_workload_apply_matches_judge.py)."""
    say = Wording(w)
    budget = w.budget_us
    if path.error is not None:
        return WorkloadResult(Verdict.UNSAFE, say.path_failed, budget)
    failed = next(
        (
            b
            for b in path.bulk
            if b.chunk_bytes == w.chunk_bytes and b.depth == w.ranks_per_node and b.error
        ),
        None,
    )
    if failed is not None and failed.error:
        return WorkloadResult(Verdict.UNSAFE, say.cell_failed(failed.error), budget)
    fetch = estimate_fetch(path.bulk, w.chunk_bytes, w.ranks_per_node)
    if fetch is None:
        return WorkloadResult(Verdict.UNSAFE, say.unmeasured, budget)
    rtt_p99 = path.rtt.p99_us if path.rtt is not None else None
    p50, p99 = fetch.p50_us, fetch.p99_us
    if say.extra_trips and path.rtt is not None:
        p50 += say.extra_trips * path.rtt.p50_us
        p99 += say.extra_trips * path.rtt.p99_us
    speedup = budget / p99 if p99 > 0 else math.inf
    if speedup >= w.safe_speedup:
        verdict = Verdict.SAFE
    elif speedup < w.unsafe_speedup:
        verdict = Verdict.UNSAFE
    else:
        verdict = Verdict.MARGINAL
    break_even = None
    if rtt_p99 is not None:
        room = rtt_p99 + (budget - p99) / w.round_trips_per_chunk
        break_even = room if room > 0 else None
    basis = fetch.basis if fetch.interpolated else None
    return WorkloadResult(
        verdict=verdict,
        reasons=say.fetched(verdict, p99, speedup, rtt_p99, break_even, basis),
        budget_us=budget,
        fetch_p50_us=p50,
        fetch_p99_us=p99,
        speedup=speedup,
        break_even_rtt_us=break_even,
        interpolated=fetch.interpolated,
    )
