"""What the steps after the pairs cost (docs/scale.md "estimates"): the fetch engine's cells
per path (``--engine``), the fan-in levels read through the engine (``--fanin`` with
``--engine``) and the multi-rail levels (``--multirail N``).

Each is items at a fixed cost plus what their operations move, ``units x item_s +
moving_s`` (``units``: the items, each weighted by how much slower it runs beside others
on shared cores; 1 per item on a cluster):

- engine: an item is a path, one at a time, never beside a probe. Its target worker and
  then its initiator worker start (a process, the engine, its descriptor), connect, and
  are torn down (``EngineCosts.path_s``). Moving: per cell (READ, then WRITE, at each
  depth) its first operation alone plus warm-up and kept operations, each ``op_s`` = the
  engine's per-operation cost + the chunk at the transport's rate (no overlap assumed at
  depth > 1: the engines on a shared host do not keep it);
- engine fan-in: an item is a level (per storage node, each level with enough readers):
  the target's worker and then k readers' workers at once start, connect and stop (on
  shared cores k starts take their CPU over the cores); moving: the chunks every reader
  READs (at most ``MAX_OPS``, one before the barrier), the k readers' chunks sharing the
  storage node's link;
- multirail: an item is a level (k = 1..R rails of one node pair read at once, R their
  shared rails): k requests at once; moving: the slowest rail's reads of the plan's
  largest cell at the rate (k at once on shared cores: slowed like a bulk wave of k).

The stated costs (``ENGINE_COSTS``) are what docs/performance.md measured on a shared
2-core host. An engine's start-up on a host no run has measured is the least known of
them, so an uncalibrated engine phase carries the range its low and high start-up give.
Calibrated (``--calibrate-from``), an earlier run recorded per phase its units and what it
moved at its own measured rates (``run.schedule.calibration.items``); its seconds per item
are measured, (actual - moving) / units, and the new plan is its units at that plus its
moving at the earlier run's operation rates (``StepRates``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from netqual.model.engine import EngineCell, EngineName, EngineOp, EnginePlan
from netqual.model.fanin import FaninConfig
from netqual.model.multirail import MultiRail
from netqual.model.node import Node, Role
from netqual.model.plan import ProbePlan
from netqual.planning import budget
from netqual.planning import rails as rails_mod
from netqual.planning.fabric import Fabric
from netqual.planning.schedule import Schedule

ITEMISED = ("engine", "fanin_engine", "multirail")  # the phases priced here
MAX_OPS = 500  # an engine cell's kept operations, and a fan-in reader's chunks, at most


@dataclass(frozen=True)
class EngineCosts:
    """One engine's stated costs. ``path_s``: a path's fixed cost (low, typical, high):
    both workers' start, the connection, the teardown; measured 2.0-2.6 s a path for
    Mooncake in the lab on the shared 2-core host (docs/scale.md), worker start-up alone
    0.3-0.6 s for Mooncake and 1.0-1.5 s for NIXL (docs/performance.md). ``op_us``: an
    operation's cost beyond its bytes (Mooncake 64 KiB over TCP: 28 us at p50)."""

    path_s: tuple[float, float, float]
    op_us: float


ENGINE_COSTS: Mapping[EngineName, EngineCosts] = {
    EngineName.MOONCAKE: EngineCosts((1.0, 2.5, 5.0), 25.0),
    EngineName.NIXL: EngineCosts((2.5, 4.0, 8.0), 50.0),
}


@dataclass(frozen=True)
class StepWork:
    """``count`` items (``units`` once weighted) at ``item_s`` each, plus ``moving_s``."""

    count: int
    units: float
    item_s: float
    moving_s: float

    @property
    def seconds(self) -> float:
        return self.units * self.item_s + self.moving_s

    def to_dict(self, engine: str | None) -> dict[str, Any]:
        """``run.schedule.calibration.items.PHASE``: what a later estimate divides by."""
        out: dict[str, Any] = {"units": round(self.units, 6), "moving_s": round(self.moving_s, 6)}
        return out | ({"engine": engine} if engine is not None else {})


@dataclass(frozen=True)
class FaninLevelPlan:
    readers: int
    link_gbps: float  # the storage node's stated line rate
    units: float  # target start, then ``readers`` starts at once: in paths' starts


@dataclass(frozen=True)
class RailLevelPlan:
    src: str  # nodes
    dst: str
    rails: int  # read at once
    link_gbps: float  # one rail's stated line rate
    units: float  # ``rails`` requests at once, in one request's time


