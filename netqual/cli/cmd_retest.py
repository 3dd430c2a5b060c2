"""`netqual retest`: re-measure a run's suspect paths into a new run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from netqual.analysis.diff import diff_runs
from netqual.base.auth import load_token
from netqual.base.errors import UsageError
from netqual.cli import rundir
from netqual.cli.app import JsonOpt, TokenFileOpt, app, console, err_console
from netqual.cli.engine_opts import EngineOpt, EngineRequireOpt, engine_plan
from netqual.cli.measuring import InsecureOpt, measure_into
from netqual.model.run import RunKind
from netqual.planning.inventory import load_inventory
from netqual.planning.limits import DEFAULT_LIMITS, check_limits
from netqual.render.diff import print_diff
from netqual.report.fmt import plural
from netqual.results import load
from netqual.run import retest as retest_mod
from netqual.run import start
from netqual.run.config import RunConfig
from netqual.run.coordinator import run as run_coordinator
from netqual.transports import TransportKind


def _token_file(run_inventory: str | None, given: Path | None) -> Path | None:
    """--token-file, else the run's inventory's token_file when that file is still there."""
    if given is not None or run_inventory is None or not Path(run_inventory).is_file():
        return given
    return load_inventory(Path(run_inventory)).token_file


@app.command()
def retest(
    run_dir: Annotated[
        Path, typer.Argument(metavar="DIR", help="The run to re-test (directory or results.json).")
    ],
    verdict: Annotated[
        str,
        typer.Option("--verdict", metavar="LIST", help="Re-test paths with these verdicts."),
    ] = retest_mod.DEFAULT_VERDICTS,
    path: Annotated[
        list[str] | None,
        typer.Option("--path", metavar="SRC:DST", help="Re-test this path (repeatable)."),
    ] = None,
    iterations: Annotated[
        int | None,
        typer.Option(
            "--iterations",
            help="Kept ping-pong samples.  [default: twice the run's, and at least the "
            "policy's min_samples so the re-test is final]",
        ),
    ] = None,
    both_directions: Annotated[
        bool, typer.Option("--both-directions", help="Measure SRC->DST and DST->SRC.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="New run directory; never one that holds a run unless --force.  "
            "[default: a new DIR-retest-<UTC date-time>-<random> beside DIR]",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace the run already in --out; with --resume: accept a different plan.",
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue an interrupted re-test in --out: skip the pairs it finished.",
        ),
    ] = False,
    token_file: TokenFileOpt = None,
    insecure: InsecureOpt = False,
    as_json: JsonOpt = False,
    engine: EngineOpt = None,
    engine_require: EngineRequireOpt = None,
) -> None:
    """Re-measure a run's unsafe and marginal paths (or --path ones) with a larger plan.

    The new run records which run it re-tests; its report and `netqual diff DIR NEW` show
    each path before and after. --iterations defaults to twice the run's, and at least the
    policy's min_samples: a re-test of a preliminary run is final.

    \b
    Examples:
      netqual retest run1
      netqual retest run1 --path gpu01:gpu07 --both-directions --iterations 50000
    """
    before = load(retest_mod.results_file(run_dir))
    verdicts = retest_mod.parse_verdicts(verdict)
    names = [n.name for n in before.nodes]
    wanted = [retest_mod.parse_path(p, names) for p in path or ()]
    pairs = retest_mod.select(before, verdicts, wanted, both_directions)
    if not pairs:
        console().print(f"nothing to re-test: no {verdict} paths in {run_dir}")
        return
    if resume and out is None:
        raise UsageError("--resume", "needs --out DIR: the directory of the re-test to continue")
    new_dir = out or retest_mod.default_out(run_dir)
    rundir.check_out(new_dir, force, resume)
    pol = before.run.policy
    plan = retest_mod.larger_plan(
        before.run.plan, iterations, pol.min_samples, DEFAULT_LIMITS.max_iterations
    )
    check_limits(plan)
    token = load_token(_token_file(before.run.inventory, token_file), insecure=insecure)
    cfg = RunConfig(
        nodes=before.nodes,
        transport=TransportKind.parse(before.run.transport, f"{run_dir}: run.transport"),
        mode=before.run.mode,
        policy=before.run.policy,
        plan=plan,
        token=token,
        inventory=before.run.inventory,
        kind=RunKind.RETEST,
        workload=before.workload,
        pairs=pairs,
        retest_of=str(run_dir.resolve()),
        engine=engine_plan(
            engine, engine_require, before.run.transport, plan, before.workload,
            any(n.nic is not None for n in before.nodes),
        ),
        retest_base=before,
    )  # fmt: skip
    c = err_console() if as_json else console()
    c.print(
        f"re-testing {plural(len(pairs), 'path')} of {run_dir} with "
        f"{cfg.plan.iterations:,} iterations into {new_dir}",
        style="dim",
    )
    if plan.iterations < pol.min_samples:
        c.print(
            f"preliminary: {plan.iterations:,} samples per path, the policy needs "
            f"{pol.min_samples:,}: the re-test stays preliminary",
            style="yellow",
        )
    begun = start.begin(cfg, new_dir, resume, force)
    after = measure_into(
        new_dir,
        as_json,
        "auto",
        cfg.policy.metric,
        lambda progress: run_coordinator(cfg, new_dir, progress, begun.previous),
    )
    if not as_json:
        print_diff(
            console(), diff_runs(before, after, old_source=str(run_dir), new_source=str(new_dir))
        )
