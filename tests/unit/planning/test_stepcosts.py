"""The steps after the pairs in the estimate (netqual.planning.stepcosts): the engine's
paths, the engine's fan-in levels and the multi-rail levels as items at a fixed cost plus
what they move (known answers), their measured rates, and their calibration by an earlier
run's measured seconds per item."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from netqual.model.engine import EngineCell, EngineName, EngineOp, EnginePlan, EngineTransport
from netqual.model.fanin import FaninConfig
from netqual.model.multirail import MultiRail, RailLevel
from netqual.model.node import Nic, Node, Role
from netqual.model.plan import ProbePlan
from netqual.model.run import Mode
from netqual.planning import budget, calibration, estimate, schedule, stepcosts
from netqual.planning.calibration import Calibration, EarlierRun, Rates, Shape
from netqual.planning.estimate import DurationModel
from netqual.planning.fabric import Fabric
from netqual.planning.phases import ScheduleConfig
from netqual.planning.rails import Rails
from netqual.planning.stepcosts import ItemRecord, StepPlan, StepRates, works

KIB = 1 << 10
CHUNK = 64 * KIB
EPLAN = EnginePlan(EngineName.MOONCAKE, CHUNK, (1, 8), warmup=10, ops=100)
OP_S = 25e-6 + CHUNK * 8 / 10e9  # the stated cost of one Mooncake operation at 10 Gbit/s
CELLS = [(op, d) for op in EngineOp for d in (1, 8)]


def _steps(**kw: object) -> StepPlan:
    fields = {"engine": EPLAN, "engine_paths": 3} | kw
    return StepPlan("tcp", 10.0, 0.5, **fields)  # type: ignore[arg-type]


def _cell(op: EngineOp, depth: int, gbps: float, first_us: float = 900.0) -> EngineCell:
    return EngineCell(
        EngineName.MOONCAKE, "0.3", op, CHUNK, depth, EngineTransport.TCP, "eth0", ops=100,
        goodput_gbps=gbps, first_op_us=first_us,
    )  # fmt: skip


def test_engine_is_its_paths_at_the_fixed_cost_plus_every_cells_operations() -> None:
    w = works(_steps())["engine"]
    # per path: READ and WRITE at depths 1 and 8, each its first operation + warm-up + kept
    per_path = 4 * (OP_S + 110 * OP_S)
    assert (w.count, w.units) == (3, 3.0)
    assert w.moving_s == pytest.approx(3 * per_path)
    assert w.seconds == pytest.approx(3 * 2.5 + 3 * per_path)
    # an unknown host's start-up: the range is the engine's low and high fixed cost
    low, high = stepcosts.stated_range(_steps(), "engine", w) or (0.0, 0.0)
    assert (low, high) == pytest.approx((3 * 1.0 + w.moving_s, 3 * 5.0 + w.moving_s))
    assert "1-5 s a path (the range)" in stepcosts.caveat(_steps(), "engine")
    nixl = _steps(engine=dataclasses.replace(EPLAN, name=EngineName.NIXL))
    assert works(nixl)["engine"].item_s == 4.0
    assert works(_steps(engine=None)) == {}


def test_measured_cells_price_the_operations_and_unmeasured_ones_scale_like_them() -> None:
    # three paths measured READ and WRITE at depth 1; depth 8 was not measured
    rates = StepRates.of(
        [
            (_cell(EngineOp.READ, 1, 1.0), _cell(EngineOp.WRITE, 1, 2.0, 500.0)),
            (_cell(EngineOp.READ, 1, 4.0), _cell(EngineOp.WRITE, 1, 8.0, 600.0)),
            (_cell(EngineOp.READ, 1, 2.0, 800.0), _cell(EngineOp.WRITE, 1, 4.0, 700.0)),
            (dataclasses.replace(_cell(EngineOp.READ, 8, 9.0), error="worker died"),),
        ],
        (),
    )
    # the medians of each operation's time: 2 and 4 Gbit/s
    read_s, write_s = CHUNK * 8 / 2e9, CHUNK * 8 / 4e9
    assert rates.engine is EngineName.MOONCAKE and rates.hosts == frozenset()  # no keys
    keyed = StepRates.of([(_cell(EngineOp.READ, 1, 1.0),), ()], (), [("a/r0", "b/r0"), ("c", "d")])
    assert keyed.hosts == {"a", "b"}  # the nodes of the endpoints whose engines it measured
    assert rates.ops[(EngineOp.READ, CHUNK, 1)] == pytest.approx((900e-6, read_s))
    assert rates.ops[(EngineOp.WRITE, CHUNK, 1)] == pytest.approx((600e-6, write_s))
    assert (EngineOp.READ, CHUNK, 8) not in rates.ops  # a failed cell measures nothing
    w = works(_steps(), rates)["engine"]
    # the stated cost x how the measured cells compared with it (the median of two: the mean)
    scaled = OP_S * (read_s / OP_S + write_s / OP_S) / 2
    per_path = 900e-6 + 110 * read_s + 600e-6 + 110 * write_s + 2 * (111 * scaled)
    assert w.moving_s == pytest.approx(3 * per_path)
    # rates of another engine price nothing of this one
    other = _steps(engine=dataclasses.replace(EPLAN, name=EngineName.NIXL))
    assert works(other, rates)["engine"].moving_s == works(other)["engine"].moving_s


def test_a_calibrated_phase_is_the_earlier_runs_item_cost_plus_its_own_operations() -> None:
    rates = StepRates(EngineName.MOONCAKE, {(op, CHUNK, d): (1e-3, 40e-6) for op, d in CELLS})
    own = works(_steps(), rates)["engine"]
    record = ItemRecord(own.units, own.moving_s, 7.5, "mooncake")
    assert record.item_s == pytest.approx((7.5 - own.moving_s) / 3)
    # the same plan: the earlier run's own time
    assert stepcosts.calibrated(_steps(), "engine", record, rates) == pytest.approx(7.5)
    # twice the paths and three times the operations: items and operations both follow
    more = _steps(engine=dataclasses.replace(EPLAN, ops=300), engine_paths=6)
    moving = 6 * 4 * (1e-3 + 310 * 40e-6)
    got = stepcosts.calibrated(more, "engine", record, rates)
    assert got == pytest.approx(6 * record.item_s + moving)
    # measured with another engine: says nothing of this one's start-up
    nixl = _steps(engine=dataclasses.replace(EPLAN, name=EngineName.NIXL))
    assert stepcosts.calibrated(nixl, "engine", record, rates) is None
    # moving more than it took (a host faster than its own rates): no negative item cost
    assert ItemRecord(3.0, 9.0, 7.5, "mooncake").item_s == 0.0


@pytest.mark.parametrize(
    ("raw", "actual"),
    [
        (None, 5.0),
        ({"units": 3.0}, 5.0),
        ({"units": 0, "moving_s": 1.0}, 5.0),
        ({"units": math.nan, "moving_s": 1.0}, 5.0),
        ({"units": 3.0, "moving_s": math.inf}, 5.0),
        ({"units": "3", "moving_s": 1.0}, 5.0),
        ({"units": 3.0, "moving_s": 1.0}, None),
        ({"units": 3.0, "moving_s": 1.0}, 0.0),
    ],
)
def test_a_bad_item_record_calibrates_nothing(raw: object, actual: object) -> None:
    assert ItemRecord.read(raw, actual) is None


def test_an_item_record_reads_back_what_a_run_wrote() -> None:
    w = works(_steps())["engine"]
    got = ItemRecord.read(w.to_dict("mooncake"), 9.0)
    assert got is not None and (got.units, got.actual_s, got.engine) == (3.0, 9.0, "mooncake")
    assert got.moving_s == pytest.approx(w.moving_s, abs=1e-6)


def _railed(name: str, i: int, rails: tuple[int, ...]) -> Node:
    nics = tuple(Nic(f"r{r}", f"198.18.{200 + r}.{i}", r) for r in rails)
    return Node(name, f"198.18.0.{i}", nics=nics)


RAILED = (_railed("a", 1, (0, 1, 2)), _railed("b", 2, (0, 1, 2)), _railed("c", 3, (0, 1)))
CELL = ProbePlan(chunks_bytes=(CHUNK, 1 << 20), depths=(1, 8))


def _rail_steps(slowdown: float = 1.0) -> StepPlan:
    return stepcosts.plan_steps(
        RAILED, 3, 100.0, "tcp", 10.0, 0.5, lambda _, k: slowdown * k if k > 1 else 1.0,
        Fabric(), CELL, multirail=2,
    )  # fmt: skip


def test_multirail_is_each_pairs_levels_at_the_request_plus_the_slowest_rails_reads() -> None:
    steps = _rail_steps()
    # the first two node pairs sharing two rails or more: a-b (3 rails), a-c (2 rails)
    assert steps.rail_pairs == 2
    assert [(lv.src, lv.dst, lv.rails) for lv in steps.rail_levels] == [
        ("a", "b", 1), ("a", "b", 2), ("a", "b", 3), ("a", "c", 1), ("a", "c", 2),
    ]  # fmt: skip
    reads = CELL.reads_for(1 << 20)  # the plan's largest chunk at its largest depth
    assert steps.rail_cell == (1 << 20, 8, reads)
    rate = min(10.0, budget.stream_gbps(1 << 20, 8, 100.0, budget.REFERENCE_RTT_US))
    bytes_s = reads * (1 << 20) * 8 / (rate * 1e9)
    units = 1 + 2 + 3 + 1 + 2  # k requests at once, each k as slow (shared cores)
    w = works(steps)["multirail"]
    assert (w.count, w.units, w.item_s) == (5, units, 0.5)
    assert w.moving_s == pytest.approx(units * bytes_s)  # the wave of k: k times as long
    assert stepcosts.stated_range(steps, "multirail", w) is None
    # measured: each level at its slowest rail; a pair it did not read: the level's median
    levels = (RailLevel(1, (4.0,), 4.0, None), RailLevel(2, (4.0, 2.0), 6.0, 2.0))
    m = MultiRail("a", "c", (0, 1), 1 << 20, 8, 100.0, 0.5, levels, "fine", False)
    rates = StepRates.of((), (m,))
    assert rates.rail_gbps("c", "a", 2) == 2.0 and rates.rail_gbps("a", "b", 3) == 3.0
    measured = works(steps, rates)["multirail"]
    gbps = [4.0, 2.0, 3.0, 4.0, 2.0]  # a-b at 1, 2 (medians), 3 (every level's); a-c its own
    assert measured.moving_s == pytest.approx(sum(reads * (1 << 20) * 8 / (g * 1e9) for g in gbps))


def test_engine_fanin_levels_start_their_readers_at_once() -> None:
    nodes = (
        Node("st", "198.18.0.1", role=Role.STORAGE),
        *(Node(f"c{i}", f"198.18.0.{i + 2}", role=Role.COMPUTE) for i in range(3)),
    )
    cfg = FaninConfig((1, 2, 4), chunk_bytes=256 * KIB, chunks=600)
    steps = stepcosts.plan_steps(
        nodes, 3, 100.0, "tcp", 10.0, 0.5, lambda _, k: float(k), Fabric(), ProbePlan(),
        engine=EPLAN, fanin=cfg,
    )  # fmt: skip
    # 4 readers is more than the 3 compute nodes: not a level
    assert [lv.readers for lv in steps.fanin_levels] == [1, 2]
    w = works(steps)["fanin_engine"]
    # a level is two starts in a row (target, then its readers at once, k as slow)
    assert w.count == 2 and w.units == pytest.approx((1 + 1) / 2 + (1 + 2) / 2)
    op_s = 25e-6 + 256 * KIB * 8 / 10e9
    # 500 READs per reader at most, one more before the barrier, k readers through the link
    link_s = [k * 256 * KIB * 8 / 100e9 for k in (1, 2)]
    assert w.moving_s == pytest.approx(sum(op_s + 500 * max(op_s, s) for s in link_s))
    assert "a level (the range)" in stepcosts.caveat(steps, "fanin_engine")


def _shape(steps: StepPlan) -> Shape:
    sched = schedule.build(RAILED, Mode.FULL_MESH)
    return Shape(
        sched, ProbePlan(), None, ScheduleConfig(), Fabric(), 0, 0.5, lambda c, d: 10.0, steps
    )


def test_calibrate_takes_the_item_cost_of_each_earlier_run_with_its_range() -> None:
    ops = {(op, CHUNK, d): (1e-3, 40e-6) for op, d in CELLS}
    rates = StepRates(EngineName.MOONCAKE, ops, hosts=frozenset("abc"))
    own = works(_steps(), rates)["engine"]
    empty = np.zeros(0, dtype=np.int64)

    def run(actual: float, engine: str = "mooncake", steps: StepRates = rates) -> EarlierRun:
        items = {"engine": ItemRecord(own.units, own.moving_s, actual, engine)}
        return EarlierRun("r", Rates(("a", "b"), empty, np.zeros(0), {}, None, None, steps),
                          {}, 2, items)  # fmt: skip

    shape = _shape(_steps())
    got = calibration.calibrate({"engine": 99.0}, shape, Calibration((run(7.5),)))["engine"]
    assert got.seconds == pytest.approx(7.5) and got.runs == 1
    assert (got.low_s, got.high_s) == pytest.approx((0.65 * 7.5, 1.35 * 7.5))
    both = calibration.calibrate({"engine": 1.0}, shape, Calibration((run(6.0), run(10.0))))
    assert both["engine"].seconds == pytest.approx(8.0)
    assert both["engine"].high_s == pytest.approx(13.5) and both["engine"].runs == 2
    assert got.unknown == 0
    # an earlier run that started no engine on c: a-c and b-c may take up to the stated high
    partial = run(7.5, steps=dataclasses.replace(rates, hosts=frozenset("ab")))
    got = calibration.calibrate({"engine": 1.0}, shape, Calibration((partial,)))["engine"]
    item_s = (7.5 - own.moving_s) / 3
    assert got.seconds == pytest.approx(7.5) and got.unknown == 2
    assert got.high_s == pytest.approx(1.35 * 7.5 + 2 * (5.0 - item_s))
    # another engine's run, or a phase this plan does not have: left out (uncalibrated)
    assert calibration.calibrate({"engine": 1.0}, shape, Calibration((run(7.5, "nixl"),))) == {}
    assert calibration.calibrate({}, shape, Calibration((run(7.5),))) == {}


def test_the_dry_run_prints_the_steps_in_run_order_with_the_engines_range() -> None:
    nodes = RAILED[:2]
    d = estimate.dry_run(
        "inv.toml", nodes, Mode.FULL_MESH, "tcp", ProbePlan(), model=DurationModel(),
        engine=EPLAN, multirail=1, rails=Rails.SAME,
    )  # fmt: skip
    names = [p.name for p in d.phases]
    assert names == ["preflight", "pingpong", "bulk", "engine", "multirail", "interference"]
    eng = next(p for p in d.phases if p.name == "engine")
    # per rail one path (a/r0-b/r0, ...): three paths, each a path's engine cells
    assert eng.count == 3 and eng.calibrated_by == 0
    assert eng.low_s is not None and eng.high_s is not None
    assert eng.low_s < eng.seconds < eng.high_s
    assert "start-up on a host no run has measured" in eng.text
    recorded = estimate.phases_to_dict(d.phases)
    assert recorded["engine"]["calibrated_by"] == 0 and "low_s" in recorded["engine"]
    assert "low_s" not in recorded["multirail"] and recorded["multirail"]["count"] == 3
    assert d.range_s is None  # uncalibrated: the total is the stated model's
