"""``netqual run``, ``netqual probe`` and ``netqual demo``."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from netqual.analysis.fleet import load_fleet_policy
from netqual.analysis.interference import TOLERANCE
from netqual.analysis.policy import load_policy, short_plan_problem
from netqual.auth import load_token
from netqual.choices import ChoiceError, parse_choice
from netqual.cli import rundir
from netqual.cli.app import (
    ChunkOpt,
    DepthOpt,
    GidIndexOpt,
    IterationsOpt,
    JsonOpt,
    NoBulkOpt,
    PolicyOpt,
    RdmaDeviceOpt,
    RdmaPortOpt,
    SizeOpt,
    TimeoutOpt,
    TokenFileOpt,
    TransportOpt,
    WarmupOpt,
    WorkloadOpt,
    app,
    console,
    err_console,
    probe_node,
)
from netqual.cli.cmd_check import CheckTimeoutOpt, preflight_or_stop
from netqual.cli.cmd_report import BaselineOpt, check_gate_options, gate_banner
from netqual.cli.fanin_opts import (
    DEFAULT_FANIN_CHUNKS,
    FaninChunkOpt,
    FaninChunksOpt,
    FaninOpt,
    FetchProfileOpt,
    fanin_config,
)
from netqual.errors import EXIT_RUNTIME, NotMeasuredError, OutputError, UsageError
from netqual.fanin_model import FaninConfig
from netqual.fetchprofile import PLAIN
from netqual.fleet_model import FleetPolicy
from netqual.gate import load_profile
from netqual.models import Metric, Mode, Policy, ProbePlan
from netqual.multirail_model import DEFAULT_MIN_SHARE
from netqual.planning import estimate
from netqual.planning import options as plan_mod
from netqual.planning import schedule as schedule_mod
from netqual.planning.inventory import Inventory, load_inventory
from netqual.planning.limits import check_limits
from netqual.planning.packing import Coverage
from netqual.planning.phases import ScheduleConfig, Timing
from netqual.planning.rails import Rails, default_rails
from netqual.planning.rails import build as rails_build
from netqual.planning.sampling import DEFAULT_FRACTION, DEFAULT_MINIMUM
from netqual.progress import RunObserver, Stage
from netqual.render.dryrun import print_dry_run
from netqual.render.progress import observer
from netqual.render.terminal import print_probe, print_results
from netqual.render.workload import print_workload_path, print_workload_results
from netqual.report import write_html
from netqual.report.view import GateBanner
from netqual.results import dump_json, path_to_dict
from netqual.run import demo as demo_mod
from netqual.run import resume as resume_mod
from netqual.run.coordinator import (
    RunConfig,
    finalise_interrupted,
    is_configuration,
    measure_pair,
    run_identity,
)
from netqual.run.coordinator import run as run_coordinator
from netqual.run.preflight import PreflightFailed
from netqual.run.runfiles import load_run
from netqual.runpaths import RunDir
from netqual.runresults import Results
from netqual.transports import TransportKind, TransportOptions
from netqual.units import format_size
from netqual.workload import Workload, load_workload
from netqual.workload.judge import add_to_plan

OutOpt = Annotated[
    Path, typer.Option("--out", help="Directory for results.jsonl, results.json, report.html.")
]
InsecureOpt = Annotated[
    bool, typer.Option("--insecure", help="Talk to agents started with --insecure (no token).")
]
ParallelOpt = Annotated[
    int | None,
    typer.Option(
        "--parallel", help="Most pairs measured at once.  [default: every disjoint pair of a round]"
    ),
]
ScheduleOpt = Annotated[
    str,
    typer.Option(
        "--schedule",
        metavar="SCHEDULE",
        help="aligned (all ping-pong, then bulk), per-round (barrier per round) or unaligned.",
    ),
]
BulkPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--bulk-per-node",
        help="Most bulk pairs at once per host.  [default: derived from chunk and depth]",
    ),
]
BulkPerRackOpt = Annotated[
    int | None,
    typer.Option(
        "--bulk-per-rack",
        help="Most bulk pairs at once per rack uplink or site link.  "
        "[default: derived from chunk and depth]",
    ),
]
BulkPairsOpt = Annotated[
    str,
    typer.Option(
        "--bulk-pairs",
        metavar="COVERAGE",
        help="Pairs that also get bulk reads: all, per-node:K (K per node, every rack pair "
        "once) or per-rack-pair:K (K per rack pair, every node once); ping-pong covers "
        "every pair.",
    ),
]
IncastOpt = Annotated[
    int | None,
    typer.Option("--incast", help="Deliberate fan-in test: N readers of one node at once."),
]
FractionOpt = Annotated[
    float,
    typer.Option(
        "--interference-fraction",
        metavar="SHARE",
        help="Share of paths re-measured alone when that is more than --interference-sample.",
    ),
]
ToleranceOpt = Annotated[
    float,
    typer.Option(
        "--interference-tolerance",
        help="Run/alone p99 ratio a sampled path may reach before it counts as disturbed.",
    ),
]
InterferenceOpt = Annotated[
    int,
    typer.Option(
        "--interference-sample",
        help="Paths re-measured alone after the run (at least; 2% up to 64 if more); 0 skips.",
    ),
]


def _schedule(
    name: str,
    per_node: int | None,
    per_rack: int | None,
    incast: int | None,
    bulk_pairs: str = "all",
) -> ScheduleConfig:
    try:
        schedule = Timing(name)
    except ValueError:
        raise UsageError(
            "--schedule", f"unknown schedule {name!r} (aligned, per-round, unaligned)"
        ) from None
    return ScheduleConfig(schedule, per_node, per_rack, incast, Coverage.parse(bulk_pairs))


def _plan(
    base: ProbePlan,
    iterations: int | None,
    warmup: int | None,
    size: str | None,
    chunk: list[str] | None,
    depth: list[int] | None,
    no_bulk: bool,
    timeout: float | None,
) -> ProbePlan:
    return plan_mod.override(
        base,
        iterations=iterations,
        warmup=warmup,
        size=size,
        chunks=chunk,
        depths=depth,
        no_bulk=no_bulk,
        timeout_s=timeout,
    )


def _workload(text: str | None, plan: ProbePlan) -> tuple[Workload | None, ProbePlan]:
    """The workload, and the plan with its chunk at depth ranks_per_node added."""
    if text is None:
        return None, plan
    w = load_workload(text)
    return w, add_to_plan(plan, w)


def _mode(name: str) -> Mode:
    try:
        return parse_choice(Mode, name, "--mode")
    except ChoiceError as err:
        raise UsageError(err.where, err.problem) from None


def _share(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise UsageError("--interference-fraction", f"must be 0 to 1, got {value:g}")
    return value


def _tolerance(value: float) -> float:
    if value < 1.0:
        raise UsageError("--interference-tolerance", f"must be >= 1, got {value:g}")
    return value


def _non_negative(value: int, option: str) -> int:
    if value < 0:
        raise UsageError(option, f"must be >= 0, got {value}")
    return value


def _finish(results: Results, out: Path, as_json: bool, gate: GateBanner | None = None) -> None:
    write_html(results, RunDir(out).report_html, gate=gate)
    if as_json:
        dump_json(sys.stdout, results, indent=1)  # streamed: no dict of every path
        sys.stdout.write("\n")
        return
    print_results(console(), results)
    print_workload_results(console(), results)
    console().print(f"results: {out / 'results.json'}  report: {out / 'report.html'}", style="dim")


def measure_into(
    out: Path,
    as_json: bool,
    progress: str,
    metric: Metric,
    measure: Callable[[RunObserver], Results],
    gate: Callable[[Results], GateBanner | None] = lambda results: None,
    again: str | None = None,
) -> Results:
    """The one way run, retest and demo measure into ``out`` and stop. SIGINT and SIGTERM
    stop ``measure`` in any phase; it returns the results finalised so far (incomplete),
    which are written like a finished run's, and the command then exits 130 or 143 with
    ``again`` (default: resume with the same command plus --resume)."""
    c = err_console() if as_json else console()
    again = again or f"resume with {rundir.resume_command(out)}"
    try:
        try:
            with rundir.interrupts() as caught, observer(c, progress, metric) as shown:
                results = measure(shown)
        except KeyboardInterrupt:  # before the run had anything to finalise
            raise rundir.RunStopped(
                f"interrupted before measuring started: nothing new measured; {again}",
                caught.exit_code,
            ) from None
        _finish(results, out, as_json, gate(results))
    except OutputError as err:  # no space, no permission: say how to continue
        raise OutputError(
            err.source,
            f"{err.problem}; the pairs measured so far are kept: fix it, then {again}",
        ) from err
    if not results.run.complete:
        raise rundir.RunInterrupted(results, out, again, caught.exit_code)
    return results


def _dry_run(
    inv: Inventory,
    mode: str | None,
    transport: str,
    parallel: int | None,
    sample_k: int,
    as_json: bool,
    plan: ProbePlan,
    cfg: ScheduleConfig,
    interference: tuple[float, int],
    rails: Rails,
    fanin: FaninConfig | None = None,
) -> None:
    d = estimate.dry_run(
        inv.source,
        inv.nodes,
        _mode(mode) if mode else (inv.mode or Mode.FULL_MESH),
        TransportKind.parse(transport).value,
        plan,
        parallel,
        sample_k,
        cfg=cfg,
        fabric=inv.fabric,
        interference_fraction=interference[0],
        interference_minimum=interference[1],
        rails=rails,
        fanin=fanin,
    )
    if as_json:
        print(json.dumps(estimate.dry_run_to_dict(d), indent=1))
    else:
        print_dry_run(console(), d)


def _multirail(count: int, rails: Rails) -> int:
    if count < 0:
        raise UsageError("--multirail", f"must be >= 0, got {count}")
    if count and rails is Rails.NONE:
        raise UsageError("--multirail", "reads over several rails: list the nodes' nics")
    return count


def _rail_share(value: float) -> float:
    if not 0.0 < value <= 1.0:
        raise UsageError("--multirail-share", f"must be in (0, 1], got {value:g}")
    return value


def _short_plan(pol: Policy, plan: ProbePlan, allowed: bool, out: Console) -> None:
    problem = short_plan_problem(pol, plan.iterations)
    if problem is None:
        return
    if not allowed:
        raise UsageError("--iterations", problem)
    out.print(
        f"preliminary: {plan.iterations:,} samples per path, the policy needs "
        f"{pol.min_samples:,}; no verdict of this run is final",
        style="yellow",
    )


@app.command()
def run(
    inventory: Annotated[
        Path, typer.Argument(metavar="INVENTORY", help="Inventory TOML (docs/inventory.md).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Directory for results.jsonl, results.json, report.html; never one that "
            "holds a run unless --force.  [default: netqual-run-<UTC date-time>-<random>]",
        ),
    ] = None,
    transport: TransportOpt = "tcp",
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            metavar="MODE",
            help="full-mesh, bipartite or sampled.  [default: the inventory's [run] mode, "
            "else full-mesh]",
        ),
    ] = None,
    policy: PolicyOpt = None,
    token_file: TokenFileOpt = None,
    insecure: InsecureOpt = False,
    parallel: ParallelOpt = None,
    sample_k: Annotated[
        int, typer.Option("--sample-k", help="Pairs between every two racks in sampled mode.")
    ] = 2,
    schedule: ScheduleOpt = "aligned",
    bulk_per_node: BulkPerNodeOpt = None,
    bulk_per_rack: BulkPerRackOpt = None,
    incast: IncastOpt = None,
    bulk_pairs: BulkPairsOpt = "all",
    interference_sample: InterferenceOpt = DEFAULT_MINIMUM,
    interference_fraction: FractionOpt = DEFAULT_FRACTION,
    interference_tolerance: ToleranceOpt = TOLERANCE,
    iterations: IterationsOpt = None,
    warmup: WarmupOpt = None,
    size: SizeOpt = None,
    chunk: ChunkOpt = None,
    depth: DepthOpt = None,
    no_bulk: NoBulkOpt = False,
    timeout: TimeoutOpt = None,
    rdma_device: RdmaDeviceOpt = None,
    rdma_port: RdmaPortOpt = None,
    gid_index: GidIndexOpt = None,
    workload: WorkloadOpt = None,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--keep-going",
            help="Run even when agents fail the pre-flight check (their paths become unsafe).",
        ),
    ] = False,
    check_timeout: CheckTimeoutOpt = 5.0,
    allow_short_plan: Annotated[
        bool,
        typer.Option(
            "--allow-short-plan",
            help="Run a plan with fewer samples than the policy's min_samples; every verdict "
            "is marked preliminary.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    progress: rundir.ProgressOpt = "auto",
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Continue an interrupted run in --out: skip the pairs it finished."
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace the run already in --out; with --resume: accept a different "
            "inventory or plan.",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the plan and its estimated duration; no agent."),
    ] = False,
    multirail: Annotated[
        int,
        typer.Option(
            "--multirail",
            metavar="N",
            help="After the pairs, read the first N node pairs sharing two rails or more over "
            "1, 2, ... all their rails at once (docs/rails.md).",
        ),
    ] = 0,
    multirail_share: Annotated[
        float,
        typer.Option(
            "--multirail-share",
            metavar="SHARE",
            help="An added rail must add this share of its line rate (nic_gbps).",
        ),
    ] = DEFAULT_MIN_SHARE,
    rails: Annotated[
        str | None,
        typer.Option(
            "--rails",
            metavar="RAILS",
            help="same (rail i to rail i), all (every NIC pair) or none (one address per "
            "node); docs/rails.md.  [default: same when the inventory lists nics, else none]",
        ),
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option("--profile", help="Gate profile: report.html shows its verdict first."),
    ] = None,
    baseline: BaselineOpt = None,
    fanin: FaninOpt = None,
    fetch_profile: FetchProfileOpt = PLAIN,
    fanin_chunk: FaninChunkOpt = None,
    fanin_chunks: FaninChunksOpt = DEFAULT_FANIN_CHUNKS,
) -> None:
    """Qualify every path of an inventory.

    First the pre-flight check (netqual check): a configuration error stops the run with
    exit 3 before anything is measured, unless --keep-going. Then every pair the mode
    schedules is measured; results.jsonl, results.json and report.html go to --out.
    Exits 0 when the run completed, whatever the verdicts: judge them with `netqual gate`.

    \b
    Examples:
      netqual run inventory.toml --out run1
      netqual run inventory.toml --out run2 --transport rdma --policy policy.toml
    """
    inv = load_inventory(inventory)
    pol = load_policy(policy) if policy else Policy()
    prof = load_profile(profile) if profile else None  # bad input stops before measuring
    check_gate_options(prof, baseline)
    if baseline is not None:
        load_run(baseline)  # readable now, not only after the run
    wl, plan = _workload(
        workload, _plan(inv.plan, iterations, warmup, size, chunk, depth, no_bulk, timeout)
    )
    sched_cfg = _schedule(schedule, bulk_per_node, bulk_per_rack, incast, bulk_pairs)
    run_mode = _mode(mode) if mode else (inv.mode or Mode.FULL_MESH)
    sweep = fanin_config(
        fanin, fetch_profile, fanin_chunk, fanin_chunks, run_mode, transport, wl
    )  # fmt: skip
    # Nothing to measure, or a plan every agent refuses: usage errors, before any agent.
    run_rails = Rails.parse(rails) if rails else default_rails(inv.nodes)
    schedule_mod.require_pairs(rails_build(inv.nodes, run_mode, run_rails, sample_k), inv.nodes)
    check_limits(plan)
    if dry_run:
        interference = (
            _share(interference_fraction),
            _non_negative(interference_sample, "--interference-sample"),
        )
        _dry_run(
            inv, mode, transport, parallel, sample_k, as_json, plan, sched_cfg, interference,
            run_rails, sweep,
        )  # fmt: skip
        return
    _short_plan(pol, plan, allow_short_plan, err_console() if as_json else console())
    token = load_token(token_file or inv.token_file, insecure=insecure)
    cfg = RunConfig(
        nodes=inv.nodes,
        transport=TransportKind.parse(transport),
        mode=run_mode,
        policy=pol,
        plan=plan,
        token=token,
        parallel=parallel,
        sample_k=sample_k,
        inventory=str(inventory),
        transport_options=TransportOptions.from_flags(rdma_device, rdma_port, gid_index),
        workload=wl,
        schedule=sched_cfg,
        fabric=inv.fabric,
        interference_minimum=_non_negative(interference_sample, "--interference-sample"),
        interference_tolerance=_tolerance(interference_tolerance),
        interference_fraction=_share(interference_fraction),
        fanin=sweep,
        rails=run_rails,
        multirail=_multirail(multirail, run_rails),
        multirail_share=_rail_share(multirail_share),
        fleet_policy=load_fleet_policy(policy) if policy else FleetPolicy(),
    )
    if resume and out is None:
        raise UsageError("--resume", "needs --out DIR: the directory of the run to continue")
    out = out or rundir.default_out()
    rundir.check_out(out, force, resume)
    previous = resume_mod.prepare(out, run_identity(cfg), force) if resume else None
    created = not out.exists()
    resume_mod.begin(out, run_identity(cfg), previous)
    # Progress and notes go to stderr when stdout carries JSON.
    c = err_console() if as_json else console()

    def measure(shown: RunObserver) -> Results:
        try:
            shown.phase(Stage.PREFLIGHT, 0, len(cfg.nodes))
            checked_at = time.monotonic()
            checked = preflight_or_stop(
                c, cfg.nodes, token, cfg.transport.value, keep_going, check_timeout, plan
            )
            measured = dataclasses.replace(cfg, preflight_s=time.monotonic() - checked_at)
        except PreflightFailed:
            if previous is None:
                resume_mod.abandon(out, created)
            raise
        except KeyboardInterrupt:
            return finalise_interrupted(cfg, out, previous, Stage.PREFLIGHT)
        return run_coordinator(measured, out, shown, previous, checked)

    measure_into(
        out, as_json, progress, pol.metric, measure, lambda r: gate_banner(r, prof, baseline)
    )


@app.command()
def probe(
    src: Annotated[
        str, typer.Argument(metavar="SRC", help="Initiating agent: HOST:PORT or NAME@HOST:PORT.")
    ],
    dst: Annotated[
        str, typer.Argument(metavar="DST", help="Responding agent: HOST:PORT or NAME@HOST:PORT.")
    ],
    transport: TransportOpt = "tcp",
    policy: PolicyOpt = None,
    token_file: TokenFileOpt = None,
    insecure: InsecureOpt = False,
    iterations: IterationsOpt = None,
    warmup: WarmupOpt = None,
    size: SizeOpt = None,
    chunk: ChunkOpt = None,
    depth: DepthOpt = None,
    no_bulk: NoBulkOpt = False,
    timeout: TimeoutOpt = None,
    rdma_device: RdmaDeviceOpt = None,
    rdma_port: RdmaPortOpt = None,
    gid_index: GidIndexOpt = None,
    workload: WorkloadOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure one pair and print a perftest-style table.

    With --json: one path object of the results format (docs/results.md).

    \b
    Example:
      netqual probe gpu01@10.0.1.11:18515 gpu02@10.0.1.12:18515 --iterations 20000
    """
    wl, plan = _workload(
        workload, _plan(ProbePlan(), iterations, warmup, size, chunk, depth, no_bulk, timeout)
    )
    check_limits(plan)
    nodes = [probe_node(text, option) for text, option in ((src, "SRC"), (dst, "DST"))]
    cfg = RunConfig(
        nodes=tuple(nodes),
        transport=TransportKind.parse(transport),
        policy=load_policy(policy) if policy else Policy(),
        plan=plan,
        token=load_token(token_file, insecure=insecure),
        transport_options=TransportOptions.from_flags(rdma_device, rdma_port, gid_index),
        workload=wl,
    )
    path = measure_pair(nodes[0], nodes[1], cfg)
    if is_configuration(path):  # the set-up refused it: no measurement, no verdict
        raise NotMeasuredError(path.error or "configuration failure")
    if as_json:
        print(json.dumps(path_to_dict(path), indent=1))
    else:
        print_probe(console(), path)
        print_workload_path(console(), path)
    if path.error is not None:
        raise typer.Exit(EXIT_RUNTIME)


