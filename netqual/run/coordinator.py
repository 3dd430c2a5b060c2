"""``netqual run``: schedule the pairs, ask agents to probe, judge, write the results files.

A failing path is data (an ``unsafe`` PathResult naming the node and the failure); only a
run where no agent answers at all is an error. Each finished pair is appended to
``results.jsonl`` at once, so a crash loses nothing already measured. The run returns its
Results; rendering them (terminal, report.html) is the caller's job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from netqual.base.errors import NoAgentsError
from netqual.files.outfiles import make_out_dir, open_append
from netqual.model.path import PathResult
from netqual.model.preflight import PreflightReport
from netqual.model.progress import NullObserver, RunObserver, Stage
from netqual.model.run import Interference
from netqual.model.verdict import Verdict
from netqual.planning import phases
from netqual.results import journal
from netqual.run import resume as resume_mod
from netqual.run.afterpairs import (
    check_interference,
    measure_engines,
    measure_multirail,
    sweep_fanin,
)
from netqual.run.config import RunConfig, pair_schedule, run_identity
from netqual.run.finalise import finalise, fleet_of
from netqual.run.pairloop import measure_pairs
from netqual.run.pairprobe import now_iso
from netqual.run.runstate import RunJournal, Spent
from netqual.table.run import Results


@dataclass
class _Stages:
    """Forwards progress and remembers the phase, so an interrupt can name it."""

    observer: RunObserver
    stage: Stage = Stage.PREFLIGHT

    def phase(self, stage: Stage, steps: int, items: int, done_before: int = 0) -> None:
        self.stage = stage
        self.observer.phase(stage, steps, items, done_before)

    def step(self) -> None:
        self.observer.step()

    def item(self, path: PathResult | None = None) -> None:
        self.observer.item(path)


def run(
    cfg: RunConfig,
    out_dir: Path,
    observer: RunObserver | None = None,
    resume: resume_mod.Resume | None = None,
    preflight: PreflightReport | None = None,
) -> Results:
    """Measure every planned pair; with ``resume``, only what it has not finished.

    A KeyboardInterrupt (Ctrl-C, or SIGTERM turned into one by the command) in any phase
    ends the run as incomplete: results.json holds every path measured so far.
    ``preflight``: the pre-flight check the caller ran (``netqual run``, ``for_run``); no
    agent is asked again, and one lost after it is reported by its probes, per path.
    Without it (retest, demo), the agents are asked here. Either way an agent that fails at
    the start is a configuration problem: its pairs are listed as not measured
    (configuration), never unsafe paths (``agentcheck.at_start``)."""
    stages = _Stages(observer or NullObserver())
    if len(cfg.nodes) < 2:
        raise NoAgentsError("the inventory needs at least two nodes")
    prior = resume.journal if resume else journal.Journal()
    started = (resume.started_at if resume else "") or now_iso()
    pairing = pair_schedule(cfg)
    make_out_dir(out_dir)
    resume_mod.write_identity(out_dir, run_identity(cfg), started, cfg.kind)
    budget = phases.resolve(cfg.schedule, cfg.plan, cfg.endpoints, cfg.fabric)
    spent = Spent(preflight_s=cfg.preflight_s, resumed=resume is not None)
    spent.agents = preflight.agents() if preflight is not None else {}
    stopped: Stage | None = None
    inter: Interference | None = None
    with open_append(out_dir / resume_mod.JSONL, new=resume is None) as f:
        rec = RunJournal.of(prior, [n.name for n in cfg.endpoints], f)
        try:
            measure_pairs(
                cfg, pairing, budget, prior, rec, stages, spent, resume is not None, preflight
            )
            if cfg.engine is not None:
                engine_at = time.monotonic()
                try:
                    measure_engines(cfg, rec, stages)
                finally:
                    spent.engine_s = time.monotonic() - engine_at
            if cfg.fanin is not None:
                sweep_fanin(cfg, spent, prior, f, stages)
            if cfg.multirail > 0:
                multirail_at = time.monotonic()
                try:
                    spent.multirail = measure_multirail(cfg, stages)
                finally:
                    spent.multirail_s = time.monotonic() - multirail_at
            inter_at = time.monotonic()
            try:
                if cfg.interference_minimum > 0:
                    inter = check_interference(cfg, rec.paths.table(), prior, f, stages)
            finally:
                spent.interference_s = time.monotonic() - inter_at
        except KeyboardInterrupt:
            stopped = stages.stage
    fleet_found = fleet_of(cfg, preflight)
    return finalise(cfg, out_dir, pairing, started, budget, rec, inter, stopped, spent, fleet_found)


__all__ = ["NullObserver", "RunConfig", "RunObserver", "Stage", "Verdict", "run"]
