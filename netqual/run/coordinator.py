"""``netqual run``: schedule the pairs, ask agents to probe, judge, write the results files.

A failing path is data (an ``unsafe`` PathResult naming the node and the failure); only a
run where no agent answers at all is an error. Each finished pair is appended to
``results.jsonl`` at once, so a crash loses nothing already measured. The run returns its
Results; rendering them (terminal, report.html) is the caller's job.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import platform
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from netqual import __version__, counter_evidence, interrupts
from netqual.agent.probe_request import SilentAgentError, request_probe
from netqual.agent.wire import hostpeer
from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel, connect
from netqual.agent.wire.sessions import Sessions
from netqual.analysis import fleet, interference, localise
from netqual.analysis.matrix import tier_of
from netqual.analysis.plausible import check_path
from netqual.analysis.policy import judge
from netqual.analysis.stats import bulk_stats, rtt_stats
from netqual.errors import ErrorCode, NetqualError, NoAgentsError, PeerError
from netqual.fanin_model import FaninConfig, FaninLevel, FaninResult
from netqual.fleet_model import FleetPolicy, FleetResult
from netqual.hostpath import HostAudit
from netqual.models import (
    Interference,
    Mode,
    Node,
    NotMeasured,
    PathResult,
    Policy,
    PreflightReport,
    ProbePlan,
    RunMeta,
    Verdict,
)
from netqual.multirail_model import DEFAULT_MIN_SHARE, MultiRail
from netqual.outfiles import make_out_dir, open_append
from netqual.pathtable import PathTable
from netqual.planning import estimate, phases, sampling, schedule
from netqual.planning import rails as rails_mod
from netqual.planning.budget import BulkBudget
from netqual.planning.fabric import Fabric
from netqual.planning.phases import Phase, ScheduleConfig
from netqual.planning.schedule import Pair
from netqual.progress import NullObserver, RunObserver, Stage
from netqual.results import journal, summarize, write_json
from netqual.run import fanin as fanin_run
from netqual.run import multirail as multirail_run
from netqual.run import resume as resume_mod
from netqual.runpaths import RunDir
from netqual.runresults import Results
from netqual.transports import TransportKind, TransportOptions
from netqual.workload.judge import judged
from netqual.workload.model import Workload


@dataclass(frozen=True)
class RunConfig:
    nodes: tuple[Node, ...]
    transport: TransportKind = TransportKind.TCP
    mode: Mode = Mode.FULL_MESH
    policy: Policy = field(default_factory=Policy)
    plan: ProbePlan = field(default_factory=ProbePlan)
    token: bytes | None = None
    parallel: int | None = None  # max concurrent pairs per round; None = all disjoint pairs
    sample_k: int = 2  # sampled mode: pairs between every two racks
    transport_options: TransportOptions = field(default_factory=TransportOptions)
    inventory: str | None = None
    workload: Workload | None = None  # also judge each path by this workload's chunk
    # netqual retest: measure exactly these (src, dst) pairs instead of the mode's plan
    pairs: tuple[tuple[str, str], ...] | None = None
    retest_of: str | None = None  # the run directory being re-tested
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    fabric: Fabric = field(default_factory=Fabric)  # stated NIC and uplink rates
    preflight_s: float = 0.0  # the CLI's pre-flight pass before the run (run.schedule.actual)
    # Interference check: sample max(minimum, fraction of paths); minimum 0 skips it.
    interference_fraction: float = sampling.DEFAULT_FRACTION
    interference_minimum: int = sampling.DEFAULT_MINIMUM
    interference_seed: int | None = None
    interference_tolerance: float = interference.TOLERANCE  # run/alone p99 beyond noise
    fanin: FaninConfig | None = None  # run --fanin: the sweep after the pairs (fanin_run)
    rails: rails_mod.Rails = rails_mod.Rails.NONE  # probe NIC by NIC (docs/rails.md)
    multirail: int = 0  # run --multirail N: node pairs read over 1..R rails at once
    multirail_share: float = DEFAULT_MIN_SHARE  # what an added rail must add of its line rate

    @property
    def endpoints(self) -> tuple[Node, ...]:
        """What the paths run between: the nodes, or with rails every NIC of every node."""
        return rails_mod.endpoint_nodes(self.nodes, self.rails)

    fleet_policy: FleetPolicy = field(default_factory=FleetPolicy)  # [fleet] of the policy


def pair_schedule(cfg: RunConfig) -> schedule.Schedule:
    if cfg.pairs is not None:
        return schedule.explicit(cfg.endpoints, cfg.pairs, cfg.mode)
    return rails_mod.build(cfg.nodes, cfg.mode, cfg.rails, cfg.sample_k)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def clock_info() -> dict[str, object]:
    info = time.get_clock_info("perf_counter")
    return {
        "function": "time.perf_counter_ns",
        "implementation": info.implementation,
        "resolution_s": info.resolution,
        "monotonic": info.monotonic,
    }


def host_info() -> dict[str, object]:
    return {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
    }


def check_agents(
    nodes: Sequence[Node],
    token: bytes | None,
    timeout_s: float = 5.0,
    idle_wait_s: float = 0.0,
    busy: dict[str, int] | None = None,
    hosts: dict[str, HostAudit] | None = None,
) -> dict[str, str]:
    """Ask every agent for ``info`` in parallel; returns {node name: problem} for failures.

    ``idle_wait_s``: ask again until the agent runs no probe (``measuring`` 0) for at
    most that long (``--resume`` after a killed coordinator: its probes end within a
    second). Agents still measuring then are noted in ``busy`` (node -> probes).
    ``hosts``: each agent's host path audit goes there (node -> audit); an agent whose
    audit is unusable gets one with ``error`` set, and is not counted as failed."""

    # A node's endpoints (docs/rails.md, a re-test of a --rails run) share its one agent.
    nodes = list({n.node_name: n for n in nodes}.values())

    def one(node: Node) -> str | None:
        name = node.node_name
        try:
            ch, _ = connect(
                node.control_address, node.port, token, name, timeout_s, expect_name=node.identity
            )
            with ch:
                ch.set_timeout(timeout_s)
                end = time.monotonic() + idle_wait_s
                while True:
                    info = ch.request("info", reply="info")
                    running = Fields(info, "info", name).integer("measuring", 0, 1 << 20, 0)
                    if not running or time.monotonic() >= end:
                        break
                    time.sleep(IDLE_POLL_S)
                if running and busy is not None:
                    busy[name] = running
                if hosts is not None:
                    hosts[name] = _host_audit(ch, name)
                    if hosts[name].error is not None:
                        return None  # the agent may have ended the session on it: no bye
                ch.send("bye")
        except (NetqualError, OSError) as err:
            return str(err)
        return None

    with ThreadPoolExecutor(max_workers=min(32, max(1, len(nodes)))) as pool:
        results = dict(zip((n.node_name for n in nodes), pool.map(one, nodes), strict=True))
    return {name: problem for name, problem in results.items() if problem is not None}


def _host_audit(ch: Channel, node: str) -> HostAudit:
    try:
        return hostpeer.from_peer(ch.request("hostpath", reply="hostpath"), node, node)
    except NetqualError as err:  # a bad field (named), or an agent that cannot audit
        return HostAudit(node, error=str(err))


IDLE_POLL_S = 0.1
RESUME_IDLE_WAIT_S = 10.0  # a killed coordinator's probes end within 1 s (CoordinatorWatch)


def phase_plan(plan: ProbePlan, phase: Phase) -> ProbePlan:
    """The plan of one phase's request. A bulk-only request keeps a single unkept ping-pong
    round (iterations 1, no warm-up) so every agent version accepts it."""
    if phase is Phase.PINGPONG:
        return dataclasses.replace(plan, bulk=False)
    if phase is Phase.BULK:
        return dataclasses.replace(plan, iterations=1, warmup=0)
    return plan


def measure_pair(
    src: Node,
    dst: Node,
    cfg: RunConfig,
    phase: Phase = Phase.PROBE,
    silent: dict[str, str] | None = None,
    sessions: Sessions | None = None,
) -> PathResult:
    """One path. ``silent``: where a source that never answers is noted (node -> why);
    ``sessions``: the run's open agent sessions (agent.wire.sessions)."""
    started = now_iso()
    t0 = time.monotonic()
    plan = phase_plan(cfg.plan, phase)
    try:
        out = request_probe(
            src,
            dst,
            cfg.transport,
            plan,
            cfg.token,
            plan.timeout_s + 15.0,
            cfg.transport_options,
            sessions,
        )
    except PeerError as err:
        reason = err.message if err.code != "protocol" else str(err)
        if err.code is ErrorCode.PEER_SILENT and silent is not None:
            silent[dst.node_name] = f"never answered an earlier probe of this run ({reason})"
        return _failed(src, dst, cfg, reason, started, t0, err.code in CONFIGURATION_CODES)
    except SilentAgentError as err:
        if silent is not None:
            silent[src.node_name] = f"never answered an earlier probe of this run ({err})"
        return _failed(src, dst, cfg, str(err), started, t0)
    except NetqualError as err:
        return _failed(src, dst, cfg, str(err), started, t0, err.code in CONFIGURATION_CODES)
    except OSError as err:
        return _failed(src, dst, cfg, str(err), started, t0)
    if len(out.raw.rtt_ns) == 0:
        return _failed(src, dst, cfg, f"{src.name} returned no samples", started, t0)
    rtt = rtt_stats(out.raw.rtt_ns)
    bulk = tuple(bulk_stats(b) for b in out.raw.bulk)
    verdict, reasons = judge(cfg.policy, rtt, bulk)
    details = dict(out.raw.details)
    details["initiator"] = out.initiator
    if isinstance(details.get("counters"), dict):
        moved = counter_evidence.probe_bytes(plan)
        details["counters"] = {**details["counters"], "probe_bytes": moved}
        nics = (src.nic.name if src.nic else None, dst.nic.name if dst.nic else None)
        details["carried_by"] = counter_evidence.carried_by(details, cfg.transport.value, *nics)
    if out.forward_hops is not None:
        details["forward_hops"] = out.forward_hops
    path = PathResult(
        src=src.name,
        dst=dst.name,
        transport=cfg.transport.value,
        verdict=verdict,
        reasons=reasons,
        rtt=rtt,
        bulk=bulk,
        hops=out.hops,
        tier=tier_of(src, dst),
        error=None,
        started_at=started,
        duration_s=time.monotonic() - t0,
        details=details,
        **nic_fields(src, dst),
    )
    if phase is Phase.BULK:
        return path  # half a path: combine_phases checks and judges the whole one
    return judged(check_path(path), cfg.workload)