@dataclass(frozen=True)
class StepPlan:
    """What a run's steps after the pairs do, as planned, with the stated model's rates."""

    transport: str
    goodput_gbps: float  # the stated model's rate of the transport
    request_s: float  # the stated model's request time
    engine: EnginePlan | None = None
    engine_paths: int = 0
    link_gbps: float = 100.0  # the slowest stated NIC of the paths
    fanin: FaninConfig | None = None
    fanin_levels: tuple[FaninLevelPlan, ...] = ()  # only with an engine
    rail_levels: tuple[RailLevelPlan, ...] = ()
    rail_pairs: int = 0
    rail_cell: tuple[int, int, int] = (0, 0, 0)  # chunk_bytes, depth, reads

    @property
    def costs(self) -> EngineCosts | None:
        return ENGINE_COSTS[self.engine.name] if self.engine is not None else None

    def stated_op_s(self, chunk_bytes: int, link_gbps: float | None = None) -> float:
        assert self.costs is not None
        gbps = min(self.goodput_gbps, link_gbps or self.link_gbps)
        return self.costs.op_us * 1e-6 + chunk_bytes * 8 / (gbps * 1e9)


def plan_steps(
    nodes: Sequence[Node],
    pairs: int,
    link_gbps: float,
    transport: str,
    goodput_gbps: float,
    request_s: float,
    slowdown: Callable[[str, int], float],
    fabric: Fabric,
    plan: ProbePlan,
    engine: EnginePlan | None = None,
    fanin: FaninConfig | None = None,
    multirail: int = 0,
) -> StepPlan:
    """The steps of a run of ``pairs`` paths on ``nodes``; ``slowdown(phase, n)``: how many
    times longer ``n`` at once take than one alone (the model's shared cores)."""
    levels: list[FaninLevelPlan] = []
    if engine is not None and fanin is not None:
        readers = sum(n.role in (Role.COMPUTE, Role.ANY) for n in nodes)
        for st in (n for n in nodes if n.role is Role.STORAGE):
            for k in fanin.levels:
                if k <= readers:
                    units = (1.0 + slowdown("engine", k)) / 2.0  # a path is two starts
                    levels.append(FaninLevelPlan(k, fabric.nic(st), units))
    rail_pairs = rails_mod.multirail_pairs(nodes, multirail) if multirail > 0 else []
    rail_levels = [
        RailLevelPlan(a.name, b.name, k, fabric.nic(a), slowdown("bulk", k))
        for a, b in rail_pairs
        for k in range(1, len(rails_mod.shared_rails(a, b)) + 1)
    ]
    cell = rails_mod.multirail_cell(plan)
    chunk, depth = cell.chunks_bytes[0], cell.depths[0]
    return StepPlan(
        transport, goodput_gbps, request_s, engine, pairs if engine is not None else 0,
        link_gbps, fanin, tuple(levels), tuple(rail_levels), len(rail_pairs),
        (chunk, depth, cell.reads_for(chunk)),
    )  # fmt: skip


# -- measured rates ----------------------------------------------------------------------
OpKey = tuple[EngineOp, int, int]  # (op, chunk_bytes, depth)


