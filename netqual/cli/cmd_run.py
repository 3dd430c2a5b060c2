"""``netqual run``."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Annotated

import typer

from netqual.analysis.fleet import load_fleet_policy
from netqual.analysis.interference import TOLERANCE
from netqual.analysis.policy import load_policy
from netqual.base.auth import load_token
from netqual.base.errors import NoAgentsError, UsageError
from netqual.cli import rundir
from netqual.cli.app import (
    ChunkOpt,
    DepthOpt,
    GidIndexOpt,
    IterationsOpt,
    JsonOpt,
    NoBulkOpt,
    PolicyOpt,
    QpTimeoutOpt,
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
)
from netqual.cli.cmd_check import CheckTimeoutOpt, preflight_or_stop
from netqual.cli.cmd_report import BaselineOpt, check_gate_options, gate_banner
from netqual.cli.engine_opts import EngineOpt, EngineRequireOpt, engine_plan
from netqual.cli.fanin_opts import (
    DEFAULT_FANIN_CHUNKS,
    FaninChunkOpt,
    FaninChunksOpt,
    FaninOpt,
    FetchProfileOpt,
    fanin_config,
)
from netqual.cli.measuring import InsecureOpt, measure_into, plan_from, workload_plan
from netqual.cli.run_opts import (
    BulkPairsOpt,
    BulkPerNodeOpt,
    BulkPerRackOpt,
    FractionOpt,
    IncastOpt,
    InterferenceOpt,
    ParallelOpt,
    ScheduleOpt,
    ToleranceOpt,
    multirail_count,
    non_negative,
    parse_mode,
    rail_share,
    schedule_config,
    share,
    short_plan,
    show_dry_run,
    tolerance,
)
from netqual.gate import load_profile
from netqual.model.fetchprofile import PLAIN
from netqual.model.fleet import FleetPolicy
from netqual.model.multirail import DEFAULT_MIN_SHARE
from netqual.model.policy import Policy
from netqual.model.progress import RunObserver, Stage
from netqual.model.run import Mode
from netqual.planning import schedule as schedule_mod
from netqual.planning.inventory import load_inventory
from netqual.planning.limits import check_limits
from netqual.planning.rails import Rails, default_rails, endpoint_nodes
from netqual.planning.rails import build as rails_build
from netqual.planning.sampling import DEFAULT_FRACTION, DEFAULT_MINIMUM
from netqual.run import fanin as fanin_run
from netqual.run import resume as resume_mod
from netqual.run.config import RunConfig, run_identity
from netqual.run.coordinator import run as run_coordinator
from netqual.run.finalise import finalise_interrupted
from netqual.run.preflight import PreflightFailed
from netqual.run.runfiles import calibration_from, load_run
from netqual.table.run import Results
from netqual.transports import TransportKind, TransportOptions


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
    qp_timeout: QpTimeoutOpt = None,
    workload: WorkloadOpt = None,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--keep-going",
            help=(
                "Run even when agents fail the pre-flight check (their pairs are listed as "
                "not measured)."
            ),
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
    calibrate_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--calibrate-from",
            metavar="DIR",
            help="Estimate with the rates measured by an earlier run of this inventory (its "
            "directory; repeatable), or by a campaign directory's latest runs.",
        ),
    ] = None,
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
    engine: EngineOpt = None,
    engine_require: EngineRequireOpt = None,
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
    wl, plan = workload_plan(
        workload, plan_from(inv.plan, iterations, warmup, size, chunk, depth, no_bulk, timeout)
    )
    sched_cfg = schedule_config(schedule, bulk_per_node, bulk_per_rack, incast, bulk_pairs)
    run_mode = parse_mode(mode) if mode else (inv.mode or Mode.FULL_MESH)
    sweep = fanin_config(
        fanin, fetch_profile, fanin_chunk, fanin_chunks, run_mode, wl
    )  # fmt: skip
    # Nothing to measure, or a plan every agent refuses: usage errors, before any agent.
    run_rails = Rails.parse(rails) if rails else default_rails(inv.nodes)
    engine_cells = engine_plan(
        engine, engine_require, transport, plan, wl, run_rails is not Rails.NONE
    )
    schedule_mod.require_pairs(rails_build(inv.nodes, run_mode, run_rails, sample_k), inv.nodes)
    check_limits(plan)
    ends = [n.name for n in endpoint_nodes(inv.nodes, run_rails)]
    kind = TransportKind.parse(transport).value
    cal = calibration_from(calibrate_from, kind, ends) if calibrate_from else None
    if dry_run:
        interference = (
            share(interference_fraction),
            non_negative(interference_sample, "--interference-sample"),
        )
        show_dry_run(
            inv, mode, transport, parallel, sample_k, as_json, plan, sched_cfg, interference,
            run_rails, sweep, cal,
        )  # fmt: skip
        return
    short_plan(pol, plan, allow_short_plan, err_console() if as_json else console())
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
        kind=inv.kind,
        transport_options=TransportOptions.from_flags(
            rdma_device, rdma_port, gid_index, qp_timeout
        ),
        workload=wl,
        schedule=sched_cfg,
        fabric=inv.fabric,
        interference_minimum=non_negative(interference_sample, "--interference-sample"),
        interference_tolerance=tolerance(interference_tolerance),
        interference_fraction=share(interference_fraction),
        fanin=sweep,
        rails=run_rails,
        multirail=multirail_count(multirail, run_rails),
        multirail_share=rail_share(multirail_share),
        fleet_policy=load_fleet_policy(policy) if policy else FleetPolicy(),
        engine=engine_cells,
        calibration=cal,
    )
    if resume and out is None:
        raise UsageError("--resume", "needs --out DIR: the directory of the run to continue")
    out = out or rundir.default_out()
    rundir.check_out(out, force, resume)
    previous = resume_mod.prepare(out, run_identity(cfg), force) if resume else None
    created = not out.exists()
    resume_mod.begin(out, run_identity(cfg), previous, cfg.kind)
    # Progress and notes go to stderr when stdout carries JSON.
    c = err_console() if as_json else console()

    def measure(shown: RunObserver) -> Results:
        try:
            shown.phase(Stage.PREFLIGHT, 0, len(cfg.nodes))
            checked_at = time.monotonic()
            checked = preflight_or_stop(
                c, cfg.nodes, token, cfg.transport.value, keep_going, check_timeout, plan,
                (cfg.engine.name,) if cfg.engine is not None else (),
            )  # fmt: skip
            if cfg.fanin is not None:  # a level the agents' sessions cannot serve: exit 2
                done = previous.journal.fanin if previous else {}
                fanin_run.check_sessions(cfg.nodes, cfg.fanin, cfg.transport, checked, done)
            measured = dataclasses.replace(cfg, preflight_s=time.monotonic() - checked_at)
        except (PreflightFailed, UsageError):
            if previous is None:
                resume_mod.abandon(out, created)
            raise
        except KeyboardInterrupt:
            return finalise_interrupted(cfg, out, previous, Stage.PREFLIGHT)
        try:
            return run_coordinator(measured, out, shown, previous, checked)
        except NoAgentsError:  # every agent failed (--keep-going): nothing to resume
            if previous is None:
                resume_mod.abandon(out, created)
            raise

    measure_into(
        out, as_json, progress, pol.metric, measure, lambda r: gate_banner(r, prof, baseline),
        shown_on=c,
    )  # fmt: skip
