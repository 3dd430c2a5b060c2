"""The run's step table (``run/coordinator.STEPS``) drives the run: which steps a run has
and their order, that an interrupt is recorded as the stage of the step it landed in
(never the phase progress last heard of), that only finalise runs after it, and that
each step's seconds are kept by its stage. Steps are replaced by recorders here; the
session, its directory and finalise are real (no agent is asked)."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from paths import REPO
from rich.console import Console

from netqual.model.engine import EngineName, EnginePlan
from netqual.model.fanin import FaninConfig
from netqual.model.node import Nic, Node, Role
from netqual.model.plan import ProbePlan
from netqual.model.preflight import PreflightReport
from netqual.model.progress import UNITS, NullObserver, Stage
from netqual.model.stats import Metric
from netqual.planning.phases import ScheduleConfig, Timing
from netqual.render.progress import PlainObserver
from netqual.run.config import RunConfig
from netqual.run.coordinator import STEPS, Step, steps_of, walk
from netqual.run.session import RunSession, open_session

NODES = (Node("a", "127.0.0.1", port=1), Node("b", "127.0.0.1", port=2))
BASE = RunConfig(nodes=NODES, plan=ProbePlan(iterations=10, warmup=1))
EVERYTHING = dataclasses.replace(
    BASE,
    engine=EnginePlan(EngineName.MOONCAKE, 65536, (1,)),
    fanin=FaninConfig(levels=(1,)),
    multirail=1,
)
PER_ROUND = dataclasses.replace(EVERYTHING, schedule=ScheduleConfig(schedule=Timing.PER_ROUND))


def names(cfg: RunConfig) -> list[str]:
    return [s.name for s in steps_of(cfg)]


def test_a_run_has_the_steps_its_options_ask_for_in_table_order() -> None:
    assert names(BASE) == ["pre-flight", "ping-pong", "bulk", "interference", "finalise"]
    no_bulk = dataclasses.replace(BASE, plan=ProbePlan(bulk=False), interference_minimum=0)
    assert names(no_bulk) == ["pre-flight", "ping-pong", "finalise"]
    for timing in (Timing.PER_ROUND, Timing.UNALIGNED):
        cfg = dataclasses.replace(BASE, schedule=ScheduleConfig(schedule=timing))
        assert names(cfg) == ["pre-flight", "probe", "interference", "finalise"]
    assert names(EVERYTHING) == [
        "pre-flight", "ping-pong", "bulk", "engine", "fan-in", "multirail", "interference",
        "finalise",
    ]  # fmt: skip


def test_every_stage_has_one_step_and_progress_shows_each() -> None:
    stages = [s.stage for s in STEPS if s.stage is not None]
    assert sorted(stages) == sorted(Stage) and len(stages) == len(set(stages))
    assert STEPS[-1].stage is None and STEPS[-1].name == "finalise"
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False)
    with PlainObserver(console, Metric.P99, ticker=False) as shown:
        for stage in stages:
            shown.phase(stage, 2, 3)
            shown.item()
    lines = out.getvalue().splitlines()
    for stage in stages:
        unit = UNITS[stage][1]
        assert any(line.startswith(f"{stage.value}: ") and unit in line for line in lines), stage
        assert f"{stage.value} done: {unit} 1/3" in out.getvalue()


Calls = list[str]


def recorded(calls: Calls, stop_in: str | None = None) -> tuple[Step, ...]:
    """STEPS with each function replaced by one that notes its name (and raises
    KeyboardInterrupt in ``stop_in``); finalise stays real."""

    def fake(name: str) -> Callable[[RunSession], None]:
        def step(s: RunSession) -> None:
            calls.append(name)
            if name == stop_in:
                raise KeyboardInterrupt

        return step

    return tuple(
        step if step.stage is None else dataclasses.replace(step, run=fake(step.name))
        for step in STEPS
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def walked(cfg: RunConfig, out: Path, table: tuple[Step, ...]) -> RunSession:
    with open_session(cfg, out) as opened:
        s = dataclasses.replace(opened, clock=Clock())
        walk(s, table)
    return s


def test_the_table_drives_the_order_and_each_step_is_timed_by_its_stage(tmp_path: Path) -> None:
    for cfg in (EVERYTHING, PER_ROUND):
        calls: Calls = []
        s = walked(cfg, tmp_path / cfg.schedule.schedule.value, recorded(calls))
        assert calls == names(cfg)[:-1]
        assert s.state.stopped is None and s.state.finished is not None
        assert s.state.finished.run.complete
        # the fake clock moves 1 s a reading: each step took 1 s, kept by its stage
        assert s.spent.seconds == {step.stage: 1.0 for step in steps_of(cfg) if step.stage}
        actual = s.state.finished.run.schedule["actual"]
        assert isinstance(actual, dict)
        for key in ("preflight_s", "interference_s", "fanin_s", "engine_s", "multirail_s"):
            assert actual[key] == 1.0, key


def test_every_phase_a_run_takes_is_estimated_and_recorded_beside_what_it_took(
    tmp_path: Path,
) -> None:
    """run.json phases: an estimate and the actual seconds of every phase, the steps after
    the pairs included (engine, the fan-in's levels through it, multirail): none left out,
    none priced at zero; and the record a later --calibrate-from takes their items from."""
    nics = (Nic("r0", "127.0.1.1", 0), Nic("r1", "127.0.2.1", 1))
    nodes = (
        Node("st", "127.0.0.1", port=1, role=Role.STORAGE, nics=nics),
        Node("c1", "127.0.0.1", port=2, role=Role.COMPUTE, nics=nics),
    )
    cfg = dataclasses.replace(EVERYTHING, nodes=nodes)
    s = walked(cfg, tmp_path, recorded([]))
    phases = json.loads((tmp_path / "run.json").read_text())["phases"]
    assert list(phases) == [
        "preflight", "pingpong", "bulk", "engine", "fanin", "fanin_engine", "multirail",
        "interference",
    ]  # fmt: skip
    for name, one in phases.items():
        assert one["estimate_s"] > 0 and one["actual_s"] is not None, name
    # the fan-in's engine levels are their own phase: the fake sweep spent none of its 1 s
    assert (phases["fanin"]["actual_s"], phases["fanin_engine"]["actual_s"]) == (1.0, 0.0)
    assert s.state.finished is not None
    calibration = s.state.finished.run.schedule["calibration"]
    assert isinstance(calibration, dict)
    recorded_items = calibration["items"]
    assert set(recorded_items) == {"engine", "fanin_engine", "multirail"}
    assert recorded_items["engine"]["engine"] == "mooncake"
    assert recorded_items["engine"]["units"] == 1.0  # one path


MEASURING = [s.name for s in steps_of(EVERYTHING) if s.stage is not None] + ["probe"]


@pytest.mark.parametrize("where", MEASURING)
def test_an_interrupt_is_recorded_as_the_step_it_landed_in_and_only_finalise_follows(
    where: str, tmp_path: Path
) -> None:
    cfg = PER_ROUND if where == "probe" else EVERYTHING
    calls: Calls = []
    s = walked(cfg, tmp_path, recorded(calls, stop_in=where))
    order = names(cfg)
    assert calls == order[: order.index(where) + 1]
    stage = next(step.stage for step in STEPS if step.name == where)
    assert stage is not None and s.state.stopped is stage
    results = s.state.finished
    assert results is not None and not results.run.complete
    assert results.run.schedule["interrupted_during"] == stage.value
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["run"]["schedule"]["interrupted_during"] == stage.value


def test_an_interrupt_while_finalising_is_not_swallowed(tmp_path: Path) -> None:
    def stop(s: RunSession) -> None:
        raise KeyboardInterrupt

    table = tuple(dataclasses.replace(step, run=stop) for step in STEPS if step.stage is None)
    with pytest.raises(KeyboardInterrupt):
        walked(BASE, tmp_path, table)


def test_an_interrupt_in_the_commands_pre_flight_check_finalises_an_empty_run(
    tmp_path: Path,
) -> None:
    """The real table: netqual run's check (``RunSession.check``) is the pre-flight step's,
    so Ctrl-C there is recorded as pre-flight and results.json says so (it was a separate
    code path in the command, which built the run's files a second way)."""

    def check(cfg: RunConfig) -> PreflightReport:
        raise KeyboardInterrupt

    with open_session(BASE, tmp_path, check=check) as s:
        walk(s)
    assert s.state.stopped is Stage.PREFLIGHT and s.state.finished is not None
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["run"]["complete"] is False and doc["paths"] == []
    assert doc["run"]["schedule"]["interrupted_during"] == "pre-flight"
    assert (tmp_path / "results.jsonl").read_text() == ""
    assert json.loads((tmp_path / "run.json").read_text())["started_at"] == doc["run"]["started_at"]


def test_architecture_md_shows_the_step_table_as_it_is() -> None:
    """docs/architecture.md's "A run, step by step" table, row by row from ``STEPS``."""

    def row(step: Step) -> str:
        stage = f"`{step.stage.value}`" if step.stage is not None else "none"
        module = step.run.__module__.removeprefix("netqual.").replace(".", "/")
        function = getattr(step.run, "__name__", "")
        return (
            f"| {step.name} | {stage} | {step.when} | `{module}.py` `{function}` | "
            f"{step.needs} | {step.records} | {step.resumed} |"
        )

    doc = (REPO / "docs" / "architecture.md").read_text()
    section = doc[doc.index("### A run, step by step") :]
    header = "| step | stage | when | function | needs | records | on `--resume` |\n|---|"
    table = section[section.index(header) :].split("\n\n")[0].splitlines()[2:]
    assert table == [row(step) for step in STEPS]


def test_only_the_pair_steps_hold_the_agents_sessions_open(tmp_path: Path) -> None:
    """A step that does not probe through the agents' open sessions runs with none idle:
    a storage agent's fan-in level counts the sessions it serves."""
    seen: list[tuple[str, int]] = []
    closes = 0

    def counting_close() -> None:
        nonlocal closes
        closes += 1

    def note(name: str) -> Callable[[RunSession], None]:
        return lambda s: seen.append((name, closes))

    table = tuple(dataclasses.replace(step, run=note(step.name)) for step in STEPS)
    with open_session(EVERYTHING, tmp_path) as s:
        s.agents.close = counting_close  # type: ignore[method-assign]
        walk(s, table)
    counts = [0, *(c for _, c in seen)]
    closed = [name for (name, c), prev in zip(seen, counts, strict=False) if c > prev]
    assert closed == ["pre-flight", "engine", "fan-in", "multirail", "interference", "finalise"]


class Ends(NullObserver):
    """Notes when the measuring ended: the files results.json is written after it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.ends: list[tuple[bool, bool]] = []  # (stopped, results.json there yet)

    def end(self, stopped: bool = False) -> None:
        self.ends.append((stopped, (self.out / "results.json").exists()))


@pytest.mark.parametrize("stop_in", [None, "bulk"])
def test_the_observer_hears_the_measuring_end_once_before_finalise(
    stop_in: str | None, tmp_path: Path
) -> None:
    """The demo removes its fabric after the run: the last phase's 'done' line must come
    when its measuring ends (it came after 'demo: fabric removed', timed to the exit)."""
    seen = Ends(tmp_path)
    with open_session(EVERYTHING, tmp_path, seen) as s:
        walk(s, recorded([], stop_in=stop_in))
    assert seen.ends == [(stop_in is not None, False)]
    assert (tmp_path / "results.json").exists()


def test_the_plain_lines_end_the_last_phase_when_the_measuring_ends() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False)
    with PlainObserver(console, Metric.P99, ticker=False) as shown:
        shown.phase(Stage.INTERFERENCE, 0, 2)
        shown.item()
        shown.end()
        console.print("demo: fabric removed")
    lines = out.getvalue().splitlines()
    assert lines[-2].startswith("interference done: paths re-measured alone 1/2 in ")
    assert lines[-1] == "demo: fabric removed"  # and no second end line at the block's exit
