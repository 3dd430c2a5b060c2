"""Terminal text of the campaign commands: what ``campaign add`` did and the trend."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.analysis.comparable import note
from netqual.base.units import format_us, plural
from netqual.campaign.store import Added
from netqual.campaign.trend import MilestoneState, MilestoneStatus, Movement, Trend
from netqual.model.path import path_label

SHOWN = 10
_VERDICT_STYLE = {"offload-safe": "green", "marginal": "yellow", "unsafe": "red"}


FIRST_RUN = "the campaign's first run"


def print_added(console: Console, added: Added, campaign_dir: str) -> None:
    run = added.run
    if not added.new:
        console.print(
            Text(
                f"{run.source}: already in the campaign as week {run.week}"
                f" (run {run.run_id}); nothing added"
            ),
            soft_wrap=True,
        )
        return
    safe, marginal, unsafe = run.counts
    what = "retest" if run.retest_of else "run"
    text = Text(f"added {what} {run.run_id} to {campaign_dir} as week {run.week}: ")
    text.append(f"{run.n_paths} paths ({safe} offload-safe, {marginal} marginal, {unsafe} unsafe)")
    if not run.complete:
        text.append(", incomplete run")
    if run.retest_of:
        text.append(f", retest of run {run.retest_of}")
    console.print(text, soft_wrap=True)
    if added.incomparable:
        warning = f"warning: {note(added.incomparable, FIRST_RUN)}"
        console.print(Text(warning, style="bold yellow"), soft_wrap=True)


def _p99(x: float | None) -> str:
    return format_us(x) if x is not None else "-"


def _movement(console: Console, title: str, m: Movement) -> None:
    console.print(
        Text(
            f"{title} (week {m.since_week}): {plural(m.n_worse, 'path')} worse,"
            f" {m.n_better} better of {m.compared}"
        ),
        soft_wrap=True,
    )
    for label, moves, total in (("worse", m.worse, m.n_worse), ("better", m.better, m.n_better)):
        for p in moves[:SHOWN]:
            line = Text(
                f"  {label}  {path_label(p.src, p.dst)}"
                f"  p99 {_p99(p.old_p99_us)} -> {_p99(p.new_p99_us)} us"
            )
            if p.old_verdict != p.new_verdict:
                line.append(f"  {p.old_verdict} -> ")
                line.append(p.new_verdict, style=_VERDICT_STYLE.get(p.new_verdict, ""))
            console.print(line, soft_wrap=True)
        if total > SHOWN:
            console.print(f"  ... and {total - SHOWN} more {label} (see --json or --html)")


def print_trend(console: Console, t: Trend) -> None:
    console.print(
        Text(f"Campaign {t.campaign}: {len(t.weeks)} weeks with runs, latest week {t.latest_week}"),
        soft_wrap=True,
    )
    if t.milestones:
        line = Text("Milestones: ")
        for i, m in enumerate(t.milestones):
            line.append(", " if i else "")
            line.append(*milestone_text(m))
        console.print(line, soft_wrap=True)
    latest_gates = [g for g in t.gates if g.week == t.latest_week]
    for g in latest_gates:
        verdict = Text(
            "PASSED" if g.passed else "FAILED", style="green" if g.passed else "bold red"
        )
        line = Text(f"Milestone {g.milestone} (week {g.week}, {g.profile}): ").append(verdict)
        if g.failed_rules:
            line.append(f"  failed: {', '.join(g.failed_rules)}")
        console.print(line, soft_wrap=True)
    table = Table(show_edge=False, pad_edge=False)
    for col in ("week", "runs", "paths", "offload-safe", "marginal", "unsafe"):
        table.add_column(col, justify="right")
    for w in t.weeks:
        table.add_row(
            str(w.week), str(w.runs), str(w.paths), str(w.safe), str(w.marginal), str(w.unsafe)
        )
    console.print(table)
    if t.since_last is not None:
        _movement(console, "Since last week", t.since_last)
    if t.since_first is not None and t.since_first.since_week != (
        t.since_last.since_week if t.since_last else None
    ):
        _movement(console, "Since the first week", t.since_first)
    open_ = [s for s in t.suspects if s.open]
    fixed = [s for s in t.suspects if not s.open]
    console.print(f"Suspects: {len(open_)} open, {len(fixed)} fixed")
    for s in open_[:SHOWN]:
        console.print(
            Text(
                f"  open   {s.kind} {s.subject}: first seen week {s.first_week},"
                f" last seen week {s.last_week}"
            ),
            soft_wrap=True,
        )
    for s in fixed[:SHOWN]:
        console.print(
            Text(
                f"  fixed  {s.kind} {s.subject}: weeks {s.first_week}-{s.last_week},"
                f" gone in week {s.fixed_in}"
            ),
            soft_wrap=True,
        )
    if t.waivers_due:
        console.print(f"Waivers expiring before milestone {t.next_milestone}:")
        for due in t.waivers_due:
            console.print(
                Text(
                    f"  {path_label(due.src, due.dst)} ({due.milestone}): "
                    f"until {due.until.isoformat()},"
                    f" {due.owner}: {due.reason}"
                ),
                soft_wrap=True,
            )


_MILESTONE_STYLE = {
    MilestoneStatus.PASSED: "green",
    MilestoneStatus.FAILED: "bold red",
    MilestoneStatus.DUE: "yellow",
    MilestoneStatus.NOT_DUE: "dim",
}


def milestone_text(m: MilestoneState) -> tuple[str, str]:
    return m.text, _MILESTONE_STYLE[m.status]
