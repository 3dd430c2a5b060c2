"""Terminal output of `netqual workload`: KV sizes, the budget and the break-even RTT."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from netqual.units import format_bytes, format_duration_us
from netqual.workload import Attention, BaselineKind, Workload


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
    trips = "one RTT" if w.round_trips_per_chunk == 1 else f"{w.round_trips_per_chunk} RTTs"
    table = Table(
        title=f"Break-even RTT (a fetch = {trips} + the node's chunk at link rate)",
        title_justify="left",
    )
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
    chunks = w.prompt_chunks
    if chunks is not None and w.prompt_tokens is not None:
        console.print(
            f"Per request: a {w.prompt_tokens:,}-token prompt with {w.hit_ratio:.0%} cache "
            f"hits is {chunks:,} chunks; without offload they cost "
            f"{format_duration_us(chunks * w.budget_us)}."
        )
