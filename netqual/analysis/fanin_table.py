"""The fan-in sweep in words and one level table, the same in the terminal and the report
(docs/fanin.md): per storage node a headline, then one row per level with its unit in
every cell, chosen per magnitude (us, ms, s; kbit/s, Mbit/s, Gbit/s)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.analysis.fanin import Projection, p99_interval, pays_up_to, storage_findings
from netqual.base.units import format_bytes, format_duration_us, format_gbps
from netqual.model.fanin import Call, EngineFaninLevel, FaninLevel, FaninResult

HEADERS = (
    "readers", "chunk p50", "chunk p99", "p99 95% CI", "vs first", "chunks", "aggregate", "note",
)  # fmt: skip
# with a workload: the projected KV fetch per request and the TTFT change, every chunk at
# the level's p50, then every chunk at its p99
PROJECTION_HEADERS = (
    "readers", "KV fetch p50", "KV fetch p99", "TTFT change p50", "TTFT change p99",
)  # fmt: skip
NOTE = (
    "vs first: the level's chunk p99 over the first level's; within, beyond or undecided: "
    "its 95% CI against the knee factor x the first's; knee: the first level beyond, where "
    "a chunk's p99 completion rises past that factor (docs/fanin.md). aggregate: what "
    "arrived while every reader was reading"
)


# run --fanin --engine: each level through the fetch engine beside the probe's
ENGINE_HEADERS = (
    "readers", "engine p50", "engine p99", "engine aggregate", "probe p50", "probe aggregate",
    "vs probe", "note",
)  # fmt: skip
ENGINE_NOTE = (
    "engine: one worker of the fetch engine per reader, all started together once every "
    "reader was connected; vs probe: its chunk p50 over the probe's at as many readers "
    "(docs/fanin.md, Through the fetch engine)"
)


@dataclass(frozen=True)
class LevelTable:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def signed(us: float) -> str:
    return ("+" if us >= 0 else "-") + format_duration_us(abs(us))


def chunk_words(f: FaninResult) -> str:
    """'plain, 7.8 MiB chunks'."""
    return f"{f.profile}, {format_bytes(f.chunk_bytes)} chunks"


def headline(f: FaninResult, proj: Sequence[Projection]) -> str:
    """The storage node's answer. With a projection, whether offload pays (the workload's
    TTFT) and, as its own sentence, how many readers the fan-in alone carries: two claims
    with their scope named, never one sentence that says both "does not pay" and "safe"."""
    fan = f"{f.storage}: {f.verdict}"
    if not proj:
        return fan
    k = pays_up_to(proj)
    base = format_duration_us(proj[0].baseline_us)
    if k is None:
        first = proj[0]
        pays = (
            f"{f.storage}: offload does not pay even at {_n(first.readers)}: the projected KV "
            f"fetch per request, every chunk at p99, takes {format_duration_us(first.fetch_p99_us)}"
            f" against {base} without offload"
        )
    else:
        # a level the fan-in rule left preliminary is as unsure for the projection
        unsure = [lv.readers for lv in f.levels if lv.call is Call.UNDECIDED and lv.readers <= k]
        hedge = (
            f" (preliminary: the chunk p99 at {', '.join(map(str, unsure))} readers is not "
            "yet sure, see fan-in alone)"
            if unsure
            else ""
        )
        pays = (
            f"{f.storage}: offload pays up to {k} concurrent reader{'' if k == 1 else 's'}"
            f"{hedge}: the projected KV fetch per "
            f"request, every chunk at p99, stays under the {base} without offload"
        )
    return f"{pays}. Fan-in alone: {f.verdict}"


def level_table(f: FaninResult) -> LevelTable:
    """One row per level: chunk completion, the knee rule's call, the aggregate, notes."""
    base = next((lv for lv in f.levels if lv.call is Call.BASE), None)
    rows = []
    for lv in f.levels:
        c = lv.chunk
        row = [str(lv.readers)]
        if c is None:
            row += ["-"] * (len(HEADERS) - 2)
        else:
            row += [
                format_duration_us(c.p50_us),
                format_duration_us(c.p99_us),
                duration_range(*p99_interval(c)),
                _versus(lv, base, f.knee),
                f"{c.samples:,}",
                "-" if lv.aggregate_gbps is None else format_gbps(lv.aggregate_gbps),
            ]
        row.append("; ".join(_notes(f, lv)))
        rows.append(tuple(row))
    return LevelTable(HEADERS, tuple(rows))


