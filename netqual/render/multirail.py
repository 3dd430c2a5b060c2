"""Terminal lines of ``run --multirail`` (docs/rails.md): per node pair, the aggregate
goodput per rail count, the gain of each added rail, and the verdict line."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from netqual.base.names import visible
from netqual.base.units import format_size
from netqual.table.run import Results


def print_multirail(console: Console, results: Results) -> None:
    if not results.multirail:
        return
    console.print("multi-rail bandwidth (rails read at once)", style="bold")
    for m in results.multirail:
        steps = []
        for lv in m.levels:
            if lv.aggregate_gbps is None:
                steps.append(f"{lv.rails} rails failed")
                continue
            gain = "" if lv.gain_gbps is None else f" ({lv.gain_gbps:+.2f})"
            steps.append(
                f"{lv.rails} rail{'s' if lv.rails > 1 else ''} {lv.aggregate_gbps:.2f}{gain}"
            )
        cell = f"{format_size(m.chunk_bytes)} x depth {m.depth}"
        console.print(
            f"  {visible(m.src)}<->{visible(m.dst)} ({cell}, Gbit/s): " + ", ".join(steps),
            highlight=False,
            soft_wrap=True,
        )
        console.print(Text(f"    {visible(m.verdict)}", style="red" if m.short else "green"))