def _demo_default(field: str) -> str:
    """A demo plan field's default in --help: the lab's (as root) and loopback's."""

    def text(plan: ProbePlan) -> str:
        v = getattr(plan, field)
        if isinstance(v, tuple):
            return ", ".join(format_size(x) if field == "chunks_bytes" else str(x) for x in v)
        return format_size(v) if field == "size_bytes" and v >= 1024 else f"{v:g}"

    lab, loop = text(demo_mod.LAB_PLAN), text(demo_mod.LOOPBACK_PLAN)
    return (
        f"  [default: {lab}]"
        if lab == loop
        else f"  [default: {lab} in the lab; {loop} on loopback]"
    )


DemoIterationsOpt = Annotated[
    int | None,
    typer.Option("--iterations", help="Kept ping-pong samples." + _demo_default("iterations")),
]
DemoWarmupOpt = Annotated[
    int | None,
    typer.Option("--warmup", help="Discarded warm-up iterations." + _demo_default("warmup")),
]
DemoSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--size", metavar="BYTES", help="Ping-pong message size." + _demo_default("size_bytes")
    ),
]
DemoChunkOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--chunk",
        metavar="BYTES",
        help="Bulk chunk size, repeatable." + _demo_default("chunks_bytes"),
    ),
]
DemoDepthOpt = Annotated[
    list[int] | None,
    typer.Option("--depth", help="Outstanding bulk reads, repeatable." + _demo_default("depths")),
]
DemoTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", help="Per-pair timeout in seconds." + _demo_default("timeout_s")),
]


