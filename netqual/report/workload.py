"""The report's "What this means for our model" section, when the run was judged by a
workload (docs/workload.md): the headline, per tier chunk fetch against budget and the
time a request saves or loses, and a node matrix coloured by workload verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netqual.base.units import format_bytes, format_duration_us, format_speedup, format_us
from netqual.model.path import path_label
from netqual.model.verdict import Verdict
from netqual.model.workload import BaselineKind, Workload
from netqual.report.grid import NODE_MATRIX_MAX, pair_rows, report_nodes
from netqual.table.run import Results
from netqual.workload.columns import speedup_verdict
from netqual.workload.impact import (
    FIELD_LINES_US,
    impact_sentence,
    tier_impacts,
    workload_counts,
)

CSS = {Verdict.SAFE: "safe", Verdict.MARGINAL: "marginal", Verdict.UNSAFE: "unsafe"}


@dataclass(frozen=True)
class TierRow:
    tier: str
    paths: int
    rtt: str
    fetch: str
    speedup: str
    worst: str
    per_request: str
    per_request_cls: str
    at_lines: Sequence[str]
    counts: Sequence[tuple[str, int]]  # (css class, paths)
    cls: str  # the tier's class: that of its median speedup


@dataclass(frozen=True)
class MatrixCell:
    cls: str
    text: str
    title: str


@dataclass(frozen=True)
class WorkloadView:
    sentence: str
    shape: str
    budget: str
    rule: str
    counts: Sequence[tuple[str, str, int]]
    tiers: Sequence[TierRow]
    line_labels: Sequence[str]
    per_request_label: str | None
    names: Sequence[str]  # matrix rows and columns; empty when too many nodes
    matrix: Sequence[Sequence[MatrixCell]]
    interpolated: int  # paths whose fetch was interpolated


def _shape(w: Workload) -> str:
    return (
        f"{w.model.name} at TP{w.tp}, {w.dtype.value} KV cache: "
        f"{format_bytes(w.kv_bytes_per_token_per_rank)} per token per rank; a "
        f"{w.chunk_tokens}-token chunk is {format_bytes(w.chunk_bytes)} per rank, "
        f"{format_bytes(w.node_chunk_bytes)} for the {w.ranks_per_node} ranks of a node."
    )


def _budget(w: Workload) -> str:
    kind, budget_us = w.budget
    if kind is BaselineKind.RECOMPUTE:
        how = (
            f"recomputing {w.chunk_tokens} tokens at "
            f"{w.baseline.prefill_tokens_per_s:,.0f} tokens/s"
        )
    else:
        how = (
            f"reading {format_bytes(w.node_chunk_bytes)} from local NVMe at "
            f"{w.baseline.local_read_gbps:g} Gbit/s"
        )
    return f"Budget per chunk: {format_duration_us(budget_us)} ({how})."


def _matrix(results: Results) -> tuple[list[str], list[list[MatrixCell]]]:
    nodes = report_nodes(results)
    if len(nodes) > NODE_MATRIX_MAX:
        return [], []
    names = [n.name for n in nodes]
    grid = pair_rows(results, names).tolist()
    rows = []
    for y, src in enumerate(names):
        row = []
        for x, dst in enumerate(names):
            i = grid[y * len(names) + x]
            p = None if i < 0 else results.paths.row(i)
            if src == dst or p is None or p.workload is None:
                row.append(MatrixCell("self" if src == dst else "none", "", ""))
                continue
            wr = p.workload
            fetch = "-" if wr.fetch_p99_us is None else format_duration_us(wr.fetch_p99_us)
            speedup = format_speedup(wr.speedup)
            title = (
                f"{path_label(p.src, p.dst)}: {wr.verdict.value}, speedup {speedup}, "
                f"chunk fetch p99 {fetch}; RTT verdict {p.verdict.value}"
                + (" (interpolated)" if wr.interpolated else "")
            )
            row.append(MatrixCell(CSS[wr.verdict], speedup, title))
        rows.append(row)
    return names, rows


def _interpolated(results: Results) -> int:
    """Paths judged by the workload whose fetch time was interpolated."""
    wl = results.paths.workload
    return 0 if wl is None else int(np.count_nonzero(wl.interpolated & (wl.verdict >= 0)))


def workload_view(results: Results) -> WorkloadView | None:
    w = results.workload
    if w is None:
        return None
    counts = workload_counts(results)
    tiers = []
    for t in tier_impacts(results, w):
        saved = t.request_saved_us
        tiers.append(
            TierRow(
                tier=t.tier,
                paths=t.paths,
                rtt="-" if t.rtt_p99_us is None else f"{format_us(t.rtt_p99_us)} us",
                fetch="-" if t.fetch_p99_us is None else format_duration_us(t.fetch_p99_us),
                speedup=format_speedup(t.speedup),
                worst=format_speedup(t.worst_speedup),
                per_request="-"
                if saved is None
                else f"{'saves' if saved >= 0 else 'loses'} {format_duration_us(abs(saved))}"
                + ("" if t.ttft_change is None else f" (TTFT {t.ttft_change:+.0%})"),
                per_request_cls="" if saved is None else ("safe" if saved >= 0 else "unsafe"),
                at_lines=[format_speedup(s) for _, s in t.speedup_at_lines],
                counts=[(CSS[v], t.counts[v]) for v in Verdict],
                cls=CSS[speedup_verdict(w, t.speedup)],
            )
        )
    names, matrix = _matrix(results)
    per_request = None
    if w.prompt_tokens is not None and w.prompt_chunks is not None:
        per_request = (
            f"per request of {w.prompt_tokens:,} tokens, {w.hit_ratio:.0%} hits "
            f"({w.prompt_chunks:,} chunks)"
        )
    return WorkloadView(
        sentence=impact_sentence(results, w),
        shape=_shape(w),
        budget=_budget(w),
        rule=(
            f"Speedup = budget / chunk fetch p99 (all {w.ranks_per_node} ranks' reads in "
            f"flight): >= {w.safe_speedup:g}x offload-safe, < {w.unsafe_speedup:g}x unsafe, "
            "marginal between. The RTT verdict is unchanged; this one sits beside it."
        ),
        counts=[(CSS[v], v.value, counts[v]) for v in Verdict],
        tiers=tiers,
        line_labels=[f"if p99 RTT were {line:g} us" for line in FIELD_LINES_US],
        per_request_label=per_request,
        names=names,
        matrix=matrix,
        interpolated=_interpolated(results),
    )
