"""What run, probe, demo and retest share: the plan from the options, and measuring into
--out until done or stopped."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from netqual.base.errors import OutputError, RunStopped
from netqual.cli import rundir
from netqual.cli.app import console, err_console
from netqual.files.rundir import RunDir
from netqual.model.plan import ProbePlan
from netqual.model.progress import RunObserver
from netqual.model.stats import Metric
from netqual.planning import options as plan_mod
from netqual.render.engine import print_engine_results
from netqual.render.progress import observer
from netqual.render.terminal import print_results
from netqual.render.workload import print_workload_results
from netqual.report import write_html
from netqual.report.view import GateBanner
from netqual.results import dump_json
from netqual.table.run import Results
from netqual.workload import Workload, load_workload
from netqual.workload.judge import add_to_plan

InsecureOpt = Annotated[
    bool, typer.Option("--insecure", help="Talk to agents started with --insecure (no token).")
]


def plan_from(
    base: ProbePlan,
    iterations: int | None,
    warmup: int | None,
    size: str | None,
    chunk: list[str] | None,
    depth: list[int] | None,
    no_bulk: bool,
    timeout: float | None,
    bulk_bytes: str | None = None,
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
        bulk_bytes=bulk_bytes,
    )


def workload_plan(text: str | None, plan: ProbePlan) -> tuple[Workload | None, ProbePlan]:
    """The workload, and the plan with its chunk at depth ranks_per_node added."""
    if text is None:
        return None, plan
    w = load_workload(text)
    return w, add_to_plan(plan, w)


def finish(results: Results, out: Path, as_json: bool, gate: GateBanner | None = None) -> None:
    write_html(results, RunDir(out).report_html, gate=gate)
    if as_json:
        dump_json(sys.stdout, results, indent=1)  # streamed: no dict of every path
        sys.stdout.write("\n")
        return
    print_results(console(), results)
    print_workload_results(console(), results)
    print_engine_results(console(), results)
    console().print(f"results: {out / 'results.json'}  report: {out / 'report.html'}", style="dim")


def measure_into(
    out: Path,
    as_json: bool,
    progress: str,
    metric: Metric,
    measure: Callable[[RunObserver], Results],
    gate: Callable[[Results], GateBanner | None] = lambda results: None,
    again: str | None = None,
    shown_on: Console | None = None,
) -> Results:
    """The one way run, retest and demo measure into ``out`` and stop. SIGINT and SIGTERM
    stop ``measure`` in any phase; it returns the results finalised so far (incomplete),
    which are written like a finished run's, and the command then exits 130 or 143 with
    ``again`` (default: resume with the same command plus --resume). ``shown_on``: the
    console ``measure`` prints on (the pre-flight check, the demo's notes): the live bar
    must be drawn on that same console, or each line printed beside it leaves a stale copy
    of the bar behind."""
    c = shown_on or (err_console() if as_json else console())
    again = again or f"resume with {rundir.resume_command(out)}"
    try:
        try:
            with rundir.interrupts() as caught, observer(c, progress, metric) as shown:
                results = measure(shown)
        except KeyboardInterrupt:  # before the run had anything to finalise
            raise RunStopped(
                f"interrupted before measuring started: nothing new measured; {again}",
                caught.exit_code,
            ) from None
        finish(results, out, as_json, gate(results))
    except OutputError as err:  # no space, no permission: say how to continue
        raise OutputError(
            err.source,
            f"{err.problem}; the pairs measured so far are kept: fix it, then {again}",
        ) from err
    if not results.run.complete:
        raise rundir.RunInterrupted(results, out, again, caught.exit_code)
    return results
