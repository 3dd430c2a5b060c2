"""A command's run directory from the first write to the Results (``netqual run``,
``netqual retest``): --resume's checks and run.json with results.jsonl before any agent is
asked (``begin``), so a run killed at any moment from there on can be resumed; then the
run (``measure``), which leaves nothing behind when it stopped before measuring anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from netqual.base.errors import NoAgentsError, UsageError
from netqual.model.progress import RunObserver
from netqual.run import coordinator
from netqual.run import resume as resume_mod
from netqual.run.config import RunConfig, run_identity
from netqual.run.preflight import PreflightFailed
from netqual.run.session import PreflightCheck
from netqual.table.run import Results


@dataclass(frozen=True)
class RunStart:
    """A run directory ready to measure into: ``previous`` is what the run it resumes
    holds (None: a new run), ``created`` whether ``begin`` made the directory."""

    config: RunConfig
    out: Path
    previous: resume_mod.Resume | None
    created: bool


def begin(cfg: RunConfig, out: Path, resume: bool, force: bool) -> RunStart:
    """With ``resume``: ``out`` must hold this run (``force``: or another, keeping the
    pairs both plans have), its torn last line cut off. Then run.json and results.jsonl
    (new, or the resumed one) exist."""
    previous = resume_mod.prepare(out, run_identity(cfg), force) if resume else None
    created = not out.exists()
    resume_mod.begin(out, run_identity(cfg), previous, cfg.kind)
    return RunStart(cfg, out, previous, created)


def measure(start: RunStart, observer: RunObserver, check: PreflightCheck | None) -> Results:
    """The run's steps (``coordinator.run``). A new run that stops before measuring
    anything (its pre-flight check failed, a usage error found there, every agent failed:
    nothing to resume) removes what ``begin`` wrote, so the same --out works again once
    the configuration is fixed; an interrupt is no failure (the Results say where)."""
    try:
        return coordinator.run(start.config, start.out, observer, start.previous, check)
    except (PreflightFailed, UsageError, NoAgentsError):
        if start.previous is None:
            resume_mod.abandon(start.out, start.created)
        raise
