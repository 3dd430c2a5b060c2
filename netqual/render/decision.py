"""The terminal's first lines: the run's one answer (go, go with conditions, no-go), the three
verdict counts, what it rests on, and the fixes ranked by the paths they hold
(``netqual.analysis.decision``); then the detail follows."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from netqual.base.names import visible
from netqual.model.decision import Answer, Blocking, Decision
from netqual.model.verdict import Verdict

FIXES_SHOWN = 3  # the terminal's first screen; gate and --json list them all
_STYLE = {Answer.GO: "bold green", Answer.CONDITIONAL: "bold yellow", Answer.NO_GO: "bold red"}


def fix_line(n: int, b: Blocking) -> str:
    """'1. h3/eth1 (bandwidth, 4 paths): every one of its ... -> check ...'."""
    held = f"{b.paths:,} path{'' if b.paths == 1 else 's'}"
    return visible(f"{n}. {b.subject.name} ({b.kind.label}, {held}): {b.detail} -> {b.action}")


def counts_text(d: Decision) -> str:
    return ", ".join(f"{d.counts.get(v, 0):,} {v.value}" for v in Verdict)


def print_decision(console: Console, d: Decision | None) -> None:
    if d is None:
        return
    console.print(
        Text.assemble(
            ("Decision: ", "bold"),
            (d.answer.label, _STYLE[d.answer]),
            f" ({counts_text(d)}); judged by {d.governs}",
        ),
        soft_wrap=True,
    )
    for c in d.conditions:
        console.print(Text(f"condition: {c}", style="bold yellow"), soft_wrap=True)
    if d.blocking:
        console.print(Text("Fix first (what blocks, most paths held first):", style="bold"))
        for n, b in enumerate(d.blocking[:FIXES_SHOWN], 1):
            console.print(f"  {fix_line(n, b)}", soft_wrap=True)
        if len(d.blocking) > FIXES_SHOWN:
            rest = len(d.blocking) - FIXES_SHOWN
            console.print(f"  ... and {rest:,} more (netqual gate RESULTS, or report --json)")
    for c in d.cautions:
        console.print(Text(f"caution: {c}", style="dim"), soft_wrap=True)
