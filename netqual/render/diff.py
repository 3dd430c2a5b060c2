"""Terminal view of a run diff."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.analysis.diff import PathChange, RunDiff
from netqual.analysis.diffnotes import change_text, noise_sentence, preliminary_sentence, worse_rule
from netqual.base.units import format_us, plural
from netqual.model.path import path_label
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict

SHOWN = 20
_STYLE = {Verdict.SAFE: "green", Verdict.MARGINAL: "yellow", Verdict.UNSAFE: "red"}


def _verdict(v: Verdict) -> Text:
    return Text(v.value, style=_STYLE[v])


def _changes_table(title: str, rows: Sequence[PathChange], metric: str) -> Table:
    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for col in ("path", "was", "now", f"{metric} was us", f"{metric} now us", "change us"):
        t.add_column(col, justify="right" if "us" in col else "left")
    for c in rows[:SHOWN]:
        t.add_row(c.label, _verdict(c.old.verdict), _verdict(c.new.verdict), format_us(c.old_us),
                  format_us(c.new_us), change_text(c))  # fmt: skip
    return t


def print_diff(console: Console, d: RunDiff) -> None:
    m = d.metric.value
    console.print(f"Old: {d.old_source} ({d.old_started_at})")
    console.print(f"New: {d.new_source} ({d.new_started_at})")
    if d.incomparable_note:
        console.print(Text(f"warning: {d.incomparable_note}", style="bold yellow"))
    counts = ", ".join(
        f"{v.value} {d.old_counts.get(v, 0)} -> {d.new_counts.get(v, 0)}" for v in Verdict
    )
    console.print(f"Classes: {counts}")
    console.print(
        f"{plural(len(d.worse), 'path')} worse, {len(d.better)} better, {len(d.new_paths)} new, "
        f"{len(d.missing_paths)} missing, {len(d.deltas)} compared"
    )
    preliminary = preliminary_sentence(d)
    if preliminary:
        console.print(preliminary, style="bold yellow")
    console.print(f"{worse_rule(d)}; {noise_sentence(d)}", style="dim")
    if d.worse_p99:  # the rise judges p99 under any policy: p99's values and noise
        p99 = Metric.P99.value
        title = f"Same class, {p99} up beyond the threshold"
        console.print(_changes_table(title, d.worse_p99, p99))
    if d.changed_class:
        console.print(_changes_table("Paths that changed class", d.changed_class, m))
        if len(d.changed_class) > SHOWN:
            console.print(f"... and {len(d.changed_class) - SHOWN} more")
    top = d.measured[:10]
    if top:
        console.print(_changes_table(f"Largest {m} changes", top, m))
    for title, paths in (
        ("New paths", d.new_paths),
        ("Missing paths (in old, not in new)", d.missing_paths),
    ):
        if paths:
            names = ", ".join(f"{path_label(p.src, p.dst)}" for p in paths[:SHOWN])
            more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
            console.print(Text(f"{title}: ", style="bold") + Text(names + more), soft_wrap=True)
