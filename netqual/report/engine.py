"""The report's engine section (``run --engine``, docs/engines.md): per path, the engine's
cell beside netqual's own bulk cell at the same chunk and depth, their ratio, the
transport and NIC the engine really used, and the findings, first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from netqual.analysis.engine import findings
from netqual.base.units import format_size, format_us
from netqual.model.engine import EngineCell
from netqual.model.path import PathResult, path_label
from netqual.table.run import Results

MAX_ROWS = 400  # cells shown; results.json holds every one


@dataclass(frozen=True)
class EngineRow:
    path: str
    op: str
    chunk: str
    depth: int
    engine_p50: str
    engine_p99: str
    probe_p50: str
    probe_p99: str
    ratio: str
    slow: bool  # the ratio is past the policy's max_engine_vs_probe
    wire: str  # "tcp to-sw", or "failed"
    fallback: str | None
    first_op: str
    error: str | None


@dataclass(frozen=True)
class EngineView:
    title: str  # "mooncake (mooncake-transfer-engine-non-cuda 0.3.13.post1)"
    limit: float  # the policy's max_engine_vs_probe
    findings: Sequence[str]
    rows: Sequence[EngineRow]
    more: int  # cells not shown
    headline: str | None = None  # first screen: how many paths the engine falls short on


def _row(path: PathResult, c: EngineCell, limit: float) -> EngineRow:
    probe = next(
        (
            b
            for b in path.bulk
            if b.chunk_bytes == c.chunk_bytes and b.depth == c.depth and b.error is None
        ),
        None,
    )
    return EngineRow(
        path=path_label(path.src, path.dst),
        op=c.op.value,
        chunk=format_size(c.chunk_bytes),
        depth=c.depth,
        engine_p50=format_us(c.completion_p50_us),
        engine_p99=format_us(c.completion_p99_us),
        probe_p50=format_us(probe.completion_p50_us) if probe else "-",
        probe_p99=format_us(probe.completion_p99_us) if probe else "-",
        ratio="-" if c.vs_probe is None else f"{c.vs_probe:.1f}x",
        slow=c.vs_probe is not None and c.vs_probe > limit,
        wire="failed" if c.error else f"{c.transport.value} {c.device or ''}".strip(),
        fallback=c.fallback,
        first_op=format_us(c.first_op_us, unit=True),
        error=c.error,
    )


def engine_view(results: Results) -> EngineView | None:
    paths = results.paths.with_engine_cells()
    if not paths:
        return None
    limit = results.run.policy.max_engine_vs_probe
    rows = [_row(p, c, limit) for p in paths for c in p.engine]
    first = paths[0].engine[0]
    found = findings(paths, results.run.policy)
    short = len({f.subject for f in found})
    headline = None
    if short:
        headline = (
            f"Fetch engine {first.name.value}: {short} of {len(paths)} paths fall short of the "
            f"fabric (slower than {limit:g}x the probe, a fallback, or a failure): the "
            "connector's data mover, not the network, limits them here (Fetch engine below)"
        )
    return EngineView(
        title=f"{first.name.value} ({first.version or 'version unknown'})",
        limit=limit,
        findings=tuple(f"{f.subject}: {f.text}" for f in found),
        rows=tuple(rows[:MAX_ROWS]),
        more=max(0, len(rows) - MAX_ROWS),
        headline=headline,
    )
