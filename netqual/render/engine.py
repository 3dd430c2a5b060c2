"""The fetch engine cells on a terminal (``--engine``, docs/engines.md): each path's engine
cell beside netqual's own bulk cell at the same chunk and depth, their ratio, the
transport and NIC the engine really used, and the findings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.analysis.engine import EngineFinding, findings, path_findings
from netqual.base.units import format_bytes, format_us
from netqual.model.engine import EngineCell
from netqual.model.path import PathResult, path_label
from netqual.model.policy import Policy
from netqual.model.stats import BulkStats
from netqual.table.run import Results

MAX_PATHS = 40  # rows of the run's table; the rest are in results.json and report.html
# the reasons run.engine_cells gives a pair its engine refused (configuration)
ENGINE_REASONS = ("--engine-require ", "engine ")


def probe_cell(cell: EngineCell, bulk: Iterable[BulkStats]) -> BulkStats | None:
    """netqual's own bulk cell at the engine cell's chunk and depth."""
    for b in bulk:
        if b.chunk_bytes == cell.chunk_bytes and b.depth == cell.depth and b.error is None:
            return b
    return None


def ratio_text(cell: EngineCell, policy: Policy) -> Text:
    if cell.vs_probe is None:
        return Text("-", style="dim")
    style = "bold red" if cell.vs_probe > policy.max_engine_vs_probe else ""
    return Text(f"{cell.vs_probe:.1f}x", style=style)


def wire_text(cell: EngineCell) -> Text:
    if cell.error is not None:
        return Text("failed", style="bold red")
    text = Text(cell.transport.value + (f" {cell.device}" if cell.device else ""))
    if cell.fallback is not None:
        text.stylize("bold red")
    return text


def _table(title: str | None, with_path: bool) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    if with_path:
        t.add_column("path")
    for name in ("op", "chunk", "depth"):
        t.add_column(name, justify="right" if name != "op" else "left")
    for name in ("engine p50", "p99", "probe p50", "p99 ", "engine/probe"):
        t.add_column(name, justify="right")
    t.add_column("transport / NIC")
    t.add_column("first op", justify="right")
    return t


def _row(path: PathResult, cell: EngineCell, policy: Policy, with_path: bool) -> list[Text | str]:
    probe = probe_cell(cell, path.bulk)
    row: list[Text | str] = [path_label(path.src, path.dst)] if with_path else []
    return [
        *row,
        cell.op.value,
        format_bytes(cell.chunk_bytes),
        str(cell.depth),
        format_us(cell.completion_p50_us),
        format_us(cell.completion_p99_us),
        format_us(probe.completion_p50_us) if probe else "-",
        format_us(probe.completion_p99_us) if probe else "-",
        ratio_text(cell, policy),
        wire_text(cell),
        format_us(cell.first_op_us),
    ]


def engine_title(cells: Sequence[EngineCell]) -> str:
    c = cells[0]
    start = c.evidence.start_s
    peer = c.evidence.peer_start_s
    started = ""
    if start is not None and peer is not None:
        started = f"; start-up {peer:.1f} s target, {start:.1f} s initiator"
    return f"engine {c.name.value} ({c.version or 'version unknown'}){started}"


def print_engine_path(console: Console, path: PathResult, policy: Policy) -> None:
    """``netqual probe --engine``: the pair's engine cells and their findings."""
    if not path.engine:
        return
    table = _table(engine_title(path.engine), with_path=False)
    for cell in path.engine:
        table.add_row(*_row(path, cell, policy, with_path=False))
    console.print(table)
    _print_findings(console, path_findings(path, policy))


def print_engine_results(console: Console, results: Results) -> None:
    """``netqual run --engine``: every path's engine cells (the first ``MAX_PATHS``), and the
    pairs its engine left not measured (configuration), each with its reason."""
    refused = [m for m in results.not_measured if m.reason.startswith(ENGINE_REASONS)]
    for m in refused[:MAX_PATHS]:
        console.print(
            Text.assemble(
                (f"not measured (configuration): {path_label(m.src, m.dst)}: ", "bold"), m.reason
            ),
            soft_wrap=True,
        )
    if len(refused) > MAX_PATHS:
        console.print(f"... and {len(refused) - MAX_PATHS} more: results.json", style="dim")
    with_engine = results.paths.with_engine_cells()
    if not with_engine:
        return
    policy = results.run.policy
    table = _table(engine_title(with_engine[0].engine), with_path=True)
    for path in with_engine[:MAX_PATHS]:
        for cell in path.engine:
            table.add_row(*_row(path, cell, policy, with_path=True))
    console.print(table)
    if len(with_engine) > MAX_PATHS:
        console.print(
            f"... and {len(with_engine) - MAX_PATHS} more paths: results.json", style="dim"
        )
    _print_findings(console, findings(with_engine, policy))


def _print_findings(console: Console, found: Sequence[EngineFinding]) -> None:
    for f in found[:20]:
        console.print(Text.assemble((f"{f.subject}: ", "bold"), f.text), soft_wrap=True)
