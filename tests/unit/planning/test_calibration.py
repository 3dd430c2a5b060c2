"""Estimates that learn (netqual.planning.calibration): an earlier run's measured rates
price a plan (known answers from hand-made paths), and its factor per phase turns them
into the calibrated estimate and the range printed around it."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from netqual.model.node import Node
from netqual.model.path import PathResult
from netqual.model.plan import ProbePlan
from netqual.model.run import Mode
from netqual.model.stats import BulkStats, RttStats
from netqual.model.verdict import Verdict
from netqual.planning import calibration, schedule
from netqual.planning.calibration import Calibration, EarlierRun, Rates, Shape, work_s
from netqual.planning.fabric import Fabric
from netqual.planning.phases import ScheduleConfig, planned_bulk_waves
from netqual.table.paths import PathTable

MIB = 1 << 20
PLAN = ProbePlan(iterations=1000, warmup=0, chunks_bytes=(MIB,), depths=(1,))
NODES = tuple(Node(f"n{i}", f"198.18.0.{i + 1}") for i in range(4))
PP_REQUEST_S, BULK_REQUEST_S = 0.2, 0.3


def _rtt_us(a: int, b: int) -> float:
    return 10.0 * (a + b + 1)


def _gbps(a: int, b: int) -> float:
    return 4.0 if (a, b) == (0, 3) else 8.0


def _bytes_s(a: int, b: int, plan: ProbePlan = PLAN) -> float:
    return plan.reads_for(MIB) * MIB * 8 / (_gbps(a, b) * 1e9)


def _path(a: int, b: int) -> PathResult:
    """Pair a-b as a run records it: its mean RTT, one bulk cell, both phase windows, each
    request taking its samples (or bytes) plus a fixed time."""
    m = _rtt_us(a, b)
    rtt = RttStats(1000, m / 2, m, m, m, m, m, m, 0.0)
    cell = BulkStats(MIB, 1, PLAN.reads_for(MIB), _gbps(a, b), 1.0, 1.0, 1.0)
    samples_s = 1000 * m * 1e-6
    windows = {
        "pingpong": [1.0, 1.0 + samples_s + PP_REQUEST_S],
        "bulk": [5.0, 5.0 + _bytes_s(a, b) + BULK_REQUEST_S],
    }
    return PathResult(
        f"n{a}", f"n{b}", "tcp", Verdict.SAFE, (), rtt=rtt, bulk=(cell,),
        details={"phase_windows_s": windows},
    )  # fmt: skip


def _rates() -> Rates:
    paths = [_path(a, b) for a, b in itertools.combinations(range(4), 2)]
    return Rates.of(PathTable.from_paths(paths, [n.name for n in NODES]), PLAN)


def _shape(plan: ProbePlan = PLAN, sample: int = 0) -> Shape:
    sched = schedule.build(NODES, Mode.FULL_MESH)
    return Shape(sched, plan, None, ScheduleConfig(), Fabric(), sample, 0.5, lambda c, d: 10.0)


def test_rates_read_round_trips_goodputs_and_request_times() -> None:
    rates = _rates()
    assert rates.pingpong_request_s == pytest.approx(PP_REQUEST_S)
    assert rates.bulk_request_s == pytest.approx(BULK_REQUEST_S)
    keys = rates.pair_keys(rates.codes(["n1", "n3"]), rates.codes(["n2", "n0"]))
    assert rates.rtt_of(keys).tolist() == pytest.approx([_rtt_us(1, 2), _rtt_us(0, 3)])
    assert rates.goodput_of(keys, (MIB, 1), 1.0).tolist() == [8.0, 4.0]
    unknown = rates.pair_keys(rates.codes(["n0"]), rates.codes(["elsewhere"]))
    assert rates.rtt_of(unknown)[0] == rates.median_rtt_us  # a pair it lacks: the median
    assert rates.goodput_of(unknown, (64 << 10, 8), 2.5)[0] == 2.5  # a cell it lacks


def test_work_prices_each_batch_and_wave_by_its_slowest_pair() -> None:
    shape = _shape(sample=3)
    got = work_s(shape, _rates())
    sched = shape.sched
    # one host per node: a round's two disjoint pairs are one batch
    rounds = [[(int(a), int(b)) for a, b in pos.tolist()] for pos in sched.rounds_positions()]
    pingpong = sum(
        PP_REQUEST_S + max(1000 * _rtt_us(min(p), max(p)) * 1e-6 for p in r) for r in rounds
    )
    assert got["pingpong"] == pytest.approx(pingpong)
    waves = planned_bulk_waves(list(sched.rounds()), shape.cfg, PLAN, sched.nodes, shape.fabric)
    code = {n.name: i for i, n in enumerate(NODES)}
    bulk = sum(
        BULK_REQUEST_S
        + max(
            _bytes_s(min(code[a.name], code[b.name]), max(code[a.name], code[b.name]))
            for a, b in wave
        )
        for wave in waves
    )
    assert got["bulk"] == pytest.approx(bulk)
    mean = sum(_rtt_us(a, b) for a, b in itertools.combinations(range(4), 2)) / 6
    assert got["interference"] == pytest.approx(3 * (PP_REQUEST_S + 1000 * mean * 1e-6))
    # twice the iterations: each batch's slowest pair takes twice its samples' time
    twice = work_s(_shape(dataclasses.replace(PLAN, iterations=2000)), _rates())
    assert twice["pingpong"] - got["pingpong"] == pytest.approx(pingpong - 3 * PP_REQUEST_S)


def test_a_factor_times_the_work_is_the_estimate_with_its_range() -> None:
    run = EarlierRun("r1", _rates(), {"pingpong": 1.5, "preflight": 2.0, "bulk": 1.0}, 4)
    shape = _shape(dataclasses.replace(PLAN, iterations=10_000))  # seconds, not ms
    got = calibration.calibrate(
        {"preflight": 0.1, "pingpong": 99.0, "interference": 1.0}, shape, Calibration((run,))
    )
    work = work_s(shape, run.rates)
    assert got["pingpong"].seconds == pytest.approx(1.5 * work["pingpong"])
    assert got["pingpong"].low_s == pytest.approx(0.65 * 1.5 * work["pingpong"])
    assert got["pingpong"].high_s == pytest.approx(1.35 * 1.5 * work["pingpong"])
    # pre-flight: the stated model's structure x the factor; a sub-second phase is +-0.5 s
    assert got["preflight"].seconds == pytest.approx(0.2)
    assert (got["preflight"].low_s, got["preflight"].high_s) == pytest.approx((0.0, 0.7))
    # no factor for it (the earlier run skipped it), or not in the new plan: left out
    assert "interference" not in got and "bulk" not in got
    # two earlier runs: the median, and the range spans both
    other = EarlierRun("r2", _rates(), {"pingpong": 2.5}, 4)
    both = calibration.calibrate({"pingpong": 1.0}, shape, Calibration((run, other)))["pingpong"]
    assert both.seconds == pytest.approx(2.0 * work["pingpong"]) and both.runs == 2
    assert both.low_s == pytest.approx(0.65 * 1.5 * work["pingpong"])
    assert both.high_s == pytest.approx(1.35 * 2.5 * work["pingpong"])


def test_a_run_without_a_round_trip_prices_nothing() -> None:
    """Every path failed: no rate to price a phase with (never NaN in results.json)."""
    failed = PathResult("n0", "n1", "tcp", Verdict.UNSAFE, ("unreachable",), error="refused")
    rates = Rates.of(PathTable.from_paths([failed], [n.name for n in NODES]), PLAN)
    assert work_s(_shape(sample=3), rates) == {}
    assert rates.pingpong_request_s is None and rates.bulk_request_s is None
