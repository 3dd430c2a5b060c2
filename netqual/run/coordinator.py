"""``netqual run``: the run's steps, in order, over one session (``RunSession``).

``STEPS`` is the run, step by step: each entry names its function, the stage it reports
to progress (and that an interrupt inside it is recorded as), when it applies, what it
needs and what it records. ``walk`` runs them in order; ``run`` opens the session, walks
it and returns the Results. A failing path is data (an ``unsafe`` PathResult naming the
node and the failure); only a run where no agent answers at all is an error. Each finished
pair is appended to ``results.jsonl`` at once, so a crash loses nothing already measured.
Rendering the Results (terminal, report.html) is the caller's job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from netqual.base.errors import NoAgentsError
from netqual.model.progress import NullObserver, RunObserver, Stage
from netqual.model.verdict import Verdict
from netqual.run import afterpairs, agentcheck, pairloop
from netqual.run import resume as resume_mod
from netqual.run.config import RunConfig
from netqual.run.finalise import finalise
from netqual.run.phaserun import pair_stages
from netqual.run.session import PreflightCheck, RunSession, open_session
from netqual.table.run import Results


@dataclass(frozen=True)
class Step:
    """One step of a run. ``stage``: what it reports to progress, and what an interrupt
    inside it is recorded as (``run.schedule.interrupted_during``); None for finalise,
    which runs whatever happened before it. ``applies``: whether a run has the step
    (``when`` says it in words). ``sessions``: it probes through the agents' open sessions
    (the others run with none held open: a storage agent's fan-in level counts its
    sessions). ``needs``, ``records`` and ``resumed``: what it reads, what it writes, and
    what a resumed run keeps of it (docs/architecture.md shows the table)."""

    name: str
    stage: Stage | None
    run: Callable[[RunSession], object]
    applies: Callable[[RunConfig], bool]
    when: str
    needs: str
    records: str
    resumed: str
    sessions: bool = False


def _pairs(stage: Stage) -> Callable[[RunConfig], bool]:
    return lambda cfg: stage in pair_stages(cfg.schedule.schedule, cfg.plan.bulk)


def _always(cfg: RunConfig) -> bool:
    return True


STEPS: tuple[Step, ...] = (
    Step(
        "pre-flight", Stage.PREFLIGHT, agentcheck.check_at_start, _always, "always",
        needs="the nodes and the token; netqual run's pre-flight check (`RunSession.check`)",
        records="the agents the run may use; `run.agents`, host paths, agents still busy",
        resumed="asked again; waits for the probes a killed run left running",
    ),
    Step(
        "ping-pong", Stage.PINGPONG, pairloop.pingpong, _pairs(Stage.PINGPONG),
        "aligned schedule, or `--no-bulk`",
        needs="the agents the run may use; the pairs the journal does not hold",
        records="each ping-pong in results.jsonl (`--no-bulk`: each whole pair)",
        resumed="pairs the journal holds are skipped", sessions=True,
    ),
    Step(
        "bulk", Stage.BULK, pairloop.bulk, _pairs(Stage.BULK), "aligned schedule with bulk",
        needs="the pairs whose ping-pong is done (the journal's and this run's)",
        records="each finished pair in results.jsonl",
        resumed="pairs with their ping-pong only get their bulk phase", sessions=True,
    ),
    Step(
        "probe", Stage.PROBE, pairloop.probe, _pairs(Stage.PROBE),
        "per-round or unaligned schedule with bulk",
        needs="the agents the run may use; the pairs the journal does not hold",
        records="each finished pair in results.jsonl (per-round: each ping-pong first)",
        resumed="finished pairs are skipped; pending ones get their bulk phase", sessions=True,
    ),
    Step(
        "engine", Stage.ENGINE, afterpairs.measure_engines, lambda c: c.engine is not None,
        "`--engine`",
        needs="each measured path and its bulk cells",
        records="each path's engine cells in results.jsonl; refusals in memory",
        resumed="paths with engine cells are skipped",
    ),
    Step(
        "fan-in", Stage.FANIN, afterpairs.sweep_fanin, lambda c: c.fanin is not None,
        "`--fanin`",
        needs="the storage and compute nodes",
        records="each level (with `--engine`, each through the engine too) in "
        "results.jsonl; the sweep in `RunResults.fanin`",
        resumed="levels the journal holds are kept (the engine's: for the same engine)",
    ),
    Step(
        "multirail", Stage.MULTIRAIL, afterpairs.measure_multirail, lambda c: c.multirail > 0,
        "`--multirail N`",
        needs="node pairs sharing two rails or more",
        records="each node pair's levels in `RunResults.multirail` (not journalled)",
        resumed="read again",
    ),
    Step(
        "interference", Stage.INTERFERENCE, afterpairs.check_interference,
        lambda c: c.interference_minimum > 0, "`--interference-sample` above 0",
        needs="the measured paths",
        records="the sample and each alone measurement in results.jsonl; "
        "`RunResults.interference`",
        resumed="the sample and the paths it re-measured are kept",
    ),
    Step(
        "finalise", None, finalise, _always, "always, after an interrupt too",
        needs="what the steps before it recorded, as far as they got",
        records="results.json (incomplete: where it was interrupted); run.json's phases",
        resumed="written again",
    ),
)  # fmt: skip


def steps_of(cfg: RunConfig, table: Sequence[Step] = STEPS) -> tuple[Step, ...]:
    """The steps this run has, in order."""
    return tuple(step for step in table if step.applies(cfg))


def walk(s: RunSession, table: Sequence[Step] = STEPS) -> None:
    """Run the steps ``s`` has, in order, each timed into ``s.spent`` by its stage. A
    KeyboardInterrupt (Ctrl-C, or SIGTERM turned into one by the command) in a step with a
    stage ends the measuring: ``s.state.stopped`` is that step's stage, and only the steps
    without one (finalise) still run; the observer hears the measuring end before them."""
    measuring = True
    for step in steps_of(s.config, table):
        if s.state.stopped is not None and step.stage is not None:
            continue
        if measuring and step.stage is None:
            measuring = False
            s.observer.end(stopped=s.state.stopped is not None)
        if not step.sessions:
            s.agents.close()  # idle sessions end; a later probing step opens new ones
        started = s.clock()
        try:
            step.run(s)
        except KeyboardInterrupt:
            if step.stage is None:
                raise
            s.state.stopped = step.stage
        finally:
            if step.stage is not None:
                s.spent.add(step.stage, s.clock() - started)


def run(
    cfg: RunConfig,
    out_dir: Path,
    observer: RunObserver | None = None,
    resume: resume_mod.Resume | None = None,
    check: PreflightCheck | None = None,
) -> Results:
    """Measure every planned pair; with ``resume``, only what it has not finished.

    An interrupt in any step ends the run as incomplete: results.json holds every path
    measured so far. ``check``: the command's pre-flight check (``netqual run``); no agent
    is asked again, and one lost after it is reported by its probes, per path. Without it
    (retest, demo), the agents are asked at the start. Either way an agent that fails at
    the start is a configuration problem: its pairs are listed as not measured
    (configuration), never unsafe paths (``agentcheck.at_start``)."""
    if len(cfg.nodes) < 2:
        raise NoAgentsError("the inventory needs at least two nodes")
    with open_session(cfg, out_dir, observer, resume, check) as s:
        walk(s)
    assert s.state.finished is not None  # finalise always runs, or raised
    return s.state.finished


__all__ = ["STEPS", "NullObserver", "RunConfig", "RunObserver", "Stage", "Step", "Verdict", "run"]
