"""Live progress for ``run`` and ``demo``: pairs done/total, ETA, worst path so far."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from netqual.models import Metric, PathResult
from netqual.results import RunningWorst
from netqual.units import format_us


class ProgressObserver:
    def __init__(self, console: Console, metric: Metric = Metric.P99) -> None:
        self.console = console
        self.worst = RunningWorst(metric)
        self.progress = Progress(
            TextColumn("pairs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[worst]}"),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("pairs", total=None, worst="")

    def __enter__(self) -> ProgressObserver:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def started(self, total_pairs: int, rounds: int) -> None:
        self.progress.update(self.task, total=total_pairs)

    def pair_finished(self, path: PathResult) -> None:
        self.progress.update(
            self.task, advance=1, worst=progress_text(self.worst.add(path), self.worst.metric)
        )


def progress_text(worst: PathResult, metric: Metric) -> str:
    """'worst: a -> b unsafe (p50 812.3 us)', naming the metric the policy judges."""
    value = f"{metric.value} {format_us(worst.rtt.value(metric))} us" if worst.rtt else "failed"
    return f"worst: {worst.src} -> {worst.dst} {worst.verdict.value} ({value})"
