"""What a run holds while it runs: its results.jsonl journal and what each phase took."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from netqual.base import interrupts
from netqual.model.engine import EngineCell
from netqual.model.fanin import FaninResult
from netqual.model.hostpath import HostAudit
from netqual.model.multirail import MultiRail
from netqual.model.path import NotMeasured, PathResult
from netqual.results import journal
from netqual.run.phaserun import Tally
from netqual.table.paths import PathTable
from netqual.table.store import KeyedPaths, PathChunks


@dataclass
class RunJournal:
    """The run's results.jsonl while it runs, and what it holds so far."""

    file: TextIO | None
    paths: PathChunks  # finished pairs, in the order they finished (as columns)
    pending: KeyedPaths  # ping-pong done, bulk phase not yet
    # configuration failures: not measurements, never journalled (--resume tries again)
    skipped: list[NotMeasured] = field(default_factory=list)
    # --engine: each finished pair's engine cells (the journal's and this run's), and the
    # pairs whose engine was refused for a configuration reason (not journalled: redone)
    engine: dict[tuple[str, str], tuple[EngineCell, ...]] = field(default_factory=dict)
    engine_refused: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, prior: journal.Journal, names: Sequence[str], file: TextIO | None = None
    ) -> RunJournal:
        """``names``: the run's nodes, the tables' node codes."""
        return cls(
            file, PathChunks(names, [prior.done.table()]), prior.pending.copy(),
            engine=dict(prior.engine),
        )  # fmt: skip

    def finished(self, path: PathResult | NotMeasured) -> None:
        assert self.file is not None
        if isinstance(path, NotMeasured):  # not journalled: --resume tries it again
            self.pending.pop(path.key, None)
            self.skipped.append(path)
            return
        with interrupts.atomic():
            journal.append_path(self.file, path)
            self.pending.pop(path.key, None)
            self.paths.append(path)

    def engine_cells(self, key: tuple[str, str], cells: tuple[EngineCell, ...]) -> None:
        assert self.file is not None
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
        assert self.file is not None
        with interrupts.atomic():
            journal.append_pingpong(self.file, path)
            self.pending[path.key] = path


@dataclass
class Spent:
    """What the phases took (``run.schedule.actual``), kept as they end."""

    preflight_s: float = 0.0
    tally: Tally = field(default_factory=Tally)
    interference_s: float = 0.0
    busy: dict[str, int] = field(default_factory=dict)  # --resume: probes agents still ran
    fanin: tuple[FaninResult, ...] = ()
    fanin_s: float = 0.0
    agents: dict[str, dict[str, object]] = field(default_factory=dict)  # run.agents
    hosts: dict[str, HostAudit] = field(default_factory=dict)  # each agent's host path audit
    multirail: tuple[MultiRail, ...] = ()  # run --multirail (docs/rails.md)
    multirail_s: float = 0.0
    engine_s: float = 0.0  # run --engine: the engine cells of every path
    resumed: bool = False  # --resume: the phase times cover part of the run's pairs
