"""``netqual run``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from netqual.analysis.interference import TOLERANCE
from netqual.analysis.policy import load_policy
from netqual.base.errors import UsageError
from netqual.cli import rundir
from netqual.cli.app import (
    BulkBytesOpt,
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
from netqual.cli.engine_opts import EngineOpt, EngineRequireOpt
from netqual.cli.fanin_opts import (
    DEFAULT_FANIN_CHUNKS,
    FaninChunkOpt,
    FaninChunksOpt,
    FaninOpt,
    FetchProfileOpt,
)
from netqual.cli.measuring import InsecureOpt, measure_into
from netqual.cli.run_config import RunOptions, completed, planned, show_plan
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
    short_plan,
)
from netqual.gate import load_profile
from netqual.model.fetchprofile import PLAIN
from netqual.model.multirail import DEFAULT_MIN_SHARE
from netqual.model.policy import Policy
from netqual.planning.inventory import load_inventory
from netqual.planning.sampling import DEFAULT_FRACTION, DEFAULT_MINIMUM
from netqual.planning.schedule import DEFAULT_SAMPLE_K
from netqual.run import start
from netqual.run.runfiles import load_run


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
    ] = DEFAULT_SAMPLE_K,
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
    bulk_bytes: BulkBytesOpt = None,
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
    o = RunOptions(**locals())  # every option as given: first, while locals() holds only them
    inv = load_inventory(o.inventory)
    pol = load_policy(o.policy) if o.policy else Policy()
    prof = load_profile(o.profile) if o.profile else None  # bad input stops before measuring
    check_gate_options(prof, o.baseline)
    if o.baseline is not None:
        load_run(o.baseline)  # readable now, not only after the run
    cfg = planned(o, inv, pol)
    if o.dry_run:
        return show_plan(o, inv, cfg)
    c = err_console() if o.as_json else console()  # notes go to stderr when stdout is JSON
    short_plan(pol, cfg.plan, o.allow_short_plan, c)
    cfg = completed(o, inv, cfg)
    if o.resume and o.out is None:
        raise UsageError("--resume", "needs --out DIR: the directory of the run to continue")
    out = o.out or rundir.default_out()
    rundir.check_out(out, o.force, o.resume)
    begun = start.begin(cfg, out, o.resume, o.force)
    check = functools.partial(preflight_or_stop, c, o.keep_going, o.check_timeout)
    measure_into(
        out, o.as_json, o.progress, pol.metric, lambda shown: start.measure(begun, shown, check),
        lambda r: gate_banner(r, prof, o.baseline), shown_on=c,
    )  # fmt: skip
