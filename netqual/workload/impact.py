"""What a workload verdict means per tier: chunk fetch against budget, the time a request
saves or loses, and where the field report's 200 / 500 us RTT lines would put the fetch.

Pure arithmetic over judged paths, shared by the terminal and the HTML report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from netqual.analysis.stats import median
from netqual.base.units import format_bytes, format_duration_us
from netqual.model.path import Tier
from netqual.model.verdict import Verdict
from netqual.model.workload import BaselineKind, Workload
from netqual.table.paths import TIERS, VERDICTS, FloatArray
from netqual.table.run import Results

# The field report's lines (docs/workload.md): TTFT stops tracking
# the local-NVMe baseline above ~200 us of RTT; above ~500 us the offload gain is gone.
FIELD_LINES_US = (200.0, 500.0)

_TIER_ORDER = {t.value: i for i, t in enumerate(Tier)}


@dataclass(frozen=True)
class TierImpact:
    """One tier's paths judged by the workload; times are medians over its paths."""

    tier: str
    paths: int
    counts: Mapping[Verdict, int]
    rtt_p99_us: float | None
    fetch_p99_us: float | None
    worst_fetch_p99_us: float | None
    speedup: float | None
    worst_speedup: float | None
    # per request of prompt_tokens x hit_ratio: budget minus fetch (p50), times chunks;
    # positive = time saved by offload, negative = time lost
    request_saved_us: float | None
    # the median path's speedup if its RTT sat on each field-report line
    speedup_at_lines: tuple[tuple[float, float | None], ...]
    # the relative TTFT change at the median fetch p50 (netqual.model.ttft); None: the
    # workload gives no kv_share
    ttft_change: float | None = None


def _present(values: FloatArray) -> FloatArray:
    """The values a path has (NaN is a path without one)."""
    kept: FloatArray = values[~np.isnan(values)]
    return kept


def speedup_at_rtt(w: Workload, fetch_p99_us: float, rtt_p99_us: float, line_us: float) -> float:
    """The speedup had the path's round trip been ``line_us``: the fetch's bytes as
    measured (its wire time, fetch less its round trips) plus round_trips_per_chunk round
    trips of ``line_us`` (``netqual.model.ttft.fetch_us``)."""
    n = w.round_trips_per_chunk
    wire = fetch_p99_us - n * rtt_p99_us
    fetch = n * line_us + wire
    return w.budget_us / fetch if fetch > 0 else float("inf")


def tier_impacts(results: Results, w: Workload) -> tuple[TierImpact, ...]:
    """Per tier of the judged paths, from the workload columns (masks, one sort a median)."""
    table, wl = results.paths, results.paths.workload
    if wl is None:
        return ()
    judged = wl.verdict >= 0
    tiers = sorted(
        {TIERS[t].value for t in np.unique(table.tier[judged]).tolist()},
        key=lambda t: (_TIER_ORDER.get(t, len(_TIER_ORDER)), t),
    )
    out = []
    for tier in tiers:
        members = judged & (table.tier == TIERS.index(Tier(tier)))
        verdicts = np.bincount(wl.verdict[members], minlength=len(VERDICTS))
        counts = {v: int(verdicts[v.rank]) for v in Verdict}
        fetch99 = _present(wl.fetch_p99_us[members])
        fetch50 = _present(wl.fetch_p50_us[members])
        speedups = _present(wl.speedup[members])
        rtt = median(table.rtt["p99"][members & table.has_rtt])
        fetch = median(fetch99)
        chunks = w.prompt_chunks
        saved = None
        median50 = median(fetch50)
        if chunks is not None and median50 is not None:
            saved = chunks * (w.budget_us - median50)
        change = None
        rtt50 = median(table.rtt["p50"][members & table.has_rtt])
        if median50 is not None:
            trips = w.round_trips_per_chunk * (rtt50 or 0.0)
            change = w.ttft_change(rtt50 or 0.0, median50 - trips)
        lines: tuple[tuple[float, float | None], ...] = tuple(
            (
                line,
                None if fetch is None or rtt is None else speedup_at_rtt(w, fetch, rtt, line),
            )
            for line in FIELD_LINES_US
        )
        out.append(
            TierImpact(
                tier=tier,
                paths=int(members.sum()),
                counts=counts,
                rtt_p99_us=rtt,
                fetch_p99_us=fetch,
                worst_fetch_p99_us=float(fetch99.max()) if len(fetch99) else None,
                speedup=median(speedups),
                worst_speedup=float(speedups.min()) if len(speedups) else None,
                request_saved_us=saved,
                speedup_at_lines=lines,
                ttft_change=change,
            )
        )
    return tuple(out)


def workload_counts(results: Results) -> dict[Verdict, int]:
    """Paths per workload verdict (a bincount of the workload column)."""
    wl = results.paths.workload
    if wl is None:
        return {v: 0 for v in Verdict}
    got = np.bincount(wl.verdict[wl.verdict >= 0], minlength=len(VERDICTS))
    return {v: int(got[v.rank]) for v in Verdict}


def two_verdicts_sentence(results: Results) -> str | None:
    """With a workload, the first screen's answer to "which verdict counts?": the RTT lines'
    count, the workload's, and the verdict, which is the worse of the two and of the rest of
    the evidence (docs/policy.md, "One decision"). None without a workload."""
    w = results.workload
    if w is None:
        return None
    total = len(results.paths)
    dc = results.paths.decision
    rtt = dc.rtt_verdict if dc is not None else results.paths.verdict
    rtt_safe = int((rtt == Verdict.SAFE.rank).sum())
    wl_safe = workload_counts(results)[Verdict.SAFE]
    safe = results.summary.counts.get(Verdict.SAFE, 0)
    metric = results.run.policy.metric.value
    return (
        f"RTT lines ({metric}): {rtt_safe:,} of {total:,} paths offload-safe; workload "
        f"({w.model.name}, TP{w.tp}): {wl_safe:,} of {total:,}. A path's verdict is the worse of "
        f"the two and of the rest of the evidence: {safe:,} of {total:,} offload-safe, and "
        "`netqual gate` judges it (docs/policy.md)."
    )


def impact_sentence(results: Results, w: Workload) -> str:
    """The headline: the model, its chunk, the budget, and how many paths pay."""
    counts = workload_counts(results)
    total = sum(counts.values())
    kind = "recompute" if w.budget[0] is BaselineKind.RECOMPUTE else "read from local NVMe"
    return (
        f"What this means for {w.model.name} (TP{w.tp}, {w.chunk_tokens}-token chunks of "
        f"{format_bytes(w.chunk_bytes)} per rank, {format_duration_us(w.budget_us)} to {kind}): "
        f"offload-safe on {counts[Verdict.SAFE]:,} of {total:,} paths"
    )
