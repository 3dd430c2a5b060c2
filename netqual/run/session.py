"""One run while it runs (``RunSession``): what it measures, where it writes, the agents'
sessions, its progress observer and clock, and, in one place, everything its steps change.

``netqual.run.coordinator`` opens a session and walks its step table over it; each step
takes the session and reads what it needs from it (``RunSession.config``, the journal,
``RunState``) and records what it found in ``RunResults`` and ``Spent``; finalise turns
the session into results.json. Nothing a step needs travels as loose parameters.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from netqual.agent.wire.sessions import Sessions
from netqual.files.outfiles import make_out_dir, open_append
from netqual.files.rundir import RunDir
from netqual.model.fanin import FaninResult
from netqual.model.fleet import ConfigSnapshot
from netqual.model.hostpath import HostAudit
from netqual.model.multirail import MultiRail
from netqual.model.preflight import PreflightReport
from netqual.model.progress import NullObserver, RunObserver, Stage
from netqual.model.run import Interference
from netqual.planning import phases, schedule
from netqual.planning.budget import BulkBudget
from netqual.results.journal import Journal
from netqual.run import resume as resume_mod
from netqual.run.config import RunConfig, pair_schedule, run_identity
from netqual.run.pairprobe import now_iso
from netqual.run.phaserun import PairRun
from netqual.run.runstate import RunJournal, Spent
from netqual.table.run import Results

# The command's pre-flight check (``netqual run``: ``netqual check`` with its table on the
# terminal; it raises PreflightFailed to stop the run). None: the run asks its agents at
# the start itself, once (retest, demo).
PreflightCheck = Callable[[RunConfig], PreflightReport]


@dataclass
class RunState:
    """What the steps change while the run runs, besides the journal and the results:
    the step an interrupt stopped, the agents the run may use, the pair steps' shared
    state, and the Results finalise wrote."""

    stopped: Stage | None = None  # the step an interrupt stopped (its stage)
    preflight: PreflightReport | None = None  # the command's pre-flight check, as it ended
    down: dict[str, str] = field(default_factory=dict)  # node -> why its agent is unusable
    refused: dict[str, str] = field(default_factory=dict)  # node -> why its pairs are not measured
    silent: dict[str, str] = field(default_factory=dict)  # node that took a probe, never answered
    pairs: PairRun | None = None  # the pair steps' rounds, runner and pairs due for bulk
    finished: Results | None = None  # what finalise wrote


@dataclass
class RunResults:
    """What the steps found besides the paths (which the journal holds)."""

    agents: dict[str, dict[str, object]] = field(default_factory=dict)  # run.agents
    hosts: dict[str, HostAudit] = field(default_factory=dict)  # each agent's host path audit
    busy: dict[str, int] = field(default_factory=dict)  # --resume: probes agents still ran
    # a retest: the re-tested nodes' configuration snapshots, asked at its start
    snapshots: dict[str, ConfigSnapshot] = field(default_factory=dict)
    fanin: tuple[FaninResult, ...] = ()  # run --fanin (docs/fanin.md)
    multirail: tuple[MultiRail, ...] = ()  # run --multirail (docs/rails.md)
    interference: Interference | None = None  # the interference check


@dataclass(frozen=True)
class RunSession:
    """One run: ``config`` (what it measures, frozen), ``out`` and ``journal`` (its
    directory and results.jsonl), ``prior`` (what the run it resumes held; empty when new),
    ``agents`` (one open session per agent), ``observer`` (progress) and ``clock``; what
    changes lives in ``state``, ``results`` and ``spent``."""

    config: RunConfig
    out: Path
    journal: RunJournal
    prior: Journal
    resumed: bool
    started: str  # started_at: kept from the run it resumes
    pairing: schedule.Schedule
    budget: BulkBudget
    agents: Sessions
    observer: RunObserver = field(default_factory=NullObserver)
    check: PreflightCheck | None = None
    clock: Callable[[], float] = time.monotonic
    state: RunState = field(default_factory=RunState)
    results: RunResults = field(default_factory=RunResults)
    spent: Spent = field(default_factory=Spent)

    @property
    def names(self) -> list[str]:
        """The run's endpoints, the tables' node codes."""
        return [n.name for n in self.config.endpoints]


@contextlib.contextmanager
def open_session(
    cfg: RunConfig,
    out: Path,
    observer: RunObserver | None = None,
    resume: resume_mod.Resume | None = None,
    check: PreflightCheck | None = None,
) -> Iterator[RunSession]:
    """The run's directory with its identity (run.json) and its results.jsonl open (new,
    or appended to when ``resume``), and one session per agent, closed when the block
    ends."""
    prior = resume.journal if resume else Journal()
    started = (resume.started_at if resume else "") or now_iso()
    make_out_dir(out)
    resume_mod.write_identity(out, run_identity(cfg), started, cfg.kind)
    budget = phases.resolve(cfg.schedule, cfg.plan, cfg.endpoints, cfg.fabric)
    names = [n.name for n in cfg.endpoints]
    with open_append(RunDir(out).results_jsonl, new=resume is None) as f:
        agents = Sessions(cfg.token)
        try:
            yield RunSession(
                config=cfg,
                out=out,
                journal=RunJournal.of(prior, names, f),
                prior=prior,
                resumed=resume is not None,
                started=started,
                pairing=pair_schedule(cfg),
                budget=budget,
                agents=agents,
                observer=observer or NullObserver(),
                check=check,
            )
        finally:
            agents.close()
