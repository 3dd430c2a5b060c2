"""What a workload verdict means per tier: chunk fetch against budget, the time a request
saves or loses, and where the field report's 200 / 500 us RTT lines would put the fetch.

Pure arithmetic over judged paths, shared by the terminal and the HTML report.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from netqual.models import PathResult, Results, Tier, Verdict
from netqual.units import format_bytes, format_duration_us
from netqual.workload.model import BaselineKind, Workload

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


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def speedup_at_rtt(w: Workload, fetch_p99_us: float, rtt_p99_us: float, line_us: float) -> float:
    """The speedup had the path's round trip been ``line_us``: each of the fetch's
    round_trips_per_chunk round trips moves by the difference."""
    fetch = fetch_p99_us + w.round_trips_per_chunk * (line_us - rtt_p99_us)
    return w.budget_us / fetch if fetch > 0 else float("inf")


def tier_impacts(results: Results, w: Workload) -> tuple[TierImpact, ...]:
    groups: dict[str, list[PathResult]] = {}
    for p in results.paths:
        if p.workload is not None:
            groups.setdefault(p.tier.value, []).append(p)
    out = []
    for tier in sorted(groups, key=lambda t: (_TIER_ORDER.get(t, len(_TIER_ORDER)), t)):
        members = groups[tier]
        judged = [p.workload for p in members if p.workload is not None]
        counts = {v: sum(1 for j in judged if j.verdict is v) for v in Verdict}
        fetch99 = [j.fetch_p99_us for j in judged if j.fetch_p99_us is not None]
        fetch50 = [j.fetch_p50_us for j in judged if j.fetch_p50_us is not None]
        speedups = [j.speedup for j in judged if j.speedup is not None]
        rtts = [p.rtt.p99_us for p in members if p.rtt is not None]
        rtt = _median(rtts)
        fetch = _median(fetch99)
        chunks = w.prompt_chunks
        saved = None
        if chunks is not None and fetch50:
            saved = chunks * (w.budget_us - statistics.median(fetch50))
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
                paths=len(members),
                counts=counts,
                rtt_p99_us=rtt,
                fetch_p99_us=fetch,
                worst_fetch_p99_us=max(fetch99) if fetch99 else None,
                speedup=_median(speedups),
                worst_speedup=min(speedups) if speedups else None,
                request_saved_us=saved,
                speedup_at_lines=lines,
            )
        )
    return tuple(out)


def workload_counts(results: Results) -> dict[Verdict, int]:
    counts = {v: 0 for v in Verdict}
    for p in results.paths:
        if p.workload is not None:
            counts[p.workload.verdict] += 1
    return counts


def impact_sentence(results: Results, w: Workload) -> str:
    """The headline: the model, its chunk, the budget, and how many paths pay."""
    counts = workload_counts(results)
    total = sum(counts.values())
    kind = "recompute" if w.budget[0] is BaselineKind.RECOMPUTE else "read from local NVMe"
    return (
        f"What this means for {w.model.name} (TP{w.tp}, {w.chunk_tokens}-token chunks of "
        f"{format_bytes(w.chunk_bytes)} per rank, {format_duration_us(w.budget_us)} to {kind}): "
        f"offload-safe on {counts[Verdict.SAFE]} of {total} paths"
    )
