"""Live progress for ``run``, ``retest`` and ``demo``: the phase (a stage of the run's step
table: pre-flight, ping-pong rounds, bulk waves, probe rounds, engine cells, fan-in
levels, multirail node pairs, interference sample), its counts, elapsed time, an ETA from
the phase's measured rate, and the worst path so far.

``--progress``: ``rich`` a live bar on a terminal; ``plain`` one line when a phase starts,
one when it ends, and at most one per 30 s in between (logs: Slurm .out files, pipes, pod
logs); ``none``;
``auto`` (default) is rich on a terminal, else plain.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from netqual.base.errors import UsageError
from netqual.base.units import format_us
from netqual.model.path import PathResult, path_label
from netqual.model.progress import NullObserver, PhaseState, RunObserver, Stage, clock_text
from netqual.model.stats import Metric
from netqual.results import RunningWorst

MODES = ("auto", "rich", "plain", "none")
PLAIN_EVERY_S = 30.0


class _Shown:
    """What both displays track: the current phase and the running worst path."""

    def __init__(self, metric: Metric, clock: Callable[[], float]) -> None:
        self.worst = RunningWorst(metric)
        self.worst_text = ""
        self.clock = clock
        self.state: PhaseState | None = None
        self.lock = threading.Lock()

    def start(self, stage: Stage, steps: int, items: int, done_before: int) -> bool:
        """Start a phase; False when it continues the current one (the coordinator's own
        agent check after the command's pre-flight check)."""
        same = self.state is not None and self.state.stage is stage
        self.state = PhaseState(stage, steps, items, done_before, self.clock)
        return not same

    def count(self, path: PathResult | None) -> None:
        assert self.state is not None
        self.state.items_done += 1
        if path is not None:
            self.worst_text = progress_text(self.worst.add(path), self.worst.metric)


class ProgressObserver:
    """A live bar (rich), cleared when the run ends."""

    def __init__(self, console: Console, metric: Metric) -> None:
        self.shown = _Shown(metric, time.monotonic)
        self.progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TextColumn("{task.fields[counts]}", markup=False),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}", markup=False),
            TextColumn("{task.fields[worst]}", markup=False),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("starting", total=None, counts="", eta="", worst="")

    def __enter__(self) -> ProgressObserver:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _show(self, reset: bool = False) -> None:
        state = self.shown.state
        assert state is not None
        eta = state.eta_s()
        if reset:  # the elapsed time is the phase's own
            self.progress.reset(self.task, total=state.items or None, completed=state.items_done)
        self.progress.update(
            self.task,
            description=state.stage.value,
            total=state.items or None,
            completed=state.items_done,
            counts=state.counts(),
            eta=f"ETA {clock_text(eta)}" if eta is not None else "",
            worst=self.shown.worst_text,
        )

    def phase(self, stage: Stage, steps: int, items: int, done_before: int = 0) -> None:
        new = self.shown.start(stage, steps, items, done_before)
        self._show(reset=new)

    def step(self) -> None:
        assert self.shown.state is not None
        self.shown.state.steps_done += 1
        self._show()

    def item(self, path: PathResult | None = None) -> None:
        self.shown.count(path)
        self._show()

    def end(self, stopped: bool = False) -> None:
        """Nothing to say: the bar is transient, gone when the command's block ends."""


class PlainObserver:
    """Lines for logs: one when a phase starts, then at most one per ``every_s`` (a timer
    prints one when nothing finished for that long, so a log never looks hung)."""

    def __init__(
        self,
        console: Console,
        metric: Metric,
        every_s: float = PLAIN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        ticker: bool = True,
    ) -> None:
        self.console = console
        self.shown = _Shown(metric, clock)
        self.every_s = every_s
        self.last = clock()
        self.stop = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True) if ticker else None

    def __enter__(self) -> PlainObserver:
        if self.ticker is not None:
            self.ticker.start()
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.stop.set()
        with self.shown.lock:
            self._end("done" if kind is None else "stopped")

    def _end(self, word: str) -> None:
        """The line a phase ends with: how much it did, and in how long."""
        if self.shown.state is not None:
            self.console.print(Text(self.shown.state.end_line(word)), soft_wrap=True)

    def _print(self) -> None:
        assert self.shown.state is not None
        line = self.shown.state.line()
        if self.shown.worst_text and self.shown.state.stage is not Stage.PREFLIGHT:
            line += f"; {self.shown.worst_text}"
        self.console.print(Text(line), soft_wrap=True, highlight=False)
        self.last = self.shown.clock()

    def _maybe_print(self) -> None:
        if self.shown.clock() - self.last >= self.every_s:
            self._print()

    def _tick(self) -> None:
        while not self.stop.wait(min(5.0, self.every_s)):
            with self.shown.lock:
                if self.shown.state is not None:
                    self._maybe_print()

    def phase(self, stage: Stage, steps: int, items: int, done_before: int = 0) -> None:
        with self.shown.lock:
            if self.shown.state is not None and self.shown.state.stage is not stage:
                self._end("done")
            if self.shown.start(stage, steps, items, done_before):
                self._print()

    def step(self) -> None:
        with self.shown.lock:
            assert self.shown.state is not None
            self.shown.state.steps_done += 1
            self._maybe_print()

    def item(self, path: PathResult | None = None) -> None:
        with self.shown.lock:
            self.shown.count(path)
            self._maybe_print()

    def end(self, stopped: bool = False) -> None:
        """The last phase's end line when its measuring ends: its time is its own, not the
        writing of the files or what the command does next."""
        with self.shown.lock:
            self._end("stopped" if stopped else "done")
            self.shown.state = None


class _Quiet(NullObserver):
    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@contextlib.contextmanager
def observer(console: Console, mode: str, metric: Metric) -> Iterator[RunObserver]:
    """The display ``--progress`` asks for, shown while the block runs."""
    if mode not in MODES:
        allowed = f"{', '.join(MODES[:-1])} or {MODES[-1]}"
        raise UsageError("--progress", f"unknown mode {mode!r} ({allowed})")
    if mode == "auto":
        mode = "rich" if console.is_terminal and not console.is_dumb_terminal else "plain"
    shown: ProgressObserver | PlainObserver | _Quiet
    if mode == "rich":
        shown = ProgressObserver(console, metric)
    elif mode == "plain":
        shown = PlainObserver(console, metric)
    else:
        shown = _Quiet()
    with shown:
        yield shown


def progress_text(worst: PathResult, metric: Metric) -> str:
    """'worst: a -> b unsafe (p50 812.3 us)', naming the metric the policy judges."""
    value = f"{metric.value} {format_us(worst.rtt.value(metric))} us" if worst.rtt else "failed"
    return f"worst: {path_label(worst.src, worst.dst)} {worst.verdict.value} ({value})"