def nic_fields(src: Node, dst: Node) -> dict[str, Any]:
    """A path's ``src_nic``, ``dst_nic`` and ``rail``: none unless both ends are NICs."""
    if src.nic is None or dst.nic is None:
        return {}
    rail = src.nic.rail if src.nic.rail == dst.nic.rail else None
    return {"src_nic": src.nic.name, "dst_nic": dst.nic.name, "rail": rail}


def combine_phases(pingpong: PathResult, bulk: PathResult, cfg: RunConfig) -> PathResult:
    """One path from its ping-pong request and its bulk-only request (judged on both)."""
    details = phases.merged_details(pingpong, bulk)
    duration = (pingpong.duration_s or 0.0) + (bulk.duration_s or 0.0)
    if is_configuration(bulk):
        return dataclasses.replace(bulk, error=f"bulk phase: {bulk.error}")
    if bulk.error is not None:
        reason = f"bulk phase: {bulk.error}"
        verdict, reasons = judge(cfg.policy, None, error=reason)
        path = dataclasses.replace(
            pingpong, verdict=verdict, reasons=reasons, error=reason, details=details,
            duration_s=duration,
        )  # fmt: skip
    else:
        verdict, reasons = judge(cfg.policy, pingpong.rtt, bulk.bulk)
        path = dataclasses.replace(
            pingpong, verdict=verdict, reasons=reasons, bulk=bulk.bulk, details=details,
            duration_s=duration,
        )  # fmt: skip
    return judged(check_path(path), cfg.workload)


