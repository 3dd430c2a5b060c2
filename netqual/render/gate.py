"""Terminal and CI text of a gate report."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.gate import GateReport, Status
from netqual.gate.junit import waiver_line

MAX_PATHS_SHOWN = 20
_STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.SKIP: "yellow"}


def print_gate(console: Console, report: GateReport) -> None:
    if report.not_due is not None:
        console.print(
            Text.assemble("Gate profile: ", (report.profile, "bold"), f" ({report.source})")
        )
        console.print(Text(f"GATE NOT DUE: {report.not_due}", style="bold yellow"), soft_wrap=True)
        return
    for note in report.notes:
        console.print(Text(f"warning: {note}", style="bold yellow"), soft_wrap=True)
    console.print(Text.assemble("Gate profile: ", (report.profile, "bold"), f" ({report.source})"))
    base = report.baseline_source or "none"
    console.print(
        f"Results: {report.results_source} ({report.n_paths} paths), baseline: {base}, "
        f"date: {report.today.isoformat()}"
    )
    table = Table()
    table.add_column("rule")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for o in report.outcomes:
        table.add_row(o.rule, Text(o.status.value.upper(), style=_STYLE[o.status]), o.message)
    console.print(table)
    for o in report.failed:
        what = (
            "what blocks, most paths held first"
            if o.rule.endswith("no_blocking")
            else "failing paths"
        )
        console.print(Text(f"{o.rule}: {what}", style="bold"))
        for f in o.failing[:MAX_PATHS_SHOWN]:
            console.print(f"  {f.label}  {f.detail}", soft_wrap=True)
        if len(o.failing) > MAX_PATHS_SHOWN:
            console.print(
                f"  ... and {len(o.failing) - MAX_PATHS_SHOWN} more (see --json or --junit)"
            )
    if report.waivers:
        console.print(Text("Waivers", style="bold"))
        for i, st in enumerate(report.waivers):
            style = "yellow" if st.expired else ""
            console.print(Text("  " + waiver_line(report, i), style=style), soft_wrap=True)
    if report.passed:
        console.print(
            Text(f"GATE PASSED: all {len(report.outcomes)} rules hold", style="bold green")
        )
    else:
        names = ", ".join(o.rule for o in report.failed)
        console.print(
            Text(
                f"GATE FAILED: {len(report.failed):,} of {len(report.outcomes):,} rules failed "
                f"({names})",
                style="bold red",
            ),
            soft_wrap=True,
        )
