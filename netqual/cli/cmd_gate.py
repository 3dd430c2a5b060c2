"""`netqual gate`: judge a results file against a gate profile (exit 0 pass, 1 fail)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import typer

from netqual.analysis import comparable
from netqual.analysis.comparable import Difference, Setup
from netqual.base.errors import EXIT_FAIL, EXIT_OK, ResultsFileError, UsageError
from netqual.cli import rundir
from netqual.cli.app import AllowIncomparableOpt, ForceOpt, JsonOpt, WorkloadOpt, app, console
from netqual.files.outfiles import write_text_atomic
from netqual.gate import (
    GateReport,
    default_profile,
    evaluate,
    junit_xml,
    load_profile,
    report_to_dict,
)
from netqual.render.gate import print_gate
from netqual.run.runfiles import load_run, run_file
from netqual.workload import load_workload
from netqual.workload.judge import apply as apply_workload


def _today(text: str | None) -> dt.date:
    if text is None:
        return dt.datetime.now(dt.timezone.utc).date()
    try:
        return dt.date.fromisoformat(text)
    except ValueError as err:
        raise UsageError("--today", f"not a date: {text!r} (use YYYY-MM-DD)") from err


@app.command()
def gate(
    results: Annotated[
        Path,
        typer.Argument(
            metavar="RESULTS", help="A run directory, or its results.json or results.jsonl."
        ),
    ],
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="Gate profile TOML (docs/gates.md).  [default: every path offload-safe]",
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="An earlier run, for the regression rules."),
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write JUnit XML here.")
    ] = None,
    as_json: JsonOpt = False,
    today: Annotated[
        str | None,
        typer.Option(
            "--today",
            metavar="YYYY-MM-DD",
            help="Date that decides waiver expiry.  [default: today, UTC]",
        ),
    ] = None,
    workload: WorkloadOpt = None,
    force: ForceOpt = False,
    allow_incomparable: AllowIncomparableOpt = False,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete",
            help="Judge the measured paths of a run that left scheduled pairs unmeasured; "
            "the complete rule then reports them without failing (a run that measured "
            "nothing still fails).",
        ),
    ] = False,
) -> int:
    """Judge a run against a gate profile.

    Exit 0 pass, 1 fail, 2 bad input, 3 runtime error. A run that did not measure every
    scheduled pair fails the complete rule (unless --allow-incomplete). A baseline that
    differs in transport, ping-pong size, policy metric or chunk set is refused (exit 2)
    unless --allow-incomparable.

    \b
    Examples:
      netqual gate run1
      netqual gate run2 --profile gate.toml --baseline run1 --junit gate.xml
    """
    if junit is not None:
        rundir.check_file_out(junit, force, "--junit")
    prof = load_profile(profile) if profile else default_profile()
    res = load_run(results)
    if res.run.pairs_planned == 0:
        raise ResultsFileError(str(results), "the run scheduled 0 pairs: there is nothing to judge")
    if workload is not None:
        res = apply_workload(res, load_workload(workload))
    base = load_run(baseline) if baseline else None
    found: tuple[Difference, ...] = ()
    if baseline is not None and base is not None:
        found = comparable.check(
            Setup.of(res.run), Setup.of(base.run), str(run_file(results)),
            str(run_file(baseline)), allow=allow_incomparable,
        )  # fmt: skip
    report = evaluate(
        res,
        prof,
        today=_today(today),
        baseline=base,
        results_source=str(results),
        baseline_source=str(baseline) if baseline else None,
        allow_incomplete=allow_incomplete,
        incomparable=found,
    )
    return emit_gate(report, junit, as_json)


def emit_gate(report: GateReport, junit: Path | None, as_json: bool) -> int:
    """A gate report as every gate command gives it: JUnit file, JSON or terminal, and the
    exit code (pass 0, fail 1)."""
    if junit:
        write_text_atomic(junit, junit_xml(report))
    if as_json:
        typer.echo(json.dumps(report_to_dict(report), indent=1))
    else:
        print_gate(console(), report)
    return EXIT_OK if report.passed else EXIT_FAIL