# A refusal for these reasons is the set-up's (token, identity, device, limits), not the
# network's: the pair is "not measured (configuration)", never an unsafe path.
CONFIGURATION_CODES = frozenset({ErrorCode.AUTH, ErrorCode.LIMIT, ErrorCode.UNAVAILABLE})
CONFIGURATION = "configuration"


def is_configuration(path: PathResult) -> bool:
    """The pair failed for a configuration reason: ``path`` carries no network verdict."""
    return path.details.get("not_measured") == CONFIGURATION


def not_measured(path: PathResult) -> NotMeasured:
    return NotMeasured(path.src, path.dst, path.error or "configuration failure", CONFIGURATION)


def _failed(
    src: Node,
    dst: Node,
    cfg: RunConfig,
    reason: str,
    started: str,
    t0: float,
    configuration: bool = False,
) -> PathResult:
    verdict, reasons = judge(cfg.policy, None, error=reason)
    path = PathResult(
        src=src.name,
        dst=dst.name,
        transport=cfg.transport.value,
        verdict=verdict,
        reasons=reasons,
        tier=tier_of(src, dst),
        error=reason,
        started_at=started,
        duration_s=time.monotonic() - t0,
        details={"not_measured": CONFIGURATION} if configuration else {},
        **nic_fields(src, dst),
    )
    return judged(path, cfg.workload)


