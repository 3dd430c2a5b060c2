"""``netqual run``'s own options and the checks of their values (usage errors, exit 2)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from netqual.analysis.policy import short_plan_problem
from netqual.base.choices import ChoiceError, parse_choice
from netqual.base.errors import UsageError
from netqual.cli.app import console
from netqual.model.engine import EnginePlan
from netqual.model.fanin import FaninConfig
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode
from netqual.planning import estimate
from netqual.planning.calibration import Calibration
from netqual.planning.inventory import Inventory
from netqual.planning.packing import Coverage
from netqual.planning.phases import ScheduleConfig, Timing
from netqual.planning.rails import Rails
from netqual.render.dryrun import print_dry_run
from netqual.transports import TransportKind

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


def schedule_config(
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


def parse_mode(name: str) -> Mode:
    try:
        return parse_choice(Mode, name, "--mode")
    except ChoiceError as err:
        raise UsageError(err.where, err.problem) from None


def share(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise UsageError("--interference-fraction", f"must be 0 to 1, got {value:g}")
    return value


def tolerance(value: float) -> float:
    if value < 1.0:
        raise UsageError("--interference-tolerance", f"must be >= 1, got {value:g}")
    return value


def non_negative(value: int, option: str) -> int:
    if value < 0:
        raise UsageError(option, f"must be >= 0, got {value}")
    return value


def show_dry_run(
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
    cal: Calibration | None = None,
    engine: EnginePlan | None = None,
    multirail: int = 0,
) -> None:
    d = estimate.dry_run(
        inv.source,
        inv.nodes,
        parse_mode(mode) if mode else (inv.mode or Mode.FULL_MESH),
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
        cal=cal,
        engine=engine,
        multirail=multirail,
    )
    if as_json:
        print(json.dumps(estimate.dry_run_to_dict(d), indent=1))
    else:
        print_dry_run(console(), d)


def multirail_count(count: int, rails: Rails) -> int:
    if count < 0:
        raise UsageError("--multirail", f"must be >= 0, got {count}")
    if count and rails is Rails.NONE:
        raise UsageError("--multirail", "reads over several rails: list the nodes' nics")
    return count


def rail_share(value: float) -> float:
    if not 0.0 < value <= 1.0:
        raise UsageError("--multirail-share", f"must be in (0, 1], got {value:g}")
    return value


def short_plan(pol: Policy, plan: ProbePlan, allowed: bool, out: Console) -> None:
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
