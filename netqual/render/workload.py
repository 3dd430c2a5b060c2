"""Terminal output of workloads: `netqual workload` (KV sizes, budget, break-even RTT) and
the workload section of a run (per tier, a speedup matrix, both verdicts per path)."""

from __future__ import annotations

import math
import re
from typing import Literal

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.base.units import format_bytes, format_duration_us, format_speedup, format_us
from netqual.model.path import PathResult, path_label
from netqual.model.ttft import HEALTHY_RDMA_RTT_US, Loader, ttft_break_even_rtt_us
from netqual.model.verdict import Verdict
from netqual.model.workload import LINK_RATES_GBPS
from netqual.render.terminal import MATRIX_MAX_NODES, STYLE, verdict_text
from netqual.table.run import Results
from netqual.workload import Attention, BaselineKind, Workload
from netqual.workload.impact import (
    FIELD_LINES_US,
    impact_sentence,
    tier_impacts,
    workload_counts,
)


def shape_line(w: Workload) -> str:
    m = w.model
    if m.attention is Attention.MLA:
        shape = (
            f"MLA, {m.layers} layers, latent {m.kv_lora_rank} + rope {m.qk_rope_head_dim} "
            "(the same on every rank)"
        )
    else:
        per_rank = m.kv_heads_per_rank(w.tp)
        split = f"{per_rank} per rank"
        if m.kv_heads < w.tp:
            split += f", each head replicated on {w.tp // m.kv_heads} ranks"
        shape = f"{m.layers} layers, {m.kv_heads} KV heads ({split}), head_dim {m.head_dim}"
    return f"{m.name}: {shape}, {w.dtype.value}"


def budget_sentence(w: Workload) -> str:
    kind, budget_us = w.budget
    parts = []
    if w.recompute_us is not None:
        parts.append(
            f"recomputing {w.chunk_tokens} tokens at {w.baseline.prefill_tokens_per_s:,.0f} "
            f"tokens/s takes {format_duration_us(w.recompute_us)}"
        )
    if w.local_read_us is not None:
        parts.append(
            f"reading the node's {format_bytes(w.node_chunk_bytes)} from local NVMe at "
            f"{w.baseline.local_read_gbps:g} Gbit/s takes {format_duration_us(w.local_read_us)}"
        )
    what = "recompute" if kind is BaselineKind.RECOMPUTE else "local NVMe read"
    text = "; ".join(parts)
    return (
        f"{text[:1].upper()}{text[1:]}. Budget: {format_duration_us(budget_us)} ({what}) per chunk "
        f"for all {w.ranks_per_node} ranks of a node."
    )


