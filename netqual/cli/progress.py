"""Live progress for ``run`` and ``demo``: pairs done/total, ETA, worst path so far."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from netqual.coordinator import worst_so_far
from netqual.models import PathResult
from netqual.units import format_us


class ProgressObserver:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.paths: list[PathResult] = []
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
        self.paths.append(path)
        worst = worst_so_far(self.paths)
        text = ""
        if worst is not None:
            value = f"p99 {format_us(worst.rtt.p99_us)} us" if worst.rtt else "failed"
            text = f"worst: {worst.src} -> {worst.dst} {worst.verdict.value} ({value})"
        self.progress.update(self.task, advance=1, worst=text)