@dataclass(frozen=True)
class StepRates:
    """What an earlier run measured of these steps: per engine cell (op, chunk, depth) the
    median seconds of its first operation and of each one after (the chunk over the
    cell's goodput), and per multi-rail level the slowest rail's goodput."""

    engine: EngineName | None = None
    ops: Mapping[OpKey, tuple[float, float]] = field(default_factory=dict)  # first_s, op_s
    rails: Mapping[tuple[str, str, int], float] = field(default_factory=dict)  # gbps
    rail_chunk: int = 0
    hosts: frozenset[str] = frozenset()  # nodes whose engine workers it measured

    @classmethod
    def of(
        cls,
        engine: Sequence[Sequence[EngineCell]],
        multirail: Sequence[MultiRail],
        keys: Sequence[tuple[str, str]] = (),
    ) -> StepRates:
        """``engine``: each path's cells; ``keys``: those paths' (src, dst), in order."""
        firsts: dict[OpKey, list[float]] = {}
        each: dict[OpKey, list[float]] = {}
        name = None
        hosts: set[str] = set()
        for i, cells in enumerate(engine):
            for c in cells:
                if c.error is not None or not c.goodput_gbps or c.goodput_gbps <= 0:
                    continue
                name = name or c.name
                if i < len(keys):
                    hosts |= {rails_mod.split_endpoint(x)[0] for x in keys[i]}
                key = (c.op, c.chunk_bytes, c.depth)
                op_s = c.chunk_bytes * 8 / (c.goodput_gbps * 1e9)
                each.setdefault(key, []).append(op_s)
                firsts.setdefault(key, []).append(
                    c.first_op_us * 1e-6 if c.first_op_us is not None else op_s
                )
        ops = {k: (float(np.median(firsts[k])), float(np.median(v))) for k, v in each.items()}
        rails: dict[tuple[str, str, int], float] = {}
        for m in multirail:
            for lv in m.levels:
                if lv.error is None and lv.per_rail_gbps and min(lv.per_rail_gbps) > 0:
                    rails[(m.src, m.dst, lv.rails)] = min(lv.per_rail_gbps)
        chunk = multirail[0].chunk_bytes if multirail else 0
        return cls(name, ops, rails, chunk, frozenset(hosts))

    def rail_gbps(self, src: str, dst: str, k: int) -> float | None:
        """The slowest rail's goodput of level ``k``: the pair's own, else the median of
        every pair's at ``k``, else of every level; None when none was measured."""
        got = self.rails.get((src, dst, k)) or self.rails.get((dst, src, k))
        if got is not None:
            return got
        same = [g for (_, _, j), g in self.rails.items() if j == k]
        pool = same or list(self.rails.values())
        return float(np.median(pool)) if pool else None


def _op_times(steps: StepPlan, rates: StepRates | None) -> Callable[[OpKey], tuple[float, float]]:
    """(first operation, each after) of a cell: measured, else the stated cost scaled by
    how the measured cells compared with it (median), else the stated cost."""
    assert steps.engine is not None
    measured = rates.ops if rates is not None and rates.engine is steps.engine.name else {}
    ratios = [op_s / steps.stated_op_s(chunk) for (_, chunk, _), (_, op_s) in measured.items()]
    scale = float(np.median(ratios)) if ratios else 1.0

    def times(key: OpKey) -> tuple[float, float]:
        if key in measured:
            return measured[key]
        op_s = steps.stated_op_s(key[1]) * scale
        return op_s, op_s

    return times


def works(steps: StepPlan, rates: StepRates | None = None) -> dict[str, StepWork]:
    """Per phase of ``ITEMISED`` the run has: its work at the stated item cost, moving at
    ``rates`` where they measured it (else the stated model's)."""
    out: dict[str, StepWork] = {}
    eplan, costs = steps.engine, steps.costs
    if eplan is not None and costs is not None:
        times = _op_times(steps, rates)
        moving = 0.0
        for op in EngineOp:
            for depth in eplan.depths:
                first, each = times((op, eplan.chunk_bytes, depth))
                moving += first + (eplan.warmup + eplan.ops) * each
        n = steps.engine_paths
        out["engine"] = StepWork(n, float(n), costs.path_s[1], n * moving)
        if steps.fanin is not None and steps.fanin_levels:
            cfg = steps.fanin
            chunks = min(cfg.chunks, MAX_OPS) + 1  # one before the barrier
            first, each = times((EngineOp.READ, cfg.chunk_bytes, 1))
            moving = sum(
                first
                + (chunks - 1) * max(each, lv.readers * cfg.chunk_bytes * 8 / (lv.link_gbps * 1e9))
                for lv in steps.fanin_levels
            )
            units = sum(lv.units for lv in steps.fanin_levels)
            out["fanin_engine"] = StepWork(len(steps.fanin_levels), units, costs.path_s[1], moving)
    if steps.rail_levels:
        chunk, depth, reads = steps.rail_cell
        moving = 0.0
        for lv in steps.rail_levels:
            gbps = rates.rail_gbps(lv.src, lv.dst, lv.rails) if rates is not None else None
            if gbps is None:  # the stated rate, slowed as a bulk wave of k pairs
                stream = budget.stream_gbps(chunk, depth, lv.link_gbps, budget.REFERENCE_RTT_US)
                gbps = min(steps.goodput_gbps, stream) / lv.units
            moving += reads * chunk * 8 / (gbps * 1e9)
        units = sum(lv.units for lv in steps.rail_levels)
        out["multirail"] = StepWork(len(steps.rail_levels), units, steps.request_s, moving)
    return out


