"""What a run says while it runs: its phases, how far each is, and when it should end.

The coordinator and the phase runner report to a ``RunObserver`` (no terminal here); the
renderers (``render/progress.py``: a live bar, or plain lines for logs) show a
``PhaseState``, which measures the phase's own rate to give its ETA.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from netqual.model.path import PathResult


class Stage(str, enum.Enum):
    PREFLIGHT = "pre-flight"
    PINGPONG = "ping-pong"
    BULK = "bulk"
    PROBE = "probe"  # ping-pong and bulk per pair or per round (unaligned, per-round)
    INTERFERENCE = "interference"
    FANIN = "fan-in"  # run --fanin: the sweep after the pairs (docs/fanin.md)
    ENGINE = "engine"  # run --engine: each path's fetch engine cells (docs/engines.md)
    MULTIRAIL = "multirail"  # run --multirail: node pairs over 1..R rails at once (rails.md)


# (what a step is, what an item is) per stage; a stage without steps has None
UNITS: dict[Stage, tuple[str | None, str]] = {
    Stage.PREFLIGHT: (None, "agents"),
    Stage.PINGPONG: ("round", "pairs"),
    Stage.BULK: ("wave", "pairs"),
    Stage.PROBE: ("round", "pairs"),
    Stage.INTERFERENCE: (None, "paths re-measured alone"),
    Stage.FANIN: (None, "levels"),
    Stage.ENGINE: (None, "paths"),
    Stage.MULTIRAIL: (None, "node pairs"),
}


class RunObserver(Protocol):
    """Progress callbacks, all from the coordinating thread."""

    def phase(self, stage: Stage, steps: int, items: int, done_before: int = 0) -> None:
        """A phase starts: ``steps`` rounds or waves, ``items`` pairs (agents, sampled
        paths), ``done_before`` of them already finished by the run this one resumes."""

    def step(self) -> None:
        """A round or wave of the current phase finished."""

    def item(self, path: PathResult | None = None) -> None:
        """One pair (agent, sampled path) of the current phase finished."""

    def end(self, stopped: bool = False) -> None:
        """The measuring is over (``stopped``: by an interrupt); what follows writes the
        run's files, and a command may go on to other work (the demo removes its fabric)."""


class NullObserver:
    def phase(self, stage: Stage, steps: int, items: int, done_before: int = 0) -> None:
        pass

    def step(self) -> None:
        pass

    def item(self, path: PathResult | None = None) -> None:
        pass

    def end(self, stopped: bool = False) -> None:
        pass


def clock_text(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class PhaseState:
    """One phase's counters; the ETA comes from this phase's measured rate only (a resumed
    run's earlier pairs took no time here)."""

    stage: Stage
    steps: int
    items: int
    done_before: int = 0
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)
    steps_done: int = 0
    items_done: int = 0

    def __post_init__(self) -> None:
        self.started = self.clock()
        self.items_done = self.done_before

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def eta_s(self) -> float | None:
        measured = self.items_done - self.done_before
        if measured <= 0:
            return None
        rate = measured / max(self.elapsed_s(), 1e-9)
        return max(0, self.items - self.items_done) / rate

    def counts(self) -> str:
        """'round 3/7, pairs 10/28' (the round in progress, never past the last)."""
        step_unit, item_unit = UNITS[self.stage]
        parts = []
        if step_unit is not None and self.steps:
            parts.append(f"{step_unit} {min(self.steps_done + 1, self.steps)}/{self.steps}")
        parts.append(f"{item_unit} {self.items_done}/{self.items}")
        return ", ".join(parts)

    def end_line(self, word: str = "done") -> str:
        """'ping-pong done: pairs 28/28 in 0:00:12', when the phase ends (logs)."""
        _, item_unit = UNITS[self.stage]
        return (
            f"{self.stage.value} {word}: {item_unit} {self.items_done}/{self.items} in "
            f"{clock_text(self.elapsed_s())}"
        )

    def line(self) -> str:
        """The whole state in one line, for logs."""
        eta = self.eta_s()
        when = f"ETA {clock_text(eta)}" if eta is not None else "ETA unknown until one finishes"
        return (
            f"{self.stage.value}: {self.counts()}, {clock_text(self.elapsed_s())} elapsed, {when}"
        )
