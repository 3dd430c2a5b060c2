"""Terminal lines of the fan-in sweep (``run --fanin``, docs/fanin.md): per storage node
its verdict, then one row per level; with a workload, the projected KV fetch per request."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.analysis.fanin import no_projection, pays_sentence, project, storage_findings
from netqual.base.units import format_duration_us, format_size, format_us
from netqual.table.run import Results


def _signed(us: float) -> str:
    return ("+" if us >= 0 else "-") + format_duration_us(abs(us))


def print_fanin(console: Console, results: Results) -> None:
    for f in results.fanin:
        console.print(
            Text.assemble(
                ("fan-in ", "bold"), (f.storage, "bold"), f" ({f.profile}, ",
                f"{format_size(f.chunk_bytes)} chunks): {f.verdict}",
            ),
            soft_wrap=True,
        )  # fmt: skip
        proj = {p.readers: p for p in project(f, results.workload)} if results.workload else {}
        table = Table(box=None, pad_edge=False)
        for col in ("readers", "chunk p50", "p99", "p99.9", "chunks", "Gb/s/rdr", "Gb/s"):
            table.add_column(col, justify="right")
        if proj:
            table.add_column("KV fetch", justify="right", no_wrap=True)
            table.add_column("TTFT (p99)", justify="right", no_wrap=True)
        table.add_column("note")
        for lv in f.levels:
            c = lv.chunk
            row = [str(lv.readers)]
            if c is None:
                row += ["-"] * 6
            else:
                row += [
                    format_us(c.p50_us),
                    format_us(c.p99_us) + ("*" if "p99" in c.untrusted else ""),
                    format_us(c.p999_us) + ("*" if "p999" in c.untrusted else ""),
                    f"{c.samples:,}",
                    f"{lv.goodput_gbps_per_reader or 0:.2f}",
                    f"{lv.aggregate_gbps or 0:.2f}",
                ]
            if proj:
                p = proj.get(lv.readers)
                row += (
                    ["-", "-"]
                    if p is None
                    else [
                        format_duration_us(p.fetch_p50_us),
                        f"{_signed(p.change_p50_us)} ({_signed(p.change_p99_us)})",
                    ]
                )
            notes = [s for s in (lv.skipped,) if s]
            if lv.storage_tcp_retrans:
                notes.append(f"{lv.storage_tcp_retrans:,} retransmitted")
            notes += storage_findings(f.storage, lv)[:2]
            if lv.shared_uplinks:
                notes.append("shared uplink " + ", ".join(lv.shared_uplinks))
            if lv.errors:
                notes.append(f"{len(lv.errors)} failed: {lv.errors[0]}")
            row.append("; ".join(notes))
            table.add_row(*(Text(x) for x in row))
        console.print(table)
        if proj:
            console.print(Text(f"{f.storage}: {pays_sentence(tuple(proj.values()))}", style="bold"))
        elif results.workload is not None and (why := no_projection(f, results.workload)):
            console.print(Text(f"{f.storage}: {why}"), style="dim")
    if any(
        "p99" in (lv.chunk.untrusted if lv.chunk else ()) for f in results.fanin for lv in f.levels
    ):
        console.print("* fewer than 1,000 chunks: p99 not trusted (p99.9: 10,000)", style="dim")