def print_workload(console: Console, w: Workload) -> None:
    console.print(shape_line(w), style="bold")
    console.print(
        f"serving: TP{w.tp}, {w.ranks_per_node} ranks per node, {w.chunk_tokens}-token chunks "
        f"| {w.source}",
        style="dim",
    )
    sizes = Table(title="KV sizes", title_justify="left")
    sizes.add_column("")
    sizes.add_column("size", justify="right")
    sizes.add_column("bytes", justify="right")
    for label, n in (
        ("per token (whole model)", w.kv_bytes_per_token),
        ("per token per rank", w.kv_bytes_per_token_per_rank),
        (f"per chunk per rank ({w.chunk_tokens} tokens)", w.chunk_bytes),
        (f"per chunk per node ({w.ranks_per_node} ranks)", w.node_chunk_bytes),
    ):
        sizes.add_row(label, format_bytes(n), f"{n:,}")
    console.print(sizes)
    console.print(budget_sentence(w))
    console.print(
        f"Verdict per path: speedup = budget / chunk fetch p99; >= {w.safe_speedup:g}x "
        f"offload-safe, < {w.unsafe_speedup:g}x unsafe, marginal in between. A node's fetch "
        f"must finish within {format_duration_us(w.budget_us / w.safe_speedup)} to be safe."
    )
    serial = w.round_trips_per_chunk
    trips = f"{serial:g} serial round trip{'' if serial == 1 else 's'}"
    table = Table(title=f"Break-even RTT ({trips} a chunk)", title_justify="left")
    table.add_column("link", justify="right")
    table.add_column("wire time", justify="right")
    table.add_column(f"RTT for {w.safe_speedup:g}x", justify="right")
    table.add_column("RTT for 1x", justify="right")
    for b in w.break_even():
        table.add_row(
            f"{b.link_gbps:g} Gbit/s",
            format_duration_us(b.wire_us),
            "never" if b.safe_rtt_us is None else format_duration_us(b.safe_rtt_us),
            "never" if b.rtt_us is None else format_duration_us(b.rtt_us),
        )
    console.print(table)
    console.print(
        f"A fetch = {trips} ({w.connector}) + the node's chunk once at the link rate "
        "(docs/workload.md, The TTFT model).",
        style="dim",
    )
    if (ttft := ttft_sentence(w)) is not None:
        console.print(ttft)
    chunks = w.prompt_chunks
    if chunks is not None and w.prompt_tokens is not None:
        console.print(
            f"Per request: a {w.prompt_tokens:,}-token prompt with {w.hit_ratio:.0%} cache "
            f"hits is {chunks:,} chunks; without offload they cost "
            f"{format_duration_us(chunks * w.budget_us)}."
        )


WORKLOAD_PATHS_SHOWN = 16 * 15  # every path of a 16-node mesh; beyond, the worst ones


def print_workload_results(console: Console, results: Results) -> None:
    """The workload section: headline, per-tier impact, a matrix coloured by workload
    verdict (small runs), and the RTT verdict beside the workload verdict per path."""
    w = results.workload
    if w is None:
        return
    console.print(Text(impact_sentence(results, w), style="bold"))
    counts = workload_counts(results)
    line = Text.assemble(
        *(part for v in Verdict for part in ((v.value, STYLE[v]), f" {counts[v]}  ")),
        f"| speedup = budget / chunk fetch p99; >= {w.safe_speedup:g}x safe, "
        f"< {w.unsafe_speedup:g}x unsafe",
    )
    console.print(line, style="dim")
    _print_tiers(console, results, w)
    if len(results.nodes) <= MATRIX_MAX_NODES:
        _print_speedup_matrix(console, results)
    _print_paths(console, results)


