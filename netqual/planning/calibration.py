"""Estimates that learn: ``run --dry-run --calibrate-from DIR...`` (docs/performance.md).

The stated model (``planning.estimate``) guesses 50 us round trips, 10 Gbit/s of bulk and
0.5 s per probe request everywhere; real runs differ from it by 2-8x (loopback agents
share two cores, a lab's remote paths have 900 us round trips, a NIC runs at 0.5 Gbit/s).
A finished run measured what the model guesses: each pair's round trip (the mean of its
kept ping-pong samples, under that run's own concurrency), each bulk cell's goodput, and
per request what the probe took beyond its samples (the phase windows the run stamps on
every path). ``Rates`` holds them.

``work_s`` is the model with those rates, on a run's structure: per ping-pong batch the
request plus the slowest pair's samples ((warm-up + iterations) x its round trip), per
bulk wave the request plus the slowest pair's cells (reads x chunk at that pair's
goodput), the interference sample one path at a time; pre-flight and fan-in keep the
stated model (their structure is the agents and levels). A run records ``work_s`` of
itself when it finishes (``run.schedule.calibration``). Its factor per phase, actual /
work, is what the model with measured rates still misses (the coordinator's own time
between batches, journal fsyncs, threads starting). A calibrated estimate is that factor
times ``work_s`` of the new plan with the earlier run's rates: for the same plan on the
same inventory it is the earlier run's phase times; where the plan differs (iterations,
chunks, pairs, batches, waves) it follows the measured rates. The range it expects is
``MARGIN`` (at least ``FLOOR_S``) around the lowest and highest of the earlier runs'
estimates: what one run says about the next on the same fabric.

The steps after the pairs (engine, the fan-in's levels through it, multirail) are items
at a fixed cost plus what they move (``planning.stepcosts``): a run records their units
and moving seconds (``items``), and a later estimate takes the measured seconds per item
from them instead of a factor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from netqual.base.errors import UsageError
from netqual.model.multirail import MultiRail
from netqual.model.plan import ProbePlan
from netqual.planning import stepcosts
from netqual.planning.fabric import Fabric
from netqual.planning.phases import ScheduleConfig, Timing, batch_numbers, planned_bulk_waves
from netqual.planning.schedule import Pair, Schedule
from netqual.table.paths import FloatArray, IntArray, PathTable
from netqual.table.run import Results

MARGIN = 0.35  # the range printed around a calibrated estimate: +-35% of it ...
FLOOR_S = 0.5  # ... and at least +-0.5 s: a phase of 0.2 s moves by more on a busy host
WINDOW_ROWS = 2_000  # paths whose phase windows give the per-request time (evenly spread)
RATED = ("pingpong", "bulk", "interference")  # phases work_s computes from measured rates
Cell = tuple[int, int]  # (chunk_bytes, depth)


@dataclass(frozen=True)
class Rates:
    """What one run measured, per unordered pair of its endpoints (``keys``: the lower
    code times len(names) plus the higher, sorted)."""

    names: tuple[str, ...]
    keys: IntArray
    rtt_us: FloatArray  # per key: mean round trip of the kept samples
    cells: Mapping[Cell, tuple[IntArray, FloatArray]]  # cell -> (sorted keys, goodput_gbps)
    pingpong_request_s: float | None  # median time of a ping-pong request beyond its samples
    bulk_request_s: float | None  # the same for a bulk request beyond its cells' bytes
    # the steps after the pairs: engine operations, multi-rail levels (planning.stepcosts)
    steps: stepcosts.StepRates = field(default_factory=stepcosts.StepRates)

    @property
    def median_rtt_us(self) -> float:
        return float(np.median(self.rtt_us)) if len(self.rtt_us) else math.nan

    @property
    def mean_rtt_us(self) -> float:
        """What a random sample of the paths averages (the interference check's)."""
        return float(np.mean(self.rtt_us)) if len(self.rtt_us) else math.nan

    @classmethod
    def of(cls, paths: PathTable, plan: ProbePlan, multirail: Sequence[MultiRail] = ()) -> Rates:
        n = len(paths.names)
        key = np.minimum(paths.src, paths.dst) * n + np.maximum(paths.src, paths.dst)
        mean = paths.rtt["mean"]
        ok = paths.has_rtt & np.isfinite(mean) & (mean > 0)
        keys, rtt = _per_key(key[ok], mean[ok])
        b = paths.bulk
        owner = np.repeat(np.arange(len(paths)), np.diff(b.offsets))
        good = np.array([e is None for e in b.error], dtype=np.bool_) & (b.goodput_gbps > 0)
        cells: dict[Cell, tuple[IntArray, FloatArray]] = {}
        for chunk, depth in sorted(
            set(zip(b.chunk_bytes[good].tolist(), b.depth[good].tolist(), strict=True))
        ):
            at = good & (b.chunk_bytes == chunk) & (b.depth == depth)
            cells[(chunk, depth)] = _per_key(key[owner[at]], b.goodput_gbps[at])
        pp, bulk = _request_times(paths, plan)
        rows = [i for i, cells in enumerate(paths.engine) if cells]
        ends = [(paths.names[paths.src[i]], paths.names[paths.dst[i]]) for i in rows]
        steps = stepcosts.StepRates.of([paths.engine[i] for i in rows], multirail, ends)
        return cls(paths.names, keys, rtt, cells, pp, bulk, steps)

    def codes(self, names: Sequence[str]) -> IntArray:
        """Each name's code in this run, -1 where it did not measure that endpoint."""
        code = {name: i for i, name in enumerate(self.names)}
        return np.array([code.get(x, -1) for x in names] or [0], dtype=np.int64)[: len(names)]

    def pair_keys(self, a: IntArray, b: IntArray) -> IntArray:
        """Keys of endpoint pairs given as this run's codes (-1 for a pair it lacks)."""
        n = len(self.names)
        k: IntArray = np.where((a >= 0) & (b >= 0), np.minimum(a, b) * n + np.maximum(a, b), -1)
        return k

    def rtt_of(self, keys: IntArray) -> FloatArray:
        return _lookup(self.keys, self.rtt_us, keys, self.median_rtt_us)

    def goodput_of(self, keys: IntArray, cell: Cell, fallback_gbps: float) -> FloatArray:
        """Each pair's goodput in ``cell``; a pair not measured in it: the cell's median;
        a cell this run did not measure: ``fallback_gbps``."""
        if cell not in self.cells:
            return np.full(len(keys), fallback_gbps)
        ks, gbps = self.cells[cell]
        return _lookup(ks, gbps, keys, float(np.median(gbps)))


def _per_key(keys: IntArray, values: FloatArray) -> tuple[IntArray, FloatArray]:
    """Mean of ``values`` per key (a pair measured both ways has two), keys sorted."""
    uniq, at = np.unique(keys, return_inverse=True)
    sums = np.bincount(at.reshape(-1), weights=values, minlength=len(uniq))
    counts = np.bincount(at.reshape(-1), minlength=len(uniq))
    return uniq.astype(np.int64), (sums / np.maximum(counts, 1)).astype(np.float64)


def _lookup(keys: IntArray, values: FloatArray, query: IntArray, fallback: float) -> FloatArray:
    if not len(keys):
        return np.full(len(query), fallback)
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    hit = (keys[pos] == query) & (query >= 0)
    found: FloatArray = np.where(hit, values[pos], fallback)
    return found


def _request_times(paths: PathTable, plan: ProbePlan) -> tuple[float | None, float | None]:
    """Median time of a ping-pong request beyond its samples, and of a bulk request beyond
    its cells' bytes, from the phase windows of up to ``WINDOW_ROWS`` paths."""
    if not len(paths):
        return None, None
    rows = np.unique(np.linspace(0, len(paths) - 1, min(len(paths), WINDOW_ROWS)).astype(np.int64))
    b = paths.bulk
    pingpong: list[float] = []
    bulk: list[float] = []
    for i in rows.tolist():
        raw = (paths.details[i] or {}).get("phase_windows_s")
        if not isinstance(raw, Mapping) or not paths.has_rtt[i]:
            continue
        samples_s = (plan.warmup + int(paths.samples[i])) * float(paths.rtt["mean"][i]) * 1e-6
        cells = range(int(b.offsets[i]), int(b.offsets[i + 1]))
        bytes_s = sum(
            int(b.reads[c]) * int(b.chunk_bytes[c]) * 8 / (float(b.goodput_gbps[c]) * 1e9)
            for c in cells
            if b.error[c] is None and b.goodput_gbps[c] > 0
        )
        for name, spent, into in (
            ("pingpong", samples_s, pingpong),
            ("probe", samples_s + bytes_s, pingpong),
            ("bulk", bytes_s, bulk),
        ):
            window = raw.get(name)
            if isinstance(window, list) and len(window) == 2:
                into.append(max(0.0, float(window[1]) - float(window[0]) - spent))
    return (
        float(np.median(pingpong)) if pingpong else None,
        float(np.median(bulk)) if bulk else None,
    )


@dataclass(frozen=True)
class Shape:
    """What a run's phases are made of, besides its rates: its pairs, plan and schedule."""

    sched: Schedule
    plan: ProbePlan
    parallel: int | None
    cfg: ScheduleConfig
    fabric: Fabric
    interference_sample: int  # paths the interference check re-measures
    request_s: float  # the stated model's request time, where a run's windows gave none
    model_gbps: Callable[[int, int], float]  # the stated model's rate of a (chunk, depth) cell
    steps: stepcosts.StepPlan | None = None  # engine, engine fan-in, multirail (stepcosts)


def work_s(shape: Shape, rates: Rates) -> dict[str, float]:
    """Seconds of the rated phases (``RATED``) of a run of ``shape`` at ``rates``; a phase
    the rates cannot price (bulk cells no earlier run measured) is left out."""
    sched, plan = shape.sched, shape.plan
    if not len(rates.rtt_us):  # the run measured no round trip: nothing to price with
        return {}
    code = rates.codes([n.name for n in sched.nodes])
    host: dict[str, int] = {}
    hosts = [host.setdefault(n.address, len(host)) for n in sched.nodes]
    pp_request = (
        rates.pingpong_request_s if rates.pingpong_request_s is not None else shape.request_s
    )
    bulk_request = rates.bulk_request_s if rates.bulk_request_s is not None else shape.request_s
    per_iteration = (plan.warmup + plan.iterations) * 1e-6
    one_request = shape.cfg.schedule is Timing.UNALIGNED or not plan.bulk
    bulk_ok = not plan.bulk or bool(rates.cells)  # bulk is priced when it was measured
    out: dict[str, float] = {}

    def bulk_s(keys: IntArray) -> FloatArray:
        total = np.zeros(len(keys))
        for chunk in plan.chunks_bytes:
            for depth in plan.depths:
                gbps = rates.goodput_of(keys, (chunk, depth), _fallback(rates, shape, chunk, depth))
                total += plan.reads_for(chunk) * chunk * 8 / (gbps * 1e9)
        return total

    if not one_request or bulk_ok:
        seconds = 0.0
        for pos in sched.rounds_positions():
            if not len(pos):
                continue
            keys = rates.pair_keys(code[pos[:, 0]], code[pos[:, 1]])
            each = per_iteration * rates.rtt_of(keys)
            if one_request and plan.bulk:
                each = each + bulk_s(keys) + bulk_request - pp_request
            batch = np.array(
                batch_numbers([(hosts[a], hosts[b]) for a, b in pos.tolist()], shape.parallel),
                dtype=np.int64,
            )
            slowest = np.zeros(int(batch.max()) + 1)
            np.maximum.at(slowest, batch, each)
            seconds += float(np.sum(slowest + pp_request))
        out["pingpong"] = seconds
    if plan.bulk and not one_request and bulk_ok:
        rounds: list[Sequence[Pair]] = list(sched.rounds())
        waves = planned_bulk_waves(rounds, shape.cfg, plan, sched.nodes, shape.fabric)
        named = {n.name: i for i, n in enumerate(sched.nodes)}
        seconds = 0.0
        for wave in waves:
            a = code[[named[x.name] for x, _ in wave]]
            b = code[[named[y.name] for _, y in wave]]
            seconds += bulk_request + float(np.max(bulk_s(rates.pair_keys(a, b))))
        out["bulk"] = seconds
    if shape.interference_sample > 0:
        alone = pp_request + per_iteration * rates.mean_rtt_us
        out["interference"] = shape.interference_sample * alone
    return out


def _fallback(rates: Rates, shape: Shape, chunk: int, depth: int) -> float:
    """A cell the earlier run did not measure: the stated model's rate for it, scaled by
    how the earlier run's cells compared with the model's rates for them (median)."""
    ratios = [
        float(np.median(gbps)) / shape.model_gbps(c, d) for (c, d), (_, gbps) in rates.cells.items()
    ]
    return shape.model_gbps(chunk, depth) * (float(np.median(ratios)) if ratios else 1.0)


@dataclass(frozen=True)
class EarlierRun:
    """One run an estimate is calibrated by: its rates and, per phase it ran, its factor
    (actual seconds over ``work_s`` of itself, as it recorded them when it finished)."""

    source: str
    rates: Rates
    factors: Mapping[str, float]
    shared_nodes: int  # endpoints of this run that the estimated inventory also has
    # per phase after the pairs: its units, moving seconds and actual (planning.stepcosts)
    items: Mapping[str, stepcosts.ItemRecord] = field(default_factory=dict)

    @classmethod
    def of(cls, source: str, results: Results, transport: str, names: Sequence[str]) -> EarlierRun:
        """``results`` of a finished run as a calibration of a run over ``transport`` on
        the endpoints ``names``; a run that cannot calibrate it is a usage error saying why."""

        def refuse(why: str) -> UsageError:
            return UsageError("--calibrate-from", f"{source}: {why}")

        run = results.run
        if not run.complete:
            raise refuse("an interrupted run: its phase times cover part of its plan")
        if run.transport != transport:
            raise refuse(f"measured over {run.transport}; this run is {transport}")
        recorded = run.schedule.get("calibration")
        actual = run.schedule.get("actual")
        if not isinstance(recorded, Mapping) or not isinstance(actual, Mapping):
            why = recorded if isinstance(recorded, str) else "written by a netqual without it"
            raise refuse(f"records no calibration ({why}): calibrate from a run of this netqual")
        work = recorded.get("work_s")
        shared = len(set(names) & set(results.paths.names))
        if not isinstance(work, Mapping) or not shared:
            raise refuse(
                "measured none of this inventory's nodes"
                if not shared
                else "bad calibration record"
            )
        factors = {}
        for phase, w in work.items():
            got = actual.get(f"{phase}_s")
            if isinstance(w, (int, float)) and isinstance(got, (int, float)) and w > 0 and got > 0:
                factors[str(phase)] = float(got) / float(w)
        raw = recorded.get("items")
        items = {
            str(phase): rec
            for phase, one in (raw.items() if isinstance(raw, Mapping) else ())
            if (rec := stepcosts.ItemRecord.read(one, actual.get(f"{phase}_s"))) is not None
        }
        rates = Rates.of(results.paths, run.plan, results.multirail)
        return cls(source, rates, factors, shared, items)


@dataclass(frozen=True)
class Calibration:
    """The earlier runs an estimate learns from (``--calibrate-from``)."""

    runs: tuple[EarlierRun, ...] = field(default_factory=tuple)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(r.source for r in self.runs)


@dataclass(frozen=True)
class Calibrated:
    """One phase's calibrated estimate: the median of the earlier runs' estimates and the
    range around their lowest and highest (``MARGIN``, at least ``FLOOR_S``)."""

    seconds: float
    low_s: float
    high_s: float
    runs: int
    unknown: int = 0  # engine paths touching a node no earlier run started the engine on


def calibrate(
    uncalibrated: Mapping[str, float], shape: Shape, calibration: Calibration
) -> dict[str, Calibrated]:
    """Per phase an earlier run measured: its factor times the work of ``shape`` at its
    rates (pre-flight and fan-in: the stated model's seconds); the steps after the pairs
    (``stepcosts.ITEMISED``): their items at the earlier run's measured seconds per item
    plus what they move at its rates. Phases no earlier run measured are left out (the
    caller keeps them uncalibrated and says so)."""
    per_phase: dict[str, list[float]] = {}
    unknown: dict[str, tuple[int, float]] = {}  # the most paths and seconds, over the runs
    skip = (*RATED, *stepcosts.ITEMISED)
    for run in calibration.runs:
        work = {
            **{k: v for k, v in uncalibrated.items() if k not in skip},
            **work_s(shape, run.rates),
        }
        for phase, seconds in work.items():
            if phase in run.factors and phase in uncalibrated:
                per_phase.setdefault(phase, []).append(run.factors[phase] * seconds)
        for phase, record in run.items.items():
            if shape.steps is None or phase not in uncalibrated:
                continue
            got = stepcosts.calibrated(shape.steps, phase, record, run.rates.steps)
            if got is not None:
                per_phase.setdefault(phase, []).append(got)
                if phase == "engine":  # a start-up it never measured: the range says so
                    new = stepcosts.unknown_hosts(
                        shape.steps, shape.sched, run.rates.steps, record.item_s
                    )
                    unknown[phase] = max(unknown.get(phase, (0, 0.0)), new)
    return {
        phase: Calibrated(
            float(np.median(values)),
            max(0.0, min(values) - max(MARGIN * min(values), FLOOR_S)),
            max(values) + max(MARGIN * max(values), FLOOR_S) + unknown.get(phase, (0, 0.0))[1],
            len(values),
            unknown.get(phase, (0, 0.0))[0],
        )
        for phase, values in per_phase.items()
    }