def engine_headline(f: FaninResult) -> str | None:
    """'st1 through mooncake (mooncake-transfer-engine-non-cuda 0.3.13.post1): safe up
    to ...'; None without the engine's levels."""
    e = f.engine
    if e is None:
        return None
    said = f" ({e.version})" if e.version else ""
    return f"{f.storage} through {e.engine.value}{said}: {e.verdict}"


def engine_table(f: FaninResult) -> LevelTable | None:
    """Per level, the engine's chunk completion and aggregate beside the probe's at as
    many readers (its p50 and aggregate, and the ratio of the p50s); None without the
    engine's levels."""
    if f.engine is None:
        return None
    probe = {lv.readers: lv for lv in f.levels}
    rows = []
    for e in f.engine.levels:
        lv, p = e.level, probe.get(e.readers)
        pc = p.chunk if p is not None else None
        rows.append(
            (
                str(e.readers),
                _us(lv.chunk.p50_us if lv.chunk else None),
                _us(lv.chunk.p99_us if lv.chunk else None),
                _gbps(lv.aggregate_gbps),
                _us(pc.p50_us if pc else None),
                _gbps(p.aggregate_gbps if p is not None else None),
                "-" if e.vs_probe is None else f"{e.vs_probe:.2f}x",
                "; ".join(_engine_notes(e, f.engine.knee)),
            )
        )
    return LevelTable(ENGINE_HEADERS, tuple(rows))


def _us(value: float | None) -> str:
    return "-" if value is None else format_duration_us(value)


def _gbps(value: float | None) -> str:
    return "-" if value is None else format_gbps(value)


def _engine_notes(e: EngineFaninLevel, knee: int | None) -> list[str]:
    lv = e.level
    notes = [s for s in (lv.skipped,) if s]
    if e.transports:
        notes.append("/".join(e.transports))
    if lv.call is not None and lv.call is not Call.BASE:
        notes.append("knee" if lv.readers == knee else lv.call.value)
    if lv.readers_busy is not None and lv.readers > 1:
        notes.append(f"{lv.readers_busy:.1f} of {lv.readers} at once")
    if e.fallback and e.configuration is None:  # not measured: its note names it already
        notes.append(e.fallback)
    if lv.errors:
        notes.append(f"{len(lv.errors)} failed: {lv.errors[0]}")
    return notes


def projection_table(proj: Sequence[Projection]) -> LevelTable:
    """With a workload: per level the projected KV fetch per request and the TTFT change
    against the baseline, every chunk at the level's p50, then at its p99."""
    rows = tuple(
        (
            str(p.readers),
            format_duration_us(p.fetch_p50_us),
            format_duration_us(p.fetch_p99_us),
            signed(p.change_p50_us),
            signed(p.change_p99_us),
        )
        for p in proj
    )
    return LevelTable(PROJECTION_HEADERS, rows)


def duration_range(lo_us: float, hi_us: float) -> str:
    """'4.5-7.9 ms', '850 us-1.2 ms', '4.5 ms or more' (an unbounded top)."""
    if math.isinf(hi_us):
        return f"{format_duration_us(lo_us)} or more"
    lo, hi = format_duration_us(lo_us), format_duration_us(hi_us)
    lo_n, lo_u = lo.split(" ")
    return f"{lo_n}-{hi}" if hi.endswith(f" {lo_u}") else f"{lo}-{hi}"


def _versus(lv: FaninLevel, base: FaninLevel | None, knee: int | None) -> str:
    """'1.00x first', '1.32x within', '3.25x knee' (the first level beyond), '4.10x
    beyond', '1.90x undecided'."""
    if base is None or base.chunk is None or lv.chunk is None or lv.call is None:
        return "-"
    ratio = f"{lv.chunk.p99_us / base.chunk.p99_us:.2f}x"
    if lv.call is Call.BASE:
        return f"{ratio} first"
    return f"{ratio} {'knee' if lv.readers == knee else lv.call.value}"


def _notes(f: FaninResult, lv: FaninLevel) -> list[str]:
    notes = [s for s in (lv.skipped,) if s]
    if lv.readers_busy is not None and lv.readers > 1:
        notes.append(f"{lv.readers_busy:.1f} of {lv.readers} at once")
    if lv.storage_tcp_retrans:
        notes.append(f"{lv.storage_tcp_retrans:,} retransmitted")
    notes += storage_findings(f.storage, lv)[:2]
    if lv.shared_uplinks:
        notes.append("shared uplinks " + ", ".join(lv.shared_uplinks))
    if lv.errors:
        notes.append(f"{len(lv.errors)} failed: {lv.errors[0]}")
    return notes


def _n(k: int) -> str:
    return f"{k} reader{'' if k == 1 else 's'}"