def _print_tiers(console: Console, results: Results, w: Workload) -> None:
    rows = tier_impacts(results, w)
    per_request = w.prompt_tokens is not None
    table = Table(
        title="by tier (medians over the tier's paths)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    # Headers of short words: at 80 columns they wrap over lines, never cut to "speedup/…";
    # no "@200/@500": the lines are said in words
    lines = " / ".join(f"{line:g}" for line in FIELD_LINES_US)
    cols = ["tier", "p99 RTT us", "fetch p99", "speedup / worst"]
    if per_request:
        cols.append("per request")
    cols += [f"speedup if RTT were {lines} us", "safe / marg / unsafe"]
    body: list[list[str | Text]] = []
    for r in rows:
        cells: list[str | Text] = [
            r.tier,
            format_us(r.rtt_p99_us),
            "-" if r.fetch_p99_us is None else format_duration_us(r.fetch_p99_us),
            f"{format_speedup(r.speedup)}/{format_speedup(r.worst_speedup)}",
        ]
        if per_request:
            cells.append(_saved_text(r.request_saved_us, r.ttft_change))
        cells.append("/".join(format_speedup(s) for _, s in r.speedup_at_lines))
        cells.append(
            Text("/").join(
                Text(str(r.counts[v]), style=STYLE[v] if r.counts[v] else "dim") for v in Verdict
            )
        )
        body.append(cells)
    # Each column as wide as its longest cell or header word, so no cell is cut and the
    # headers wrap at their spaces (at 80 columns "speedup / worst" over two lines, not
    # "speedup/…"). When that does not fit, "per request" wraps between its verb and its
    # duration ("loses" / "701.8 ms"), never inside the duration.
    texts = [[c.plain if isinstance(c, Text) else c for c in row] for row in body]
    widths = [
        max([len(word) for word in col.split()] + [len(row[k]) for row in texts])
        for k, col in enumerate(cols)
    ]
    if per_request and sum(widths) + 3 * len(cols) > console.width:
        k = cols.index("per request")
        widths[k] = max([len("request")] + [len(p) for r in texts for p in _UNBROKEN.findall(r[k])])
        for row in body:  # wrapped here, between pieces: rich would cut "577.8 / ms"
            row[k] = _wrap(_UNBROKEN.findall(str(row[k])), widths[k])
    for col, width in zip(cols, widths, strict=True):
        justify: Literal["left", "right"] = "left" if col == "tier" else "right"
        table.add_column(col, justify=justify, width=width)
    for cells in body:
        table.add_row(*cells)
    console.print(table)
    notes = ["tier: same rack, across racks or a remote site; speedup = budget / fetch p99"]
    if per_request and w.prompt_chunks is not None:
        notes.append(
            f"per request: {w.prompt_tokens:,} tokens x {w.hit_ratio:.0%} hits = "
            f"{w.prompt_chunks:,} chunks, each saving the budget minus its fetch p50"
            + (
                f"; TTFT change = {w.kv_share:g} x (fetch p50 / budget - 1) (docs/workload.md)"
                if w.kv_share is not None
                else ""
            )
        )
    notes.append(
        f"if RTT were {lines} us: the speedup had the tier's p99 RTT sat on the field "
        "report's lines (TTFT stops tracking local NVMe above ~200 us; the gain is gone "
        "above ~500 us)"
    )
    console.print("; ".join(notes), style="dim")


def ttft_sentence(w: Workload) -> str | None:
    """With ``kv_share``: the TTFT change at the first link rate, on a healthy RDMA path and
    at the 2x line, and where the gain is gone (netqual.model.ttft)."""
    if w.kv_share is None:
        return None
    link = LINK_RATES_GBPS[0]
    wire = w.wire_us(link)
    gone = ttft_break_even_rtt_us(wire, w.round_trips_per_chunk, w.budget_us, w.loader)
    safe = w.break_even_rtt_us(link, w.safe_speedup)
    healthy = w.ttft_change(HEALTHY_RDMA_RTT_US, wire)
    at_safe = None if safe is None else w.ttft_change(safe, wire)
    where = (
        "not even at zero RTT"
        if gone is None
        else "at no RTT"
        if math.isinf(gone)
        else f"at {format_duration_us(gone)} of RTT"
    )
    loader = (
        "at any concurrency (serial loader)"
        if w.loader is Loader.SERIAL
        else "for one request (parallel loaders share the round trips)"
    )
    text = f"TTFT with offload at {link:g} Gbit/s (kv_share {w.kv_share:g}): "
    if healthy is not None:
        text += f"{healthy:+.0%} at {HEALTHY_RDMA_RTT_US:g} us of RTT"
    if at_safe is not None:
        text += f", {at_safe:+.0%} at the {w.safe_speedup:g}x line"
    return f"{text}; the gain is gone {where}, {loader}."


# What a "per request" cell never breaks: a duration with its unit, the TTFT change
_UNBROKEN = re.compile(r"\(TTFT [^)]*\)|[\d.,]+ (?:us|ms|s)\b|\S+")


def _wrap(pieces: list[str], width: int) -> str:
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return "\n".join(lines)


def _saved_text(saved_us: float | None, ttft_change: float | None = None) -> str:
    if saved_us is None:
        return "-"
    verb = "saves" if saved_us >= 0 else "loses"
    change = "" if ttft_change is None else f" (TTFT {ttft_change:+.0%})"
    return f"{verb} {format_duration_us(abs(saved_us))}{change}"


def _print_speedup_matrix(console: Console, results: Results) -> None:
    names = [n.name for n in results.nodes]
    # the path of each cell (either direction), as rows joined on the columns
    keys = [(src, dst) for src in names for dst in names]
    forward = results.paths.rows_of(keys)
    reverse = results.paths.rows_of([(b, a) for a, b in keys])
    rows = {k: f if f is not None else r for k, f, r in zip(keys, forward, reverse, strict=True)}
    console.print(
        "workload speedup (budget / chunk fetch p99): row = source, column = destination",
        style="bold",
    )
    table = Table()
    table.add_column("")
    for name in names:
        table.add_column(name, justify="right")
    for src in names:
        cells: list[str | Text] = [src]
        for dst in names:
            row = rows[(src, dst)]
            p = None if row is None else results.paths.row(row)
            if src == dst or p is None or p.workload is None:
                cells.append(Text("-", style="dim"))
                continue
            wr = p.workload
            text = "fail" if wr.speedup is None else format_speedup(wr.speedup)
            cells.append(Text(text, style=STYLE[wr.verdict]))
        table.add_row(*cells)
    console.print(table)


SHORT = {Verdict.SAFE: "safe", Verdict.MARGINAL: "marginal", Verdict.UNSAFE: "unsafe"}


def _worst_judged(results: Results) -> list[int]:
    """Rows judged by the workload, worst first: workload verdict, then the lowest speedup
    (a failed fetch, no speedup, first); ties in row order."""
    wl = results.paths.workload
    if wl is None:
        return []
    rows = np.flatnonzero(wl.verdict >= 0)
    speedup = np.nan_to_num(wl.speedup[rows], nan=-1.0, posinf=np.inf)
    ranked: list[int] = rows[np.lexsort((speedup, -wl.verdict[rows]))].tolist()
    return ranked


def _print_paths(console: Console, results: Results) -> None:
    shown = [results.paths.row(i) for i in _worst_judged(results)[:WORKLOAD_PATHS_SHOWN]]
    judged = (
        0 if results.paths.workload is None else int((results.paths.workload.verdict >= 0).sum())
    )
    title = "paths: RTT verdict beside workload verdict"
    if len(shown) < judged:
        title += f" (the {len(shown)} worst of {judged})"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("path", "RTT us", "RTT", "fetch", "speedup", "workload", "break-even"):
        table.add_column(col, justify="left" if col == "path" else "right", no_wrap=col == "path")
    for p in shown:
        wr = p.workload
        assert wr is not None
        table.add_row(
            f"{path_label(p.src, p.dst)}",
            "-" if p.rtt is None else format_us(p.rtt.p99_us),
            Text(SHORT[p.verdict], style=STYLE[p.verdict]),
            "-" if wr.fetch_p99_us is None else format_duration_us(wr.fetch_p99_us),
            format_speedup(wr.speedup),
            Text(SHORT[wr.verdict] + ("*" if wr.interpolated else ""), style=STYLE[wr.verdict]),
            "never" if wr.break_even_rtt_us is None else format_duration_us(wr.break_even_rtt_us),
        )
    console.print(table)
    notes = [
        "RTT us and fetch: p99; RTT: the RTT verdict; workload: the verdict by speedup; "
        "break-even: the RTT at which the speedup falls to 1x"
    ]
    if any(p.workload and p.workload.interpolated for p in shown):
        notes.append(
            "* fetch interpolated from other measured cells (re-run with --workload to "
            "measure the chunk)"
        )
    console.print("; ".join(notes), style="dim")


def print_workload_path(console: Console, path: PathResult) -> None:
    """`netqual probe --workload`: the pair's workload verdict and its reasons."""
    wr = path.workload
    if wr is None:
        return
    console.print(Text.assemble("workload: ", verdict_text(wr.verdict)))
    for reason in wr.reasons:
        console.print(f"- {reason}")