@app.command()
def demo(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Directory for results.jsonl, results.json, report.html; replaces an earlier "
            "demo there, never another run unless --force.",
        ),
    ] = Path("netqual-demo"),
    force: Annotated[
        bool, typer.Option("--force", help="Replace the run already in --out.")
    ] = False,
    agents: Annotated[
        int, typer.Option("--agents", help="Loopback agents to start (not as root).")
    ] = 4,
    loopback: Annotated[
        bool, typer.Option("--loopback", help="Loopback agents even as root (no emulated fabric).")
    ] = False,
    policy: PolicyOpt = None,
    iterations: DemoIterationsOpt = None,
    warmup: DemoWarmupOpt = None,
    size: DemoSizeOpt = None,
    chunk: DemoChunkOpt = None,
    depth: DemoDepthOpt = None,
    no_bulk: NoBulkOpt = False,
    timeout: DemoTimeoutOpt = None,
    workload: WorkloadOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Try netqual on this machine: agents, a full run, a report.

    As root: an emulated routed fabric (racks, hops, delayed links); else loopback agents.
    The demo's plan is short, so its policy asks for fewer samples than a real run.

    \b
    Example:
      netqual demo --out demo && xdg-open demo/report.html
    """
    if agents < 2:
        raise UsageError("--agents", f"need at least 2, got {agents}")
    rundir.check_out(out, force, resume=False, demo_ok=True)
    c = err_console() if as_json else console()

    def say(text: str) -> None:
        c.print(text, style="dim")

    fallback = demo_mod.lab_unusable_reason(loopback)
    base = demo_mod.LOOPBACK_PLAN if fallback else demo_mod.LAB_PLAN
    wl, plan = _workload(
        workload, _plan(base, iterations, warmup, size, chunk, depth, no_bulk, timeout)
    )
    if wl is not None and not fallback:
        plan = demo_mod.lab_workload_plan(plan, say)
    check_limits(plan)
    pol = demo_mod.demo_policy(load_policy(policy) if policy else None, plan, say)

    def measure(progress: RunObserver) -> Results:
        if fallback:
            say(f"demo: loopback agents ({fallback})")
            return demo_mod.run_on_loopback(out, agents, plan, pol, progress, say, wl)
        return demo_mod.run_on_lab(out, plan, pol, progress, say, wl)

    # A demo's agents are new (new ports, new token) each time: it starts again, it
    # cannot resume, and the next demo may replace this one.
    again = f"a demo does not resume: start it again with {rundir.resume_command(out, False)}"
    measure_into(out, as_json, "auto", pol.metric, measure, again=again)
