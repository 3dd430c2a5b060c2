"""Terminal lines of the fan-in sweep (``run --fanin``, docs/fanin.md): per storage node
its headline, then one row per level (``analysis.fanin_table``, the report's table too);
with a workload, the projected KV fetch per request."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.analysis.fanin import no_projection, project, storage_rtt_us
from netqual.analysis.fanin_table import (
    ENGINE_NOTE,
    NOTE,
    LevelTable,
    chunk_words,
    engine_headline,
    engine_table,
    headline,
    level_table,
    projection_table,
)
from netqual.base.units import format_duration_us
from netqual.table.run import Results


def print_fanin(console: Console, results: Results) -> None:
    for f in results.fanin:
        rtt = storage_rtt_us(results, f.storage)
        proj = project(f, results.workload, rtt) if results.workload else ()
        console.print(
            Text.assemble(("fan-in ", "bold"), (f.storage, "bold"), f" ({chunk_words(f)})"),
            soft_wrap=True,
        )
        console.print(Text(headline(f, proj)))  # wrapped at the width, like the note
        console.print(_table(level_table(f)))
        if proj:
            console.print(
                f"projected per request ({proj[0].chunks} chunks, against "
                f"{format_duration_us(proj[0].baseline_us)} without offload):"
            )
            console.print(_table(projection_table(proj)))
        why = None if results.workload is None or proj else no_projection(f, results.workload)
        if why:
            console.print(Text(f"{f.storage}: {why}"), style="dim")
        if (through := engine_table(f)) is not None:
            console.print(Text(engine_headline(f) or ""), soft_wrap=True)
            console.print(_fitted(through))
    if results.fanin:
        console.print(NOTE, style="dim")
    if any(f.engine is not None for f in results.fanin):
        console.print(ENGINE_NOTE, style="dim")


def _table(t: LevelTable) -> Table:
    table = Table(box=None, pad_edge=False)
    for col in t.headers:
        if col == "note":
            table.add_column(col, ratio=1)
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for row in t.rows:
        table.add_row(*(Text(x) for x in row))
    return table


def _fitted(t: LevelTable) -> Table:
    """Each column as wide as its longest cell or header word (headers wrap at their
    spaces, cells are never cut), the note taking what is left."""
    table = Table(box=None, pad_edge=False)
    for k, col in enumerate(t.headers):
        if col == "note":
            table.add_column(col, ratio=1)
            continue
        width = max([len(w) for w in col.split()] + [len(row[k]) for row in t.rows])
        table.add_column(col, justify="right", width=width)
    for row in t.rows:
        table.add_row(*(Text(x) for x in row))
    return table
