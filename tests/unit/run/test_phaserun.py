"""Running the phases (``netqual.run.phaserun``) with fake probes, no sockets: phase
order per schedule, each result recorded as it finishes, progress, and pairs that bulk
coverage leaves out."""

from __future__ import annotations

import threading
from dataclasses import replace

from netqual.model.node import Node
from netqual.model.path import NotMeasured, PathResult
from netqual.model.plan import ProbePlan
from netqual.model.progress import NullObserver, Stage
from netqual.model.verdict import Verdict
from netqual.planning.budget import BulkBudget
from netqual.planning.packing import Coverage
from netqual.planning.phases import Phase, ScheduleConfig, Timing, layout, resolve
from netqual.planning.schedule import circle_rounds, full_mesh
from netqual.run.phaserun import Measured, Totals, Work, execute, merged_details


def racked(n: int, racks: int) -> list[Node]:
    return [Node(f"h{i}", f"10.1.{i % racks}.{i}", rack=f"r{i % racks}") for i in range(n)]


class FakeProbes:
    """Records (phase, event, pair) in order; a pair's 'measurement' is instant."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        self.emitted: list[PathResult] = []
        self.pingponged: list[PathResult] = []
        self.kept: dict[tuple[str, str], PathResult] = {}  # as the run journal keeps them
        self.progress: list[tuple[str, ...]] = []  # what the observer was told, in order

    def phase(self, stage: Stage, steps: int, items: int, done_before: int = 0) -> None:
        self.progress.append(("phase", stage.value, str(steps), str(items), str(done_before)))

    def step(self) -> None:
        self.progress.append(("step",))

    def end(self, stopped: bool = False) -> None:
        pass

    def item(self, path: PathResult | None = None) -> None:
        self.progress.append(("item",))

    def measure(self, a: Node, b: Node, phase: Phase) -> PathResult:
        with self.lock:
            self.events.append((phase.value, "start", f"{a.name}-{b.name}"))
        path = PathResult(a.name, b.name, "tcp", Verdict.SAFE, ("fake",))
        with self.lock:
            self.events.append((phase.value, "end", f"{a.name}-{b.name}"))
        return path

    def pingpong(self, path: PathResult) -> None:
        self.pingponged.append(path)
        self.kept[path.key] = path

    def finished(self, path: Measured) -> None:
        assert isinstance(path, PathResult)  # these fakes measure every pair
        self.emitted.append(path)
        self.kept.pop(path.key, None)

    def combine(self, pp: PathResult, bk: Measured) -> Measured:
        assert pp.key == bk.key and isinstance(bk, PathResult)
        return replace(pp, reasons=("combined",), details=merged_details(pp, bk))


def _run(schedule: Timing, bulk: bool = True) -> FakeProbes:
    fake = FakeProbes()
    rounds = circle_rounds(racked(6, 2))
    cfg = ScheduleConfig(schedule)
    work = Work(
        fake.measure, fake.combine, fake.finished, fake.pingpong, fake, fake.kept.__getitem__
    )
    execute(
        rounds,
        Totals(len(rounds), 15),
        cfg,
        BulkBudget(1, 1, None, 100.0),
        bulk=bulk,
        parallel=None,
        work=work,
    )
    return fake


def test_aligned_runs_every_pingpong_before_any_bulk() -> None:
    fake = _run(Timing.ALIGNED)
    phases = [p for p, _, _ in fake.events]
    last_pp = max(i for i, p in enumerate(phases) if p == "pingpong")
    first_bulk = min(i for i, p in enumerate(phases) if p == "bulk")
    assert last_pp < first_bulk
    assert len(fake.emitted) == 15 and {p.reasons for p in fake.emitted} == {("combined",)}
    assert not fake.kept  # every ping-pong record was taken back when its pair finished
    for p in fake.emitted:
        windows = p.details["phase_windows_s"]
        assert isinstance(windows, dict) and set(windows) == {"pingpong", "bulk"}


def test_aligned_records_each_pingpong_and_reports_both_phases() -> None:
    fake = _run(Timing.ALIGNED)
    assert len(fake.pingponged) == 15  # each on record before any bulk read
    stages = [e for e in fake.progress if e[0] == "phase"]
    waves = sum(1 for e in fake.progress[fake.progress.index(stages[1]) :] if e == ("step",))
    assert stages[0] == ("phase", "ping-pong", "5", "15", "0")
    assert stages[1][:2] == ("phase", "bulk") and stages[1][2] == str(waves) and waves >= 1
    pingpong = fake.progress[: fake.progress.index(stages[1])]
    assert pingpong.count(("item",)) == 15 and pingpong.count(("step",)) == 5
    assert fake.progress.count(("item",)) == 30


def test_per_round_barrier_never_overlaps_pingpong_and_bulk() -> None:
    fake = _run(Timing.PER_ROUND)
    active: dict[str, int] = {"pingpong": 0, "bulk": 0}
    for phase, event, _ in fake.events:
        active[phase] += 1 if event == "start" else -1
        assert not (active["pingpong"] and active["bulk"]), fake.events
    phases = [p for p, e, _ in fake.events if e == "start"]
    assert phases.index("bulk") < len(phases) - phases[::-1].index("pingpong")  # interleaved
    assert len(fake.emitted) == 15


def test_unaligned_and_no_bulk_use_one_request_per_pair() -> None:
    assert {p for p, _, _ in _run(Timing.UNALIGNED).events} == {"probe"}
    assert {p for p, _, _ in _run(Timing.ALIGNED, bulk=False).events} == {"pingpong"}


def test_pairs_without_bulk_are_emitted_from_pingpong_and_say_why() -> None:
    nodes = racked(8, 2)
    measured: list[tuple[str, str]] = []

    def measure(a: Node, b: Node, phase: Phase) -> PathResult:
        measured.append((phase.value, f"{a.name}-{b.name}"))
        return PathResult(a.name, b.name, "tcp", Verdict.SAFE, ("fake",))

    def combine(pp: PathResult, bk: Measured) -> Measured:
        assert isinstance(bk, PathResult)
        return replace(pp, reasons=("combined",), details=merged_details(pp, bk))

    emitted: list[PathResult] = []

    def emit(p: Measured) -> None:
        assert isinstance(p, PathResult)
        emitted.append(kept.pop(p.key) and p)

    kept: dict[tuple[str, str], PathResult] = {}
    cfg = ScheduleConfig(bulk_pairs=Coverage("per-node", 1))
    budget = resolve(cfg, ProbePlan(), nodes)
    work = Work(
        measure,
        combine,
        emit,
        lambda p: kept.__setitem__(p.key, p),
        NullObserver(),
        kept.__getitem__,
    )
    tally = execute(
        full_mesh(nodes).rounds(), Totals(7, 28), cfg, budget, bulk=True, parallel=None,
        work=work,
    )  # fmt: skip
    bulk = [p for p in emitted if p.reasons == ("combined",)]
    skipped = [p for p in emitted if "bulk_pairs" in p.details]
    assert len(emitted) == 28 and len(bulk) + len(skipped) == 28
    assert {p.details["bulk_pairs"] for p in skipped} == {"not selected (per-node:1)"}
    assert sum(1 for phase, _ in measured if phase == "bulk") == len(bulk) == tally.bulk_pairs
    assert tally.bulk_not_selected == len(skipped) and tally.pingpong_rounds == 7
    assert layout(cfg, budget, bulk=True)["bulk_pairs"] == "per-node:1"
    assert layout(cfg, budget, bulk=True)["fabric"]["assumption"].startswith("non-blocking")


def test_a_pair_not_measured_is_emitted_as_such_with_no_bulk_phase_and_no_verdict() -> None:
    """A configuration failure (a refused NIC endpoint, the token) is a ``NotMeasured``:
    it finishes its pair at once, is never combined with a bulk phase, and progress counts
    it without a path (no verdict to put in the running worst)."""
    nodes = racked(4, 1)
    refused = {("h0", "h1")}

    def measure(a: Node, b: Node, phase: Phase) -> Measured:
        if (a.name, b.name) in refused or (b.name, a.name) in refused:
            return NotMeasured(a.name, b.name, "h1/eth1: connection refused")
        return PathResult(a.name, b.name, "tcp", Verdict.SAFE, ("pp",), rtt=None)

    emitted: list[Measured] = []
    kept: dict[tuple[str, str], PathResult] = {}
    items: list[PathResult | None] = []

    class Seen(NullObserver):
        def item(self, path: PathResult | None = None) -> None:
            items.append(path)

    def combine(pp: PathResult, bk: Measured) -> Measured:
        assert isinstance(bk, PathResult)
        return replace(pp, reasons=("combined",))

    cfg = ScheduleConfig()
    work = Work(
        measure, combine, emitted.append, lambda p: kept.__setitem__(p.key, p), Seen(),
        kept.__getitem__,
    )  # fmt: skip
    execute(
        full_mesh(nodes).rounds(), Totals(3, 6), cfg, resolve(cfg, ProbePlan(), nodes),
        bulk=True, parallel=None, work=work,
    )  # fmt: skip
    skipped = [m for m in emitted if isinstance(m, NotMeasured)]
    assert [m.key for m in skipped] == [("h0", "h1")] and len(emitted) == 6
    assert all(
        isinstance(m, PathResult) and m.reasons == ("combined",)
        for m in emitted
        if m not in skipped
    )
    assert items.count(None) == 1  # the pair not measured: counted, no verdict shown
