"""`netqual report` (terminal / HTML / CSV from a results file) and `netqual diff`."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from netqual.analysis import comparable
from netqual.analysis.comparable import Setup
from netqual.analysis.diff import diff_runs
from netqual.analysis.diffjson import diff_json
from netqual.analysis.matrix import STATISTICS
from netqual.analysis.rise import DEFAULT_INCREASE_PCT, DEFAULT_MIN_DELTA_US
from netqual.base.errors import NetqualError, UsageError
from netqual.cli import rundir
from netqual.cli.app import AllowIncomparableOpt, ForceOpt, JsonOpt, WorkloadOpt, app, console
from netqual.files.outfiles import write_text_atomic
from netqual.gate import evaluate, load_profile
from netqual.gate.profile import Profile
from netqual.gate.regression import MaxP99IncreasePct
from netqual.render.diff import print_diff
from netqual.render.engine import print_engine_results
from netqual.render.terminal import print_results
from netqual.render.workload import print_workload_results
from netqual.report import write_csv, write_html
from netqual.report.html import render_diff_html
from netqual.report.view import GateBanner
from netqual.results import dump_json
from netqual.run.runfiles import load_run, run_file
from netqual.table.run import Results
from netqual.workload import load_workload
from netqual.workload.judge import apply as apply_workload

BaselineOpt = Annotated[
    Path | None,
    typer.Option("--baseline", help="An earlier run, for the profile's regression rules."),
]


def print_retest_before_after(out: Console, res: Results, source: Path) -> None:
    """A re-test run: each re-tested path before (the run it re-tests) and after."""
    if res.retest_of is None:
        return
    try:
        before = load_run(Path(res.retest_of))
    except NetqualError as err:
        out.print(f"re-test of {res.retest_of} (not readable now: {err})", style="dim")
        return
    out.print(f"re-test of {res.retest_of}: before and after", style="bold")
    print_diff(out, diff_runs(before, res, old_source=res.retest_of, new_source=str(source)))


@app.command()
def report(
    results: Annotated[
        Path,
        typer.Argument(
            metavar="RESULTS", help="A run directory, or its results.json or results.jsonl."
        ),
    ],
    html: Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.")] = None,
    csv: Annotated[
        Path | None, typer.Option("--csv", help="Write one CSV row per path here.")
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="Gate profile: the HTML report shows its verdict and its waivers.",
        ),
    ] = None,
    baseline: BaselineOpt = None,
    stat: Annotated[
        str | None,
        typer.Option(
            "--stat",
            metavar="STAT",
            help=f"Statistic in the terminal matrix: {', '.join(STATISTICS)}. "
            "[default: the policy metric]",
        ),
    ] = None,
    workload: WorkloadOpt = None,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="Every rack pair and suspect (a large run shows the worst ones)."
        ),
    ] = False,
    as_json: JsonOpt = False,
    force: ForceOpt = False,
) -> None:
    """Show a run again, optionally as HTML and CSV; --workload judges every path by a
    workload's KV chunk (interpolated from the nearest cells when the run did not
    measure it, and the output says so).

    \b
    Examples:
      netqual report run1
      netqual report run1/results.json --html report.html --csv paths.csv
      netqual report run1 --workload llama-3.1-70b-tp8
    """
    if stat is not None and stat not in STATISTICS:
        raise UsageError("--stat", f"unknown statistic {stat!r} (one of {', '.join(STATISTICS)})")
    for target, option in ((html, "--html"), (csv, "--csv")):
        if target is not None:
            rundir.check_file_out(target, force, option)
    res = load_run(results)
    if workload is not None:
        res = apply_workload(res, load_workload(workload))
    if as_json:
        dump_json(sys.stdout, res, indent=1)  # streamed: no dict of every path
        sys.stdout.write("\n")
        return
    out = console()
    print_results(out, res, stat, show_all)
    print_workload_results(out, res)
    print_engine_results(out, res)
    print_retest_before_after(out, res, results)
    prof = load_profile(profile) if profile else None
    banner = gate_banner(res, prof, baseline)
    if html:
        write_html(
            res,
            html,
            waivers=prof.waivers if prof else (),
            gate=banner,
            source=str(results),
        )
        out.print(f"wrote {html}")
    if csv:
        write_csv(res, csv)
        out.print(f"wrote {csv}")


def check_gate_options(prof: Profile | None, baseline: Path | None) -> None:
    """--profile and --baseline fit together: a profile that compares with an earlier run
    and has none is an error, not a silently missing verdict."""
    if prof is None and baseline is not None:
        raise UsageError("--baseline", "a baseline is only used with --profile")
    if prof is not None and prof.baseline_required and baseline is None:
        raise UsageError(
            "--baseline", f"profile {prof.name!r} compares with an earlier run: give --baseline RUN"
        )


def gate_banner(res: Results, prof: Profile | None, baseline: Path | None) -> GateBanner | None:
    """The gate's decision under --profile (and --baseline), for the report's first screen."""
    check_gate_options(prof, baseline)
    if prof is None:
        return None
    today = dt.datetime.now(dt.timezone.utc).date()
    base = load_run(baseline) if baseline is not None else None
    decision = evaluate(res, prof, today=today, baseline=base)
    return GateBanner(prof.name, decision.passed, tuple(o.rule for o in decision.failed))


@app.command()
def diff(
    old: Annotated[
        Path, typer.Argument(metavar="OLD", help="The earlier run (directory or file).")
    ],
    new: Annotated[Path, typer.Argument(metavar="NEW", help="The later run (directory or file).")],
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the comparison as HTML.")
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="Gate profile whose [baseline] max_p99_increase_pct and min_delta_us "
            "decide what is worse.  [default: 25% and 5 us, as docs/gate-profiles/requalify.toml]",
        ),
    ] = None,
    as_json: JsonOpt = False,
    force: ForceOpt = False,
    allow_incomparable: AllowIncomparableOpt = False,
) -> None:
    """Compare two runs: verdict changes and metric deltas.

    A path is worse when it dropped a class or its p99 rose beyond the gate's thresholds;
    changes whose 95% confidence intervals overlap are marked as run-to-run noise. Runs
    that differ in transport, ping-pong size, policy metric or chunk set are refused (exit
    2) unless --allow-incomparable.

    \b
    Example:
      netqual diff run1 run2 --profile gate.toml --html diff.html
    """
    if html is not None:
        rundir.check_file_out(html, force, "--html")
    pct, floor = DEFAULT_INCREASE_PCT, DEFAULT_MIN_DELTA_US
    for rule in load_profile(profile).rules if profile else ():
        if isinstance(rule, MaxP99IncreasePct):
            pct, floor = rule.pct, rule.min_delta_us
    before, after = load_run(old), load_run(new)
    found = comparable.check(
        Setup.of(after.run), Setup.of(before.run), str(run_file(new)), str(run_file(old)),
        allow=allow_incomparable,
    )  # fmt: skip
    d = diff_runs(
        before,
        after,
        old_source=str(old),
        new_source=str(new),
        increase_pct=pct,
        min_delta_us=floor,
        incomparable=found,
    )
    if html:
        write_text_atomic(html, render_diff_html(d))
    if as_json:
        for piece in diff_json(d):  # every common path: written as it is formatted
            typer.echo(piece, nl=False)
        typer.echo("")
        return
    print_diff(console(), d)
    if html:
        console().print(f"wrote {html}")