def stated_range(steps: StepPlan, phase: str, work: StepWork) -> tuple[float, float] | None:
    """The range an uncalibrated engine phase carries: its items at the engine's low and
    high stated cost (start-up on a host no run has measured); None for the others."""
    costs = steps.costs
    if phase not in ("engine", "fanin_engine") or costs is None:
        return None
    low, _, high = costs.path_s
    return replace(work, item_s=low).seconds, replace(work, item_s=high).seconds


def rule(steps: StepPlan, phase: str, work: StepWork) -> str:
    """How ``work`` was reached, in words (the dry run's phase line)."""
    if phase == "multirail":
        chunk, depth, reads = steps.rail_cell
        return (
            f"{steps.rail_pairs:,} node pair(s) x {work.count:,} levels (1 to R rails at "
            f"once), each k requests of {reads:,} reads of {chunk:,} bytes at depth {depth}"
        )
    assert steps.engine is not None
    name = steps.engine.name.value
    if phase == "engine":
        e = steps.engine
        return (
            f"{work.count:,} paths one at a time x ({name} workers' start, connect and "
            f"teardown + {2 * len(e.depths)} cells of {e.warmup + e.ops + 1:,} operations of "
            f"{e.chunk_bytes:,} bytes)"
        )
    assert steps.fanin is not None
    return (
        f"{work.count:,} fan-in levels through {name} x (target and readers' workers start "
        f"+ {min(steps.fanin.chunks, MAX_OPS):,} READs of {steps.fanin.chunk_bytes:,} bytes "
        "per reader)"
    )


def caveat(steps: StepPlan, phase: str) -> str:
    """What an uncalibrated engine phase cannot price well, and the range that says so."""
    assert steps.engine is not None and steps.costs is not None
    low, _, high = steps.costs.path_s
    item = "path" if phase == "engine" else "level"
    return (
        f"{steps.engine.name.value} start-up on a host no run has measured: "
        f"{low:g}-{high:g} s a {item} (the range)"
    )


@dataclass(frozen=True)
class ItemRecord:
    """What an earlier run recorded of an itemised phase, and its measured item cost."""

    units: float
    moving_s: float
    actual_s: float
    engine: str | None

    @property
    def item_s(self) -> float:
        """Seconds per item beyond what it moved (the start-ups, connections, requests)."""
        return max(0.0, self.actual_s - self.moving_s) / self.units if self.units > 0 else 0.0

    @classmethod
    def read(cls, raw: object, actual: object) -> ItemRecord | None:
        if not isinstance(raw, Mapping) or not isinstance(actual, (int, float)):
            return None
        units, moving, engine = raw.get("units"), raw.get("moving_s"), raw.get("engine")
        if not isinstance(units, (int, float)) or not isinstance(moving, (int, float)):
            return None
        if not math.isfinite(units) or units <= 0 or not math.isfinite(moving) or actual <= 0:
            return None
        name = engine if isinstance(engine, str) else None
        return cls(float(units), float(moving), float(actual), name)


def calibrated(steps: StepPlan, phase: str, record: ItemRecord, rates: StepRates) -> float | None:
    """``phase`` of ``steps`` at the earlier run's measured item cost and rates; None when
    it measured another engine."""
    engine = steps.engine.name.value if steps.engine is not None else None
    if phase != "multirail" and record.engine != engine:
        return None
    work = works(steps, rates).get(phase)
    return None if work is None else replace(work, item_s=record.item_s).seconds


def unknown_hosts(
    steps: StepPlan, sched: Schedule, rates: StepRates, item_s: float
) -> tuple[int, float]:
    """The engine's paths that touch a node the earlier run started no engine worker on,
    and what their start-up may add beyond its measured item cost ``item_s``: up to the
    engine's high stated cost a path (what the printed range then spans)."""
    if steps.costs is None or not steps.engine_paths:
        return 0, 0.0
    known = np.array([n.node_name in rates.hosts for n in sched.nodes], dtype=np.bool_)
    if known.all():
        return 0, 0.0
    count = sum(
        int((~known[pos[:, 0]] | ~known[pos[:, 1]]).sum()) for pos in sched.rounds_positions()
    )
    return count, count * max(0.0, steps.costs.path_s[2] - item_s)


def unknown_caveat(steps: StepPlan, unknown: int) -> str:
    assert steps.engine is not None and steps.costs is not None
    return (
        f"{unknown:,} of {steps.engine_paths:,} paths touch a node no earlier run started "
        f"{steps.engine.name.value} on: their start-up up to {steps.costs.path_s[2]:g} s a path "
        "(the range)"
    )