def run_identity(cfg: RunConfig) -> dict[str, Any]:
    """What a run measures; a resumed run must match it (see netqual.run.resume)."""
    ident = resume_mod.identity(
        cfg.nodes, cfg.mode, cfg.sample_k, cfg.transport.value, cfg.policy, cfg.plan
    )
    if cfg.pairs is not None:
        ident["pairs"] = [list(p) for p in cfg.pairs]
    if cfg.rails is not rails_mod.Rails.NONE:
        ident["rails"] = cfg.rails.value
    if cfg.fanin is not None:  # a resumed sweep keeps its levels: the same sweep only
        ident["fanin"] = dataclasses.asdict(cfg.fanin) | {"levels": list(cfg.fanin.levels)}
    return ident


@dataclass
class _Journal:
    """The run's results.jsonl while it runs, and what it holds so far."""

    file: TextIO | None
    paths: list[PathResult]  # finished pairs, in the order they finished
    pending: dict[tuple[str, str], PathResult]  # ping-pong done, bulk phase not yet
    # configuration failures: not measurements, never journalled (--resume tries again)
    skipped: list[NotMeasured] = field(default_factory=list)

    @classmethod
    def of(cls, prior: journal.Journal, file: TextIO | None = None) -> _Journal:
        return cls(file, list(prior.done.values()), dict(prior.pending))

    def finished(self, path: PathResult) -> None:
        assert self.file is not None
        if is_configuration(path):
            self.pending.pop(path.key, None)
            self.skipped.append(not_measured(path))
            return
        with interrupts.atomic():
            journal.append_path(self.file, path)
            self.pending.pop(path.key, None)
            self.paths.append(path)

    def pingpong(self, path: PathResult) -> None:
        assert self.file is not None
        with interrupts.atomic():
            journal.append_pingpong(self.file, path)
            self.pending[path.key] = path


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
    ``preflight``: the pre-flight check the caller ran (``netqual run`` with
    --keep-going); its failed agents are not asked again. Without it (retest, demo), the
    agents are asked here. Either way an agent that fails at the start is a configuration
    problem: its pairs are listed as not measured (configuration), never unsafe paths."""
    stages = _Stages(observer or NullObserver())
    if len(cfg.nodes) < 2:
        raise NoAgentsError("the inventory needs at least two nodes")
    prior = resume.journal if resume else journal.Journal()
    started = (resume.started_at if resume else "") or now_iso()
    pairing = pair_schedule(cfg)
    make_out_dir(out_dir)
    resume_mod.write_identity(out_dir, run_identity(cfg), started)
    budget = phases.resolve(cfg.schedule, cfg.plan, cfg.endpoints, cfg.fabric)
    spent = _Spent(preflight_s=cfg.preflight_s)
    spent.agents = preflight.agents() if preflight is not None else {}
    stopped: Stage | None = None
    inter: Interference | None = None
    with open_append(out_dir / resume_mod.JSONL, new=resume is None) as f:
        rec = _Journal.of(prior, f)
        try:
            _measure(cfg, pairing, budget, prior, rec, stages, spent, resume is not None, preflight)
            if cfg.fanin is not None:
                _fanin(cfg, spent, prior, f, stages)
            if cfg.multirail > 0:
                spent.multirail = _multirail(cfg)
            inter_at = time.monotonic()
            try:
                if cfg.interference_minimum > 0:
                    inter = _interference(cfg, rec.paths, prior, f, stages)
            finally:
                spent.interference_s = time.monotonic() - inter_at
        except KeyboardInterrupt:
            stopped = stages.stage
    fleet_found = fleet_of(cfg, preflight)
    return _finalise(
        cfg, out_dir, pairing, started, budget, rec, inter, stopped, spent, fleet_found
    )


def fleet_of(cfg: RunConfig, preflight: PreflightReport | None) -> FleetResult | None:
    """The configuration check over the snapshots the pre-flight collected (none without
    a pre-flight: retest and demo ask their agents here, not in a pre-flight)."""
    if preflight is None:
        return None
    snaps = [n.snapshot for n in preflight.nodes if n.snapshot is not None]
    if not snaps:  # agents that do not answer "snapshot" (a simulation): no claim at all
        return None
    roles = {n.name: n.role.value for n in cfg.nodes}
    return fleet.evaluate(snaps, roles, cfg.fleet_policy, {n.name: n.nics for n in cfg.nodes})


def finalise_interrupted(
    cfg: RunConfig, out_dir: Path, resume: resume_mod.Resume | None, stage: Stage
) -> Results:
    """A run stopped before the coordinator started (in the command's pre-flight check):
    results.json and the identity for what exists (a resumed run's pairs, or none)."""
    prior = resume.journal if resume else journal.Journal()
    started = (resume.started_at if resume else "") or now_iso()
    make_out_dir(out_dir)
    resume_mod.write_identity(out_dir, run_identity(cfg), started)
    if not (out_dir / resume_mod.JSONL).exists():
        with open_append(out_dir / resume_mod.JSONL, new=True):
            pass
    budget = phases.resolve(cfg.schedule, cfg.plan, cfg.endpoints, cfg.fabric)
    spent = _Spent(preflight_s=cfg.preflight_s)
    rec = _Journal.of(prior)
    return _finalise(cfg, out_dir, pair_schedule(cfg), started, budget, rec, None, stage, spent)


def _measure(
    cfg: RunConfig,
    pairing: schedule.Schedule,
    budget: BulkBudget,
    prior: journal.Journal,
    rec: _Journal,
    observer: RunObserver,
    spent: _Spent,
    resumed: bool,
    preflight: PreflightReport | None,
) -> None:
    """The pre-flight's info round, then every pair the journal does not hold finished."""
    observer.phase(Stage.PREFLIGHT, 0, len(cfg.nodes))
    checked_at = time.monotonic()
    # Agents that failed the caller's pre-flight check are not asked again. The others are
    # (--resume waits for busy agents); one that fails now is refused the same way: its
    # pairs are not measured (configuration), never unsafe paths.
    failed = {n.node: "; ".join(n.problems) for n in preflight.failed} if preflight else {}
    down = check_agents(
        [n for n in cfg.nodes if n.node_name not in failed],
        cfg.token,
        idle_wait_s=RESUME_IDLE_WAIT_S if resumed else 0.0,
        busy=spent.busy,
        hosts=spent.hosts,
    )
    refused = {k: f"{k} failed the pre-flight check: {v}" for k, v in failed.items()}
    refused |= {k: f"agent on {k} not answering at the start: {v}" for k, v in down.items()}
    down.update(failed)
    spent.preflight_s += time.monotonic() - checked_at
    if len(down) == len({n.node_name for n in cfg.nodes}):
        # Each problem already names its node ("gpu01 unreachable: ..."); don't repeat it.
        detail = "; ".join(v if v.startswith(k) else f"{k}: {v}" for k, v in down.items())
        raise NoAgentsError(detail)
    by_name = {n.name: n for n in cfg.endpoints}
    skip = prior.done.keys() | prior.pending.keys()

    # Nodes that took a probe and never answered: their later pairs are marked, not tried
    # (a full timeout each, every round).
    silent: dict[str, str] = {}

    def dead(a: str, b: str) -> str | None:
        a, b = _node_of(a), _node_of(b)
        gone = a if a in down else b if b in down else None
        if gone is None:
            return None
        if gone in silent:
            return f"not measured: agent on {gone} {down[gone]}"
        return f"agent on {gone} not answering: {down[gone]}"

    def live_rounds() -> Iterator[list[Pair]]:
        """Rounds as planned, less finished pairs; pairs with a dead agent fail here."""
        for all_pairs in pairing.rounds():
            pairs = [(a, b) for a, b in all_pairs if (a.name, b.name) not in skip]
            down.update(silent)  # a node silent in an earlier round stays out
            for a, b in pairs:
                na, nb = a.node_name, b.node_name
                gone = na if na in refused else nb if nb in refused else None
                if gone is not None:
                    why = refused[gone]
                    rec.skipped.append(NotMeasured(a.name, b.name, why, CONFIGURATION))
                    observer.item(_failed(a, b, cfg, why, "", 0.0, True))
                elif (reason := dead(a.name, b.name)) is not None:
                    failed = _failed(a, b, cfg, reason, now_iso(), time.monotonic())
                    rec.finished(failed)
                    observer.item(failed)
            yield [(a, b) for a, b in pairs if dead(a.name, b.name) is None]

    pending: list[tuple[Pair, PathResult]] = []
    for p in prior.pending.values():
        ps, pd = _node_of(p.src), _node_of(p.dst)
        if ps in refused or pd in refused:  # left pending: a later --resume does it
            rec.pending.pop(p.key)
            why = f"bulk phase: {refused[ps if ps in refused else pd]}"
            rec.skipped.append(NotMeasured(p.src, p.dst, why, CONFIGURATION))
        elif (reason := dead(p.src, p.dst)) is None:
            pending.append(((by_name[p.src], by_name[p.dst]), p))
        else:  # its bulk phase cannot run: finished as failed there
            rec.finished(combine_phases(p, dataclasses.replace(p, error=reason), cfg))
    sessions = Sessions(cfg.token)  # one open session per agent, reused (agent.wire.sessions)
    try:
        phases.execute(
            live_rounds(),
            phases.Totals(pairing.round_count, pairing.pair_count, len(prior.done), pending),
            cfg.schedule,
            budget,
            bulk=cfg.plan.bulk,
            parallel=cfg.parallel,
            work=phases.Work(
                measure=lambda a, b, phase: measure_pair(a, b, cfg, phase, silent, sessions),
                combine=lambda pp, bk: combine_phases(pp, bk, cfg),
                emit=rec.finished,
                emit_pingpong=rec.pingpong,
                observer=observer,
            ),
            tally=spent.tally,
        )
    finally:
        sessions.close()


def _node_of(name: str) -> str:
    """The node of a path end ("gpu01/eth1" -> "gpu01"): agents are up or down per node."""
    return rails_mod.split_endpoint(name)[0]


@dataclass
class _Spent:
    """What the phases took (``run.schedule.actual``), kept as they end."""

    preflight_s: float = 0.0
    tally: phases.Tally = field(default_factory=phases.Tally)
    interference_s: float = 0.0
    busy: dict[str, int] = field(default_factory=dict)  # --resume: probes agents still ran
    fanin: tuple[FaninResult, ...] = ()
    fanin_s: float = 0.0
    agents: dict[str, dict[str, object]] = field(default_factory=dict)  # run.agents
    hosts: dict[str, HostAudit] = field(default_factory=dict)  # each agent's host path audit
    multirail: tuple[MultiRail, ...] = ()  # run --multirail (docs/rails.md)


def _multirail(cfg: RunConfig) -> tuple[MultiRail, ...]:
    """Node pairs read over 1..R rails at once; not journalled: a resumed run reads again."""

    def bulk(a: Node, b: Node, plan: ProbePlan) -> PathResult:
        return measure_pair(a, b, dataclasses.replace(cfg, plan=plan), Phase.BULK)

    return tuple(
        multirail_run.measure_pair(a, b, cfg.plan, bulk, cfg.fabric, cfg.multirail_share)
        for a, b in multirail_run.node_pairs(cfg.nodes, cfg.multirail)
    )


def _fanin(
    cfg: RunConfig, spent: _Spent, prior: journal.Journal, f: TextIO, observer: RunObserver
) -> None:
    """The fan-in sweep, after every pair: it never runs beside the pair probes. Each level
    is journalled as it ends; a resumed run keeps the levels its journal holds."""
    assert cfg.fanin is not None
    at = time.monotonic()
    levels = fanin_run.level_count(cfg.nodes, cfg.fanin)
    observer.phase(Stage.FANIN, 0, levels, len(prior.fanin))

    def done(storage: str, level: FaninLevel) -> None:
        with interrupts.atomic():
            journal.append_fanin(f, storage, level)
        observer.item(None)

    ctx = fanin_run.SweepContext(
        cfg.transport, cfg.token, cfg.transport_options, cfg.policy.fanin_knee_factor,
        cfg.plan.timeout_s,
    )  # fmt: skip
    try:
        spent.fanin = fanin_run.sweep(cfg.nodes, cfg.fanin, ctx, done, prior.fanin)
    finally:
        spent.fanin_s = time.monotonic() - at


def _finalise(
    cfg: RunConfig,
    out_dir: Path,
    pairing: schedule.Schedule,
    started: str,
    budget: BulkBudget,
    rec: _Journal,
    inter: Interference | None,
    stopped: Stage | None,
    spent: _Spent,
    fleet_found: FleetResult | None = None,
) -> Results:
    """results.json from what the run holds; an interrupted run's pairs with ping-pong only
    are in it as measured so far (``journal.as_pending``)."""
    sched = phases.layout(cfg.schedule, budget, cfg.plan.bulk)
    if spent.busy:  # --resume: these agents still ran someone's probes when measuring began
        sched["busy_at_start"] = dict(spent.busy)
    if stopped is not None:
        sched["interference"] = f"skipped (run interrupted during {stopped.value})"
        sched["interrupted_during"] = stopped.value
        sched["pairs_pingpong_only"] = len(rec.pending)
    elif cfg.interference_minimum == 0:
        sched["interference"] = "skipped (--interference-sample 0)"
    else:
        checked = inter is not None and inter.sample > 0
        sched["interference"] = "checked" if checked else "no measured paths to sample"
    estimated, *_ = estimate.estimate_phases(
        pairing, cfg.transport.value, cfg.plan, cfg.parallel, cfg.schedule, cfg.fabric,
        cfg.interference_fraction, cfg.interference_minimum,
    )  # fmt: skip
    sched["estimate"] = estimate.phases_to_dict(estimated)
    sched["actual"] = {
        "preflight_s": round(spent.preflight_s, 3),
        **spent.tally.to_dict(),
        "interference_s": round(spent.interference_s, 3),
        **({"fanin_s": round(spent.fanin_s, 3)} if cfg.fanin is not None else {}),
    }
    paths = [*rec.paths, *map(journal.as_pending, rec.pending.values())]
    meta = RunMeta(
        started_at=started,
        finished_at=now_iso(),
        transport=cfg.transport.value,
        mode=cfg.mode,
        policy=cfg.policy,
        plan=cfg.plan,
        clock=clock_info(),
        host=host_info(),
        inventory=cfg.inventory,
        schedule=sched,
        complete=stopped is None,
        pairs_planned=pairing.pair_count,
        agents=spent.agents,
    )
    results = Results(
        run=meta,
        nodes=cfg.endpoints,
        paths=(table := PathTable.from_paths(paths, [n.name for n in cfg.endpoints])),
        summary=summarize(table, cfg.policy.metric),
        interference=inter if stopped is None else None,
        tool_version=__version__,
        workload=cfg.workload,
    )
    results = dataclasses.replace(
        results,
        suspects=localise.suspects(results),
        retest_of=cfg.retest_of,
        not_measured=tuple(rec.skipped),
        fanin=spent.fanin,
        fleet=fleet_found,
        hosts=tuple(
            spent.hosts[k]
            for k in dict.fromkeys(n.node_name for n in cfg.nodes)
            if k in spent.hosts
        ),
        multirail=spent.multirail,
    )
    write_json(RunDir(out_dir).results_json, results)
    return results


def _interference(
    cfg: RunConfig,
    paths: Sequence[PathResult],
    prior: journal.Journal,
    f: TextIO,
    observer: RunObserver,
) -> Interference:
    """Re-measure a sample alone, one pair at a time, ping-pong only
    (netqual.analysis.interference).
    The sample and each alone measurement are journalled, so a resumed run keeps the
    sample and re-measures only what it had not."""
    by_name = {n.name: n for n in cfg.endpoints}
    by_key = {p.key: p for p in paths}
    if prior.sample is not None and all(k in by_key for k in prior.sample):
        sample = [by_key[k] for k in prior.sample]
        alone = dict(prior.alone)
    else:
        sample = sampling.choose_sample(
            paths, cfg.interference_fraction, cfg.interference_minimum, cfg.interference_seed
        )
        alone = {}
        journal.append_sample(f, [p.key for p in sample])
    observer.phase(Stage.INTERFERENCE, 0, len(sample), sum(p.key in alone for p in sample))
    for p in sample:
        if p.key not in alone:
            measured = measure_pair(by_name[p.src], by_name[p.dst], cfg, Phase.PINGPONG)
            with interrupts.atomic():
                journal.append_alone(f, measured)
                alone[p.key] = measured
            observer.item(None)
    return interference.compare([(p, alone[p.key]) for p in sample], cfg.interference_tolerance)


__all__ = ["NullObserver", "RunConfig", "RunObserver", "Stage", "Verdict", "run"]
