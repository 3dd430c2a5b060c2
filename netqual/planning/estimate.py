"""``netqual run --dry-run``: what a run would do and how long each phase takes, without
contacting any agent; the same model is recorded in ``run.schedule.estimate`` of a run.

Duration model (stated, not measured; ``DurationModel`` holds the constants), per phase:

- pre-flight: one pass over every agent (the check ``netqual run`` starts with; the
  coordinator asks no agent again), ``check_s`` per agent over 64 parallel connections;
- ping-pong: every round runs its pairs at once, except that pairs sharing a host run one
  after another and at most ``--parallel`` run together: a round takes
  ``batches x (request_s + (warm-up + iterations) x rtt_us)`` with batches =
  max(most pairs on one host, ceil(pairs / parallel));
- bulk: the waves the packer makes of the covered pairs (netqual.planning.packing: the fabric's
  caps and ``--bulk-pairs``), each as long as one bulk request: ``request_s`` plus every
  cell's bytes at the cell's rate, the lesser of ``goodput_gbps`` of the transport and
  what ``depth`` reads of ``chunk`` keep in flight at the link rate (budget.stream_gbps);
- interference check: the sampled paths one at a time, each a ping-pong request.

Agents that share one host's cores (``shared_cores``: loopback agents, all on the
coordinator's host) slow each other down: ``n`` pairs measuring at once, each keeping
``pair_cores`` cores busy alone, take ``max(1, n x pair_cores / cores)`` times as long as
one pair alone (relative to one pair's own demand), per ping-pong batch, bulk wave and
group of agents checked at once. On a cluster (one host per agent) they do not compete.

Every pair's ping-pong is assumed to succeed (a failed pair skips its bulk; a timed-out
one takes up to its timeout), so slow or broken paths make a real run longer.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netqual.codec.plan import plan_to_dict
from netqual.model.engine import EnginePlan
from netqual.model.fanin import FaninConfig
from netqual.model.fetchprofile import PROFILES
from netqual.model.node import Node, Role
from netqual.model.plan import ProbePlan
from netqual.model.run import Mode
from netqual.planning import budget, calibration, phases, sampling, stepcosts
from netqual.planning import rails as rails_mod
from netqual.planning.fabric import DEFAULT_NIC_GBPS, Fabric
from netqual.planning.phases import ScheduleConfig, Timing
from netqual.planning.schedule import DEFAULT_SAMPLE_K, Pair, Schedule

PREVIEW_ROUNDS = 3
PREVIEW_PAIRS = 6
CHECK_THREADS = (64,)  # the pre-flight check's parallel connections (one pass)
# the coordinator's own CPU per agent checked, measured on the 2-core VM (a check of 16
# agents less one of 2, CPU seconds of the `netqual check` process: 1.2-2.9 ms)
CHECK_EACH_S = 0.0025


@dataclass(frozen=True)
class DurationModel:
    request_s: float = 0.5  # connect, authenticate, hop probe, tear down: per request
    check_s: float = 0.1  # one agent's answer in a pre-flight pass
    # What each agent adds to a pre-flight pass where checks cannot overlap: the
    # coordinator's own work per agent (connect, authenticate, decode its answers) runs one
    # at a time in its one Python process, and on shared cores every agent's answer is
    # CPU work on the same cores; a pass takes at least agents x check_each_s.
    check_each_s: float = CHECK_EACH_S
    rtt_us: dict[str, float] = field(default_factory=lambda: {"tcp": 50.0, "rdma": 10.0})
    goodput_gbps: dict[str, float] = field(default_factory=lambda: {"tcp": 10.0, "rdma": 50.0})
    # Cores every agent shares when all run on one host (loopback agents); 0: one host per
    # agent, as on a cluster.
    shared_cores: int = 0
    # Cores one pair (one agent in the pre-flight) needs while it measures alone, per phase.
    # On loopback a pair's critical path is CPU all the way (its two ends, the kernel's
    # copies and the coordinator take turns): one core. An agent check also waits for its
    # answers: half (fitted to 16 loopback agents, docs/performance.md).
    pair_cores: dict[str, float] = field(
        default_factory=lambda: {"preflight": 0.5, "pingpong": 1.0, "bulk": 1.0}
    )

    def contention(self, phase: str, pairs: int) -> float:
        """How many times longer ``pairs`` measuring at once take than one pair alone: 1 on
        a cluster; on shared cores their CPU demand over the cores (at least 1), relative
        to what one pair alone already waits for."""
        if self.shared_cores <= 0 or pairs <= 1:
            return 1.0
        demand = self.pair_cores.get(phase, 1.0) / self.shared_cores
        return max(1.0, pairs * demand) / max(1.0, demand)

    def pingpong_s(self, plan: ProbePlan, transport: str) -> float:
        return self.request_s + (plan.warmup + plan.iterations) * self.rtt_us[transport] * 1e-6

    def bulk_s(self, plan: ProbePlan, transport: str, link_gbps: float = DEFAULT_NIC_GBPS) -> float:
        """One bulk-only request (its single unkept ping-pong round is negligible)."""
        if not plan.bulk:
            return 0.0
        seconds = self.request_s
        for chunk in plan.chunks_bytes:
            for depth in plan.depths:
                stream = budget.stream_gbps(chunk, depth, link_gbps, budget.REFERENCE_RTT_US)
                rate = min(self.goodput_gbps[transport], stream)
                seconds += plan.reads_for(chunk) * chunk * 8 / (rate * 1e9)
        return seconds

    def to_dict(self, transport: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "request_s": self.request_s,
            "check_s": self.check_s,
            "check_each_s": self.check_each_s,
            "rtt_us": self.rtt_us[transport],
            "goodput_gbps": self.goodput_gbps[transport],
        }
        if self.shared_cores > 0:
            out |= {"shared_cores": self.shared_cores, "pair_cores": dict(self.pair_cores)}
        return out


@dataclass(frozen=True)
class PhaseEstimate:
    # preflight | pingpong | bulk | interference | fanin | engine | fanin_engine | multirail
    name: str
    count: int  # agent checks, batches, waves, sampled paths
    unit_s: float  # seconds of one of them
    seconds: float
    rule: str  # how count x unit_s was reached, in words
    # the range expected, and by how many earlier runs it was calibrated (planning.calibration);
    # uncalibrated, a phase the model cannot price well (an engine's start-up) has one too
    low_s: float | None = None
    high_s: float | None = None
    calibrated_by: int = 0
    caveat: str = ""  # what the stated model cannot price well (its range), until calibrated

    @property
    def text(self) -> str:
        """The rule and its caveat, as the dry run prints them."""
        return f"{self.rule}; {self.caveat}" if self.caveat else self.rule


@dataclass(frozen=True)
class DryRun:
    inventory: str
    nodes: int
    mode: Mode
    transport: str
    rounds: int
    pairs: int
    max_pairs_per_round: int
    batches: int  # sum over rounds of the batches each round is split into
    plan: ProbePlan
    phases: tuple[PhaseEstimate, ...]
    fabric: str  # the assumption the bulk caps came from
    bulk_pairs: int
    bulk_waves: int
    model: DurationModel
    preview: tuple[tuple[tuple[str, str], ...], ...]  # first rounds, first pairs of each
    preview_sizes: tuple[int, ...]  # how many pairs each previewed round has
    rails: str = "none"  # --rails (docs/rails.md)
    rail_plans: tuple[rails_mod.RailPlan, ...] = ()  # per rail: endpoints, pairs
    calibrated_by: tuple[str, ...] = ()  # --calibrate-from: the earlier runs used
    agents: int = 0  # one per node (a node's NICs share its agent)

    @property
    def estimated_s(self) -> float:
        return sum(p.seconds for p in self.phases)

    @property
    def range_s(self) -> tuple[float, float] | None:
        """The duration expected, when calibrated (uncalibrated phases at their estimate)."""
        if not self.calibrated_by:
            return None
        low = sum(p.seconds if p.low_s is None else p.low_s for p in self.phases)
        return low, sum(p.seconds if p.high_s is None else p.high_s for p in self.phases)


def local_cores(nodes: Sequence[Node]) -> int:
    """This host's cores when every agent is on a loopback address (then all of them run
    here, beside the coordinator, and share those cores), else 0."""
    if not nodes or not all(_loopback(n.address) for n in nodes):
        return 0
    return len(os.sched_getaffinity(0))


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def _host_codes(nodes: tuple[Node, ...]) -> np.ndarray:
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(n.address, len(codes)) for n in nodes], dtype=np.int64)


def _round_loads(plan: Schedule, parallel: int | None) -> list[tuple[int, int]]:
    """Per round: (batches, most pairs measuring at once in one of them)."""
    host = _host_codes(plan.nodes)
    out = []
    for pos in plan.rounds_positions():
        if not len(pos):
            continue
        a, b = host[pos[:, 0]], host[pos[:, 1]]
        busiest = int(np.bincount(np.concatenate([a, b[b != a]])).max())
        batches = max(busiest, math.ceil(len(pos) / parallel) if parallel else 1)
        out.append((batches, math.ceil(len(pos) / batches)))
    return out


# Above this many pairs the bulk waves are packed for an even sample of the rounds and
# scaled up: packing is per pair in Python, and a 10,000-node mesh has 50 million pairs
# (over 300 s and gigabytes for an estimate). Rounds of one schedule are alike, and each
# round is packed on its own, so the sample's waves per round stand for every round's.
MAX_PACKED_PAIRS = 100_000


def _sampled_rounds(sched: Schedule, exact: bool) -> tuple[list[int], float]:
    """The rounds to pack (every one, or an even sample) and the factor that scales their
    waves up to the whole schedule."""
    total = sched.round_count
    per = max(1, sched.max_round_pairs())
    if exact or total * per <= MAX_PACKED_PAIRS:
        return list(range(total)), 1.0
    want = max(1, MAX_PACKED_PAIRS // per)
    picked = sorted({int(x) for x in np.linspace(0, total - 1, want).round()})
    return picked, total / len(picked)


def _bulk_waves(
    sched: Schedule, cfg: ScheduleConfig, plan: ProbePlan, fabric: Fabric
) -> tuple[int, list[int]]:
    """(pairs with bulk, each wave's pairs) as the run would pack them, every ping-pong
    succeeding; from a sample of the rounds on a large schedule (``MAX_PACKED_PAIRS``)."""
    aligned = cfg.schedule is Timing.ALIGNED
    # aligned with a per-node or per-rack-pair coverage: its quotas span every round
    picked, scale = _sampled_rounds(sched, aligned and cfg.bulk_pairs.kind != "all")
    nodes = sched.nodes
    rounds: list[Sequence[Pair]] = [
        [(nodes[a], nodes[b]) for a, b in sched.round_positions(r).tolist()] for r in picked
    ]
    waves = phases.planned_bulk_waves(rounds, cfg, plan, nodes, fabric)
    pairs, sizes = sum(map(len, waves)), [len(w) for w in waves]
    if scale != 1.0 and sizes:
        sizes = np.resize(np.array(sizes), round(len(sizes) * scale)).tolist()
        pairs = round(pairs * scale)
    return pairs, sizes


def estimate_phases(
    sched: Schedule,
    transport: str,
    plan: ProbePlan,
    parallel: int | None = None,
    cfg: ScheduleConfig | None = None,
    fabric: Fabric | None = None,
    interference_fraction: float = sampling.DEFAULT_FRACTION,
    interference_minimum: int = sampling.DEFAULT_MINIMUM,
    model: DurationModel | None = None,
) -> tuple[tuple[PhaseEstimate, ...], int, int, int]:
    """(phases, batches, pairs with bulk, bulk waves) of a run of ``sched``."""
    model = model or DurationModel(shared_cores=local_cores(sched.nodes))
    cfg, fabric = cfg or ScheduleConfig(), fabric or Fabric()
    n = len({x.node_name for x in sched.nodes})  # agents: one per node, not per NIC
    # each pass checks its agents in groups of ``t`` at once
    groups = [min(t, n - i) for t in CHECK_THREADS for i in range(0, n, t)]
    checks = sum(model.contention("preflight", k) for k in groups)
    serial = n * model.check_each_s
    out = [
        PhaseEstimate(
            "preflight", n, model.check_s, max(checks * model.check_s, serial),
            f"one pass over {n:,} agents, {'/'.join(map(str, CHECK_THREADS))} at once"
            + _sharing(model, "preflight")
            + (f", at least {model.check_each_s * 1e3:.3g} ms each, one at a time"
               if serial > checks * model.check_s else ""),
        )
    ]  # fmt: skip
    loads = _round_loads(sched, parallel)
    batches = sum(b for b, _ in loads)
    pingpong_s = model.pingpong_s(plan, transport)
    link = min([fabric.nic(x) for x in sched.nodes] or [DEFAULT_NIC_GBPS])
    bulk_s = model.bulk_s(plan, transport, link)
    one_request = cfg.schedule is Timing.UNALIGNED or not plan.bulk
    unit = (
        pingpong_s + (bulk_s - model.request_s if plan.bulk else 0.0) if one_request else pingpong_s
    )
    what = "ping-pong and bulk in one request" if one_request and plan.bulk else "ping-pong"
    # a combined request is mostly its bulk cells when it has any
    phase = "bulk" if one_request and plan.bulk else "pingpong"
    slowed = sum(b * model.contention(phase, k) for b, k in loads)
    out.append(
        PhaseEstimate(
            "pingpong", batches, unit, slowed * unit,
            f"{sched.round_count:,} rounds in {batches:,} batches x one {what} request"
            + _sharing(model, phase),
        )
    )  # fmt: skip
    bulk_pairs = bulk_waves = 0
    if plan.bulk and not one_request:
        bulk_pairs, sizes = _bulk_waves(sched, cfg, plan, fabric)
        bulk_waves = len(sizes)
        slowed = sum(model.contention("bulk", k) for k in sizes)
        out.append(
            PhaseEstimate(
                "bulk", bulk_waves, bulk_s, slowed * bulk_s,
                f"{bulk_pairs:,} pairs ({cfg.bulk_pairs.label}) in {bulk_waves:,} waves x one "
                f"bulk request at <= {link:g} Gbit/s" + _sharing(model, "bulk"),
            )
        )  # fmt: skip
    if interference_minimum > 0:
        sample = sampling.sample_size(sched.pair_count, interference_fraction, interference_minimum)
        out.append(
            PhaseEstimate(
                "interference", sample, pingpong_s, sample * pingpong_s,
                f"{sample:,} sampled paths one at a time x one ping-pong request",
            )
        )  # fmt: skip
    return tuple(out), batches, bulk_pairs, bulk_waves


def shape_of(
    sched: Schedule,
    transport: str,
    plan: ProbePlan,
    parallel: int | None,
    cfg: ScheduleConfig | None,
    fabric: Fabric | None,
    model: DurationModel,
    interference_sample: int,
    steps: stepcosts.StepPlan | None = None,
) -> calibration.Shape:
    """What ``calibration.work_s`` prices: the run's structure, and the stated model's
    request time and cell rates for what no earlier run measured."""
    fabric = fabric or Fabric()
    link = min([fabric.nic(x) for x in sched.nodes] or [DEFAULT_NIC_GBPS])

    def model_gbps(chunk: int, depth: int) -> float:
        stream = budget.stream_gbps(chunk, depth, link, budget.REFERENCE_RTT_US)
        return min(model.goodput_gbps[transport], stream)

    return calibration.Shape(
        sched, plan, parallel, cfg or ScheduleConfig(), fabric, interference_sample,
        model.request_s, model_gbps, steps,
    )  # fmt: skip


def sample_of(estimated: Sequence[PhaseEstimate]) -> int:
    return next((p.count for p in estimated if p.name == "interference"), 0)


def calibrated_phases(
    estimated: Sequence[PhaseEstimate], shape: calibration.Shape, cal: calibration.Calibration
) -> tuple[PhaseEstimate, ...]:
    """``estimated`` with every phase an earlier run measured calibrated by it."""
    got = calibration.calibrate({p.name: p.seconds for p in estimated}, shape, cal)
    out = []
    for p in estimated:
        c = got.get(p.name)
        if c is None:
            out.append(
                dataclasses.replace(p, rule=p.rule + "; uncalibrated (no earlier run of it)")
            )
            continue
        runs = "1 earlier run" if c.runs == 1 else f"{c.runs} earlier runs"
        how = (
            "its measured seconds per item + what they move at its measured rates"
            if p.name in stepcosts.ITEMISED
            else "measured rates x its own factor"
        )
        caveat = ""
        if c.unknown and shape.steps is not None:
            caveat = stepcosts.unknown_caveat(shape.steps, c.unknown)
        out.append(
            dataclasses.replace(
                p, seconds=c.seconds, unit_s=c.seconds / max(1, p.count), low_s=c.low_s,
                high_s=c.high_s, calibrated_by=c.runs, caveat=caveat,
                rule=p.rule + f"; calibrated by {runs} ({how})",
            )
        )  # fmt: skip
    return tuple(out)


def work_record(
    estimated: Sequence[PhaseEstimate], shape: calibration.Shape, rates: calibration.Rates
) -> dict[str, Any]:
    """``run.schedule.calibration`` of a finished run: ``work_s``, its phases priced at its
    own rates (pre-flight and fan-in: the stated model), what its actual times are divided
    by; ``items``, the units and moving seconds of the steps after the pairs
    (``stepcosts``), what a later estimate takes their measured item cost from."""
    skip = (*calibration.RATED, *stepcosts.ITEMISED)
    work = {p.name: p.seconds for p in estimated if p.name not in skip}
    work |= calibration.work_s(shape, rates)
    out: dict[str, Any] = {"work_s": {k: round(v, 6) for k, v in work.items()}}
    if shape.steps is not None:
        engine = shape.steps.engine.name.value if shape.steps.engine is not None else None
        found = stepcosts.works(shape.steps, rates.steps)
        items = {
            name: w.to_dict(engine if name != "multirail" else None) for name, w in found.items()
        }
        if items:
            out["items"] = items
    return out


def _sharing(model: DurationModel, phase: str) -> str:
    if model.shared_cores <= 0:
        return ""
    return (
        f", pairs at once sharing {model.shared_cores} cores"
        f" ({model.pair_cores.get(phase, 1.0):g} per pair)"
    )


# the phases in the order a run's steps take them (run/coordinator.py STEPS)
RUN_ORDER = (
    "preflight", "pingpong", "bulk", "engine", "fanin", "fanin_engine", "multirail",
    "interference",
)  # fmt: skip


def in_run_order(estimated: Sequence[PhaseEstimate]) -> tuple[PhaseEstimate, ...]:
    return tuple(sorted(estimated, key=lambda p: RUN_ORDER.index(p.name)))


def step_phases(
    sched: Schedule,
    nodes: Sequence[Node],
    transport: str,
    plan: ProbePlan,
    fabric: Fabric,
    model: DurationModel,
    engine: EnginePlan | None = None,
    fanin: FaninConfig | None = None,
    multirail: int = 0,
) -> tuple[tuple[PhaseEstimate, ...], stepcosts.StepPlan]:
    """The engine, engine fan-in and multirail phases of a run of ``sched``
    (``planning.stepcosts``), and the plan of those steps that calibration prices."""
    link = min([fabric.nic(x) for x in sched.nodes] or [DEFAULT_NIC_GBPS])
    steps = stepcosts.plan_steps(
        nodes, sched.pair_count, link, transport, model.goodput_gbps[transport],
        model.request_s, model.contention, fabric, plan, engine, fanin, multirail,
    )  # fmt: skip
    out = []
    for name, work in stepcosts.works(steps).items():
        span = stepcosts.stated_range(steps, name, work)
        shared = _sharing(model, "bulk" if name == "multirail" else "engine")
        out.append(
            PhaseEstimate(
                name, work.count, work.seconds / max(1, work.count), work.seconds,
                stepcosts.rule(steps, name, work) + shared,
                low_s=span[0] if span else None, high_s=span[1] if span else None,
                caveat=stepcosts.caveat(steps, name) if span else "",
            )
        )  # fmt: skip
    return tuple(out), steps


def fanin_phase(
    nodes: Sequence[Node],
    cfg: FaninConfig,
    transport: str,
    fabric: Fabric,
    model: DurationModel,
) -> PhaseEstimate:
    """The sweep (run --fanin): per storage node and level, one request time plus every
    reader's chunks through the storage node's link (its NIC rate, at most the model's
    goodput): the link is what the readers share."""
    storage = [n for n in nodes if n.role is Role.STORAGE]
    readers = sum(n.role in (Role.COMPUTE, Role.ANY) for n in nodes)
    ranks = PROFILES[cfg.profile].ranks
    seconds, levels = 0.0, 0
    for st in storage:
        rate = min(model.goodput_gbps[transport], fabric.nic(st)) * 1e9
        for k in cfg.levels:
            if k <= readers:
                levels += 1
                seconds += model.request_s + k * ranks * cfg.chunks * cfg.chunk_bytes * 8 / rate
    return PhaseEstimate(
        "fanin", levels, seconds / levels if levels else 0.0, seconds,
        f"{len(storage):,} storage node(s) x levels {','.join(map(str, cfg.levels))} "
        f"({cfg.profile}, {ranks} rank(s) x {cfg.chunks:,} chunks of "
        f"{cfg.chunk_bytes:,} bytes per reader), each through the storage node's link",
    )  # fmt: skip


def dry_run(
    inventory: str,
    nodes: tuple[Node, ...],
    mode: Mode,
    transport: str,
    plan: ProbePlan,
    parallel: int | None = None,
    sample_k: int = DEFAULT_SAMPLE_K,
    model: DurationModel | None = None,
    cfg: ScheduleConfig | None = None,
    fabric: Fabric | None = None,
    interference_fraction: float = sampling.DEFAULT_FRACTION,
    interference_minimum: int = sampling.DEFAULT_MINIMUM,
    rails: rails_mod.Rails = rails_mod.Rails.NONE,
    fanin: FaninConfig | None = None,
    cal: calibration.Calibration | None = None,
    engine: EnginePlan | None = None,
    multirail: int = 0,
) -> DryRun:
    model = model or DurationModel(shared_cores=local_cores(nodes))
    fabric = fabric or Fabric()
    sched = rails_mod.build(nodes, mode, rails, sample_k)
    ends = sched.nodes
    estimated, batches, bulk_pairs, bulk_waves = estimate_phases(
        sched, transport, plan, parallel, cfg, fabric,
        interference_fraction, interference_minimum, model,
    )  # fmt: skip
    if fanin is not None:
        estimated = (*estimated, fanin_phase(nodes, fanin, transport, fabric, model))
    after, steps = step_phases(
        sched, nodes, transport, plan, fabric, model, engine, fanin, multirail
    )
    estimated = in_run_order((*estimated, *after))
    if cal is not None and cal.runs:
        shape = shape_of(
            sched, transport, plan, parallel, cfg, fabric, model, sample_of(estimated), steps
        )
        estimated = calibrated_phases(estimated, shape, cal)
    preview = tuple(
        tuple((ends[a].name, ends[b].name) for a, b in sched.round_positions(r)[:PREVIEW_PAIRS])
        for r in range(min(PREVIEW_ROUNDS, sched.round_count))
    )
    sizes = tuple(len(sched.round_positions(r)) for r in range(len(preview)))
    return DryRun(
        inventory=inventory,
        nodes=len(nodes),
        mode=mode,
        transport=transport,
        rounds=sched.round_count,
        pairs=sched.pair_count,
        max_pairs_per_round=sched.max_round_pairs(),
        batches=batches,
        plan=plan,
        phases=estimated,
        fabric=fabric.assumption(),
        bulk_pairs=bulk_pairs,
        bulk_waves=bulk_waves,
        model=model,
        preview=preview,
        preview_sizes=sizes,
        rails=rails.value,
        rail_plans=rails_mod.rail_plans(sched),
        calibrated_by=cal.sources if cal is not None else (),
        agents=len({n.node_name for n in nodes}),
    )


def phases_to_dict(estimated: Sequence[PhaseEstimate]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in estimated:
        one: dict[str, Any] = {
            "count": p.count, "unit_s": round(p.unit_s, 6), "seconds": round(p.seconds, 3)
        }  # fmt: skip
        if p.low_s is not None and p.high_s is not None:  # 0 runs: the stated model's range
            one |= {"low_s": round(p.low_s, 3), "high_s": round(p.high_s, 3)}
            one["calibrated_by"] = p.calibrated_by
        out[p.name] = one
    out["total_s"] = round(sum(p.seconds for p in estimated), 3)
    return out


def dry_run_to_dict(d: DryRun) -> dict[str, object]:
    return {
        "dry_run": True,
        "inventory": d.inventory,
        "nodes": d.nodes,
        "mode": d.mode.value,
        "transport": d.transport,
        "rounds": d.rounds,
        "pairs": d.pairs,
        "max_pairs_per_round": d.max_pairs_per_round,
        "batches": d.batches,
        "bulk_pairs": d.bulk_pairs,
        "bulk_waves": d.bulk_waves,
        "fabric": d.fabric,
        "plan": plan_to_dict(d.plan),
        "estimate": {
            "duration_s": round(d.estimated_s, 3),
            **({"range_s": [round(x, 3) for x in d.range_s]} if d.range_s else {}),
            "calibrated_by": list(d.calibrated_by),
            "phases": phases_to_dict(d.phases),
            "model": d.model.to_dict(d.transport),
        },
        "agents": d.agents,
        "preview": [[list(p) for p in r] for r in d.preview],
        "rails": d.rails,
        "per_rail": [
            {
                "rail": r.rail,
                "endpoints": [{"name": n, "address": a} for n, a in r.endpoints],
                "pairs": r.pairs,
            }
            for r in d.rail_plans
        ],
    }
