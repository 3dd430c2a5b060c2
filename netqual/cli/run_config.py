"""``netqual run``'s options as typer gives them (``RunOptions``, one field per parameter of
``cmd_run.run``) and the RunConfig they make, checked in the order a user meets them:
what a dry run shows first (``planned``: usage errors before any agent), then what only
a real run needs (``completed``: the token, the interference check, [fleet])."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from netqual.analysis.fleet import load_fleet_policy
from netqual.base.auth import load_token
from netqual.cli.engine_opts import engine_plan
from netqual.cli.fanin_opts import fanin_config
from netqual.cli.measuring import plan_from, workload_plan
from netqual.cli.run_opts import (
    multirail_count,
    non_negative,
    parse_mode,
    rail_share,
    schedule_config,
    share,
    show_dry_run,
    tolerance,
)
from netqual.model.fleet import FleetPolicy
from netqual.model.policy import Policy
from netqual.model.run import Mode
from netqual.planning import schedule as schedule_mod
from netqual.planning.inventory import Inventory
from netqual.planning.limits import check_limits
from netqual.planning.rails import Rails, default_rails, endpoint_nodes
from netqual.planning.rails import build as rails_build
from netqual.run.config import RunConfig
from netqual.run.runfiles import calibration_from
from netqual.transports import TransportKind, TransportOptions


@dataclass(frozen=True)
class RunOptions:
    """Every option of ``netqual run`` as given (a test holds the fields and the command's
    parameters together)."""

    inventory: Path
    out: Path | None
    transport: str
    mode: str | None
    policy: Path | None
    token_file: Path | None
    insecure: bool
    parallel: int | None
    sample_k: int
    schedule: str
    bulk_per_node: int | None
    bulk_per_rack: int | None
    incast: int | None
    bulk_pairs: str
    interference_sample: int
    interference_fraction: float
    interference_tolerance: float
    iterations: int | None
    warmup: int | None
    size: str | None
    chunk: list[str] | None
    depth: list[int] | None
    no_bulk: bool
    bulk_bytes: str | None
    timeout: float | None
    rdma_device: str | None
    rdma_port: int | None
    gid_index: int | None
    qp_timeout: int | None
    workload: str | None
    keep_going: bool
    check_timeout: float
    allow_short_plan: bool
    as_json: bool
    progress: str
    resume: bool
    force: bool
    dry_run: bool
    calibrate_from: list[Path] | None
    multirail: int
    multirail_share: float
    rails: str | None
    profile: Path | None
    baseline: Path | None
    fanin: str | None
    fetch_profile: str
    fanin_chunk: str | None
    fanin_chunks: int
    engine: str | None
    engine_require: str | None


def planned(o: RunOptions, inv: Inventory, pol: Policy) -> RunConfig:
    """What the run measures, as far as a dry run shows it: the plan (and workload), the
    schedule, the mode, the fan-in sweep, the rails, the engine cells, multirail, the
    calibration.
    Nothing to measure, or a plan every agent refuses: usage errors, before any agent."""
    flags = (o.iterations, o.warmup, o.size, o.chunk, o.depth, o.no_bulk, o.timeout, o.bulk_bytes)
    wl, plan = workload_plan(o.workload, plan_from(inv.plan, *flags))
    sched_cfg = schedule_config(
        o.schedule, o.bulk_per_node, o.bulk_per_rack, o.incast, o.bulk_pairs
    )
    run_mode = parse_mode(o.mode) if o.mode else (inv.mode or Mode.FULL_MESH)
    sweep = fanin_config(o.fanin, o.fetch_profile, o.fanin_chunk, o.fanin_chunks, run_mode, wl)
    run_rails = Rails.parse(o.rails) if o.rails else default_rails(inv.nodes)
    engine_cells = engine_plan(
        o.engine, o.engine_require, o.transport, plan, wl, run_rails is not Rails.NONE
    )
    pairs = rails_build(inv.nodes, run_mode, run_rails, o.sample_k)
    schedule_mod.require_pairs(pairs, inv.nodes)
    check_limits(plan)
    ends = [n.name for n in endpoint_nodes(inv.nodes, run_rails)]
    transport = TransportKind.parse(o.transport)
    cal = calibration_from(o.calibrate_from, transport.value, ends) if o.calibrate_from else None
    return RunConfig(
        nodes=inv.nodes,
        transport=transport,
        mode=run_mode,
        policy=pol,
        plan=plan,
        parallel=o.parallel,
        sample_k=o.sample_k,
        inventory=str(o.inventory),
        kind=inv.kind,
        workload=wl,
        schedule=sched_cfg,
        fabric=inv.fabric,
        fanin=sweep,
        rails=run_rails,
        engine=engine_cells,
        calibration=cal,
        multirail=multirail_count(o.multirail, run_rails),
        multirail_share=rail_share(o.multirail_share),
    )


def show_plan(o: RunOptions, inv: Inventory, cfg: RunConfig) -> None:
    """``--dry-run``: the plan and its estimated duration; no agent."""
    interference = (
        share(o.interference_fraction),
        non_negative(o.interference_sample, "--interference-sample"),
    )
    show_dry_run(
        inv, o.mode, o.transport, o.parallel, o.sample_k, o.as_json, cfg.plan, cfg.schedule,
        interference, cfg.rails, cfg.fanin, cfg.calibration, cfg.engine, cfg.multirail,
    )  # fmt: skip


def completed(o: RunOptions, inv: Inventory, cfg: RunConfig) -> RunConfig:
    """``cfg`` with what only a real run needs: the token, the transport's options, the
    interference check and the policy's [fleet]."""
    return dataclasses.replace(
        cfg,
        token=load_token(o.token_file or inv.token_file, insecure=o.insecure),
        transport_options=TransportOptions.from_flags(
            o.rdma_device, o.rdma_port, o.gid_index, o.qp_timeout
        ),
        interference_minimum=non_negative(o.interference_sample, "--interference-sample"),
        interference_tolerance=tolerance(o.interference_tolerance),
        interference_fraction=share(o.interference_fraction),
        fleet_policy=load_fleet_policy(o.policy) if o.policy else FleetPolicy(),
    )
