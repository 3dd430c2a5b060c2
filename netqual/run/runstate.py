"""What a run holds while it runs: its results.jsonl journal and what each step took."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from netqual.base import interrupts
from netqual.model.engine import EngineCell
from netqual.model.path import NotMeasured, PathResult
from netqual.model.progress import Stage
from netqual.results import journal
from netqual.run.phaserun import Tally
from netqual.table.paths import PathTable
from netqual.table.store import KeyedPaths, PathChunks


@dataclass
class RunJournal:
    """The run's results.jsonl while it runs, and what it holds so far."""

    file: TextIO
    paths: PathChunks  # finished pairs, in the order they finished (as columns)
    pending: KeyedPaths  # ping-pong done, bulk phase not yet
    # configuration failures: not measurements, never journalled (--resume tries again)
    skipped: list[NotMeasured] = field(default_factory=list)
    # --engine: each finished pair's engine cells (the journal's and this run's), and the
    # pairs whose engine was refused for a configuration reason (not journalled: redone)
    engine: dict[tuple[str, str], tuple[EngineCell, ...]] = field(default_factory=dict)
    engine_refused: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def of(cls, prior: journal.Journal, names: Sequence[str], file: TextIO) -> RunJournal:
        """``names``: the run's nodes, the tables' node codes."""
        return cls(
            file, PathChunks(names, [prior.done.table()]), prior.pending.copy(),
            engine=dict(prior.engine),
        )  # fmt: skip

    def finished(self, path: PathResult | NotMeasured) -> None:
        if isinstance(path, NotMeasured):  # not journalled: --resume tries it again
            self.pending.pop(path.key, None)
            self.skipped.append(path)
            return
        with interrupts.atomic():
            journal.append_path(self.file, path)
            self.pending.pop(path.key, None)
            self.paths.append(path)

    def engine_cells(self, key: tuple[str, str], cells: tuple[EngineCell, ...]) -> None:
        with interrupts.atomic():
            journal.append_engine(self.file, key, cells)
            self.engine[key] = cells

    def measured(self, names: Sequence[str]) -> PathTable:
        """Every measured path as columns, with its engine cells; the pairs whose engine
        was refused (configuration) left out: they are ``not_measured`` instead."""
        table = journal.measured_paths(self.paths, self.pending, names, self.engine)
        if not self.engine_refused:
            return table
        keep = [i for i, k in enumerate(table.keys()) if k not in self.engine_refused]
        return table.take(keep)

    def not_measured(self) -> tuple[NotMeasured, ...]:
        refused = (
            NotMeasured(src, dst, why, "configuration")
            for (src, dst), why in self.engine_refused.items()
        )
        return (*self.skipped, *refused)

    def pingpong(self, path: PathResult) -> None:
        with interrupts.atomic():
            journal.append_pingpong(self.file, path)
            self.pending[path.key] = path


FANIN_ENGINE = "fanin_engine"  # the fan-in's levels through the engine: part of its stage


@dataclass
class Spent:
    """What each step took, as steps end: seconds by the step's stage, and the pair steps'
    tally (``run.schedule.actual``; the tally splits ping-pong from bulk seconds as probes
    run, which a per-round schedule interleaves within one step)."""

    tally: Tally = field(default_factory=Tally)
    seconds: dict[Stage, float] = field(default_factory=dict)
    # a part of a stage that is a phase of its own (``FANIN_ENGINE``), also in its stage's
    parts: dict[str, float] = field(default_factory=dict)

    def add(self, stage: Stage, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def add_part(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + seconds

    def of(self, stage: Stage) -> float:
        return self.seconds.get(stage, 0.0)
