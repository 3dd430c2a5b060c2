"""The report's fan-in panels (``run --fanin``, docs/fanin.md), on the first screen: per
storage node its verdict, chunk p50/p99 against concurrent readers (inline SVG, with the
knee's line), and with a workload the projected KV fetch per request against the
baseline and up to which concurrency offload pays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.analysis.fanin import (
    Projection,
    no_projection,
    project,
    storage_findings,
    storage_rtt_us,
    storage_sent,
)
from netqual.analysis.fanin_table import (
    ENGINE_NOTE,
    NOTE,
    LevelTable,
    engine_headline,
    engine_table,
    headline,
    level_table,
    projection_table,
    signed,
)
from netqual.base.units import format_bytes, format_duration_us
from netqual.model.fanin import FaninResult
from netqual.table.run import Results

W, H, LEFT, TOP, BOTTOM = 360, 170, 56, 22, 30  # chart box, px
# y tick labels are at most this many characters ('750 ms', '1.5 s', '12.5 ms'): at 11 px
# (about 6.5 px a character) they fit left of the plot, right-aligned at LEFT - 4
MAX_TICK_CHARS = 7


@dataclass(frozen=True)
class Chart:
    title: str
    lines: Sequence[tuple[str, str, str]]  # (css class, SVG points, legend label)
    band: str  # SVG polygon points (p50 to p99 spread), "" for none
    hline: tuple[float, str] | None  # (y px, label): the knee's line or the baseline
    xticks: Sequence[tuple[float, str]]
    yticks: Sequence[tuple[float, str]]
    marks: Sequence[tuple[float, float, str]]  # (x, y, tooltip) points with their value


@dataclass(frozen=True)
class FaninPanel:
    storage: str
    headline: str  # verdict, and with a workload: up to which concurrency offload pays
    detail: str
    charts: Sequence[Chart]
    table: LevelTable | None = None  # the terminal's level table, the same cells
    projection: LevelTable | None = None  # with a workload: the terminal's projection table
    note: str = NOTE
    # per measured level, what the storage node's own counters saw over it: "8 readers:
    # eth0 sent 1.25 GiB; rx_prio3_pause 40 on st1 eth0" (empty: its agent did not count)
    counters: Sequence[str] = ()
    # run --fanin --engine: the levels through the fetch engine beside the probe's
    engine_headline: str | None = None
    engine: LevelTable | None = None
    engine_note: str = ENGINE_NOTE


def _scale(levels: Sequence[int], top_value: float) -> tuple[dict[int, float], float]:
    """x px per level (evenly spaced: levels are usually 1, 2, 4, 8, 16) and px per unit."""
    step = (W - LEFT - 16) / max(1, len(levels) - 1)
    xs = {k: LEFT + 8 + i * step for i, k in enumerate(levels)}
    return xs, (H - TOP - BOTTOM) / (top_value or 1.0)


def _y(value: float, per: float) -> float:
    return H - BOTTOM - value * per


def _pts(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)


def nice_top(top_us: float) -> tuple[float, float, str, float]:
    """(axis top, tick step, unit, microseconds per unit) for values up to ``top_us``: the
    unit that keeps the top under 1,000 of it (us, ms, s), a step of 1, 2, 2.5 or 5 x 10^n
    of that unit, four or five steps; the top is a whole number of steps."""
    div, unit = (1e6, "s") if top_us >= 1e6 else (1e3, "ms") if top_us >= 1e3 else (1.0, "us")
    top = max(top_us / div, 1e-9)
    mag = 10 ** math.floor(math.log10(top / 4))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if top / (m * mag) <= 5)
    return math.ceil(top / step - 1e-9) * step * div, step * div, unit, div


def tick_label(value_us: float, div: float, unit: str) -> str:
    """'0', '250 ms', '1.5 s', '12.5 ms': no exponent, no more digits than needed."""
    v = value_us / div
    if v == 0:
        return "0"
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}"


def _yticks(top: float, per: float) -> list[tuple[float, str]]:
    """Ticks from 0 to ``top`` microseconds (a ``nice_top``) in the unit that suits it."""
    _, step, unit, div = nice_top(top)
    n = round(top / step)
    return [(_y(i * step, per), tick_label(i * step, div, unit)) for i in range(n + 1)]


def chunk_chart(f: FaninResult) -> Chart | None:
    measured = [lv for lv in f.levels if lv.chunk is not None]
    if not measured:
        return None
    ks = [lv.readers for lv in measured]
    base = measured[0].chunk
    assert base is not None
    knee_line = f.knee_factor * base.p99_us
    top = nice_top(max([knee_line] + [lv.chunk.p99_us for lv in measured if lv.chunk]))[0]
    xs, per = _scale(ks, top)
    p99 = [(xs[lv.readers], _y(lv.chunk.p99_us, per)) for lv in measured if lv.chunk]
    p50 = [(xs[lv.readers], _y(lv.chunk.p50_us, per)) for lv in measured if lv.chunk]
    marks = [
        (xs[lv.readers], _y(lv.chunk.p99_us, per),
         f"{lv.readers} readers: p99 {format_duration_us(lv.chunk.p99_us)}, "
         f"p50 {format_duration_us(lv.chunk.p50_us)}, {lv.chunk.samples:,} chunks")
        for lv in measured if lv.chunk
    ]  # fmt: skip
    return Chart(
        title=f"chunk completion vs readers ({f.profile}, {format_bytes(f.chunk_bytes)})",
        lines=(("p99", _pts(p99), "p99"), ("p50", _pts(p50), "p50")),
        band="",
        hline=(
            _y(knee_line, per),
            f"knee: {f.knee_factor:g}x the p99 at {ks[0]} reader{'' if ks[0] == 1 else 's'}",
        ),
        xticks=[(xs[k], str(k)) for k in ks],
        yticks=_yticks(top, per),
        marks=marks,
    )


def ttft_chart(f: FaninResult, proj: Sequence[Projection]) -> Chart | None:
    if not proj:
        return None
    ks = [p.readers for p in proj]
    top = nice_top(max([proj[0].baseline_us] + [p.fetch_p99_us for p in proj]))[0]
    xs, per = _scale(ks, top)
    p50 = [(xs[p.readers], _y(p.fetch_p50_us, per)) for p in proj]
    p99 = [(xs[p.readers], _y(p.fetch_p99_us, per)) for p in proj]
    marks = [
        (xs[p.readers], _y(p.fetch_p50_us, per),
         f"{p.readers} readers: KV fetch {format_duration_us(p.fetch_p50_us)} per request "
         f"(p99 chunks: {format_duration_us(p.fetch_p99_us)}); TTFT change "
         f"{signed(p.change_p50_us)} at p50, {signed(p.change_p99_us)} at p99")
        for p in proj
    ]  # fmt: skip
    return Chart(
        title=f"KV fetch per request ({proj[0].chunks} chunks) vs readers",
        lines=(("p50", _pts(p50), "chunks at p50"),),
        band=_pts(p50 + p99[::-1]),
        hline=(_y(proj[0].baseline_us, per), "baseline (without offload)"),
        xticks=[(xs[k], str(k)) for k in ks],
        yticks=_yticks(top, per),
        marks=marks,
    )


def fanin_panels(results: Results) -> tuple[FaninPanel, ...]:
    out = []
    w = results.workload
    for f in results.fanin:
        proj = project(f, w, storage_rtt_us(results, f.storage)) if w is not None else ()
        detail = ""
        if w is not None and not proj:
            detail = no_projection(f, w) or ""
        if proj:
            detail = (
                "Projected per request (the one TTFT model, docs/workload.md): every cached "
                "chunk fetched one after another at the level's chunk p50 (line) to p99 "
                f"(band) plus {_reads(w.round_trips_per_chunk if w else 1)} of its reader's "
                "own round trip, against the same chunks without offload; "
                "it pays where even the p99 end is below the baseline. TTFT change at each "
                "level, chunks at p50 / at p99: "
                + ", ".join(
                    f"{p.readers}: {signed(p.change_p50_us)} / {signed(p.change_p99_us)}"
                    for p in proj
                )
                + "."
            )
        charts = tuple(c for c in (chunk_chart(f), ttft_chart(f, proj)) if c is not None)
        out.append(
            FaninPanel(
                f.storage,
                headline(f, proj),
                detail,
                charts,
                level_table(f),
                projection_table(proj) if proj else None,
                counters=counter_lines(f),
                engine_headline=engine_headline(f),
                engine=engine_table(f),
            )
        )
    return tuple(out)


def _reads(n: float) -> str:
    """The round trips a chunk adds beyond the one its measured completion holds."""
    extra = max(0.0, n - 1)
    return f"{extra:g} further serial round trip{'' if extra == 1 else 's'}"


def counter_lines(f: FaninResult) -> tuple[str, ...]:
    """One line per level whose storage counters were read (docs/fanin.md)."""
    out = []
    for lv in f.levels:
        sent = storage_sent(lv)
        if lv.storage_counters is None or lv.chunk is None:
            continue
        found = storage_findings(f.storage, lv)
        words = [sent or "nothing sent"] + (list(found) or ["no drops, pauses or RDMA errors"])
        out.append(f"{lv.readers} reader{'' if lv.readers == 1 else 's'}: " + "; ".join(words))
    return tuple(out)
