"""``netqual campaign init|add|report|gate|serve``: a qualification campaign across weeks
(docs/campaign.md). The work is in ``netqual.campaign``; these commands load and print."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Annotated

import typer

from netqual.base.errors import UsageError
from netqual.campaign import config, milestone
from netqual.campaign.store import Store, guarded, open_store
from netqual.campaign.trend import trend, trend_to_dict
from netqual.cli.app import AllowIncomparableOpt, JsonOpt, app, console, host_port
from netqual.cli.cmd_gate import _today, emit_gate
from netqual.gate import Waiver, load_profile
from netqual.render.campaign import print_added, print_trend
from netqual.run.runfiles import load_run
from netqual.workload import load_workload
from netqual.workload.judge import apply as apply_workload

campaign_app = typer.Typer(
    help="Track a qualification campaign across weeks: history, trend, milestone gates.\n\n"
    "\b\nExample:\n  netqual campaign init joint --start 2027-01-04\n"
    "  netqual campaign add joint run1\n  netqual campaign gate joint --milestone week2",
    no_args_is_help=True,
)
app.add_typer(campaign_app, name="campaign")

DirArg = Annotated[Path, typer.Argument(metavar="DIR", help="The campaign directory.")]


def _date(text: str | None, option: str) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError as err:
        raise UsageError(option, f"not a date: {text!r} (use YYYY-MM-DD)") from err


def _record_waivers(store: Store, waivers: dict[str, tuple[Waiver, ...]]) -> None:
    for name, items in waivers.items():
        store.set_waivers(name, items)


@campaign_app.command()
def init(
    directory: DirArg,
    start: Annotated[
        str | None, typer.Option("--start", metavar="YYYY-MM-DD", help="First day of week 1.")
    ] = None,
    weeks: Annotated[int, typer.Option("--weeks", help="Length of the campaign.")] = 10,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="The campaign's name in its reports and metrics.  [default: the directory name]",
        ),
    ] = None,
    inventory: Annotated[
        str | None,
        typer.Option(
            "--inventory",
            metavar="FILE",
            help="The inventory the campaign qualifies (recorded in campaign.toml).",
        ),
    ] = None,
) -> None:
    """Start a campaign: DIR/campaign.toml with milestones week2, week6, week10.

    \b
    Example:
      netqual campaign init joint --start 2027-01-04 --weeks 10
    """
    path = config.init_campaign(
        directory, name=name, start=_date(start, "--start"), weeks=weeks, inventory=inventory
    )
    typer.echo(f"wrote {path} and the milestones' profiles in {directory / config.PROFILES_DIR}")


@campaign_app.command()
def add(
    directory: DirArg,
    run: Annotated[
        Path, typer.Argument(metavar="RUN_DIR", help="A run directory or results file.")
    ],
    week: Annotated[
        int | None,
        typer.Option(
            "--week",
            help="The campaign week the run belongs to.  [default: the week of its retested "
            "run, else the week its start date falls in, else the week after the last]",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Add a run of other nodes or another policy.")
    ] = False,
    allow_incomparable: AllowIncomparableOpt = False,
) -> None:
    """Add a finished (or interrupted) run to the campaign's history.

    Adding the same run again is a no-op. A run of other nodes or another policy than the
    campaign's is refused (exit 2) unless --force; one that differs from the campaign's
    first run in transport, ping-pong size, policy metric or chunk set unless
    --allow-incomparable.

    \b
    Examples:
      netqual campaign add joint run-week1
      netqual campaign add joint run-week3 --week 3
    """
    camp = config.load_campaign(directory)
    waivers = {m.name: load_profile(m.profile).waivers for m in camp.milestones}
    results = load_run(run)
    with guarded(camp.store_path):
        store = open_store(camp.store_path, create=True)
        try:
            parent = None
            if results.retest_of is not None:
                parent = next(
                    (
                        store.run_by_source(p)
                        for p in _candidates(run, results.retest_of)
                        if store.run_by_source(p)
                    ),
                    None,
                )
            runs = store.runs()
            chosen = config.week_for(
                camp, explicit=week, retest_week=parent.week if parent else None,
                started_at=results.run.started_at, last_week=runs[-1].week if runs else None,
            )  # fmt: skip
            added = store.add(
                results, source=run.resolve(), week=chosen,
                retest_of=parent.run_id if parent else None, force=force,
                allow_incomparable=allow_incomparable,
            )  # fmt: skip
            _record_waivers(store, waivers)
        finally:
            store.close()
    print_added(console(), added, str(directory))


def _candidates(run: Path, retest_of: str) -> list[Path]:
    """Where the run a retest re-measured may be: as written, or beside the retest."""
    base = run if run.is_dir() else run.parent
    return [Path(retest_of).resolve(), (base.parent / retest_of).resolve()]


@campaign_app.command()
def report(
    directory: DirArg,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the trend report here.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the campaign's trend: verdicts per week, regressions, suspects, waivers.

    \b
    Example:
      netqual campaign report joint --html joint.html
    """
    camp = config.load_campaign(directory)
    with guarded(camp.store_path):
        store = open_store(camp.store_path, read_only=True)
        try:
            t = trend(store, camp)
        finally:
            store.close()
    if html is not None:
        from netqual.report.campaign import write_campaign_html

        write_campaign_html(t, html)
    if as_json:
        typer.echo(json.dumps(trend_to_dict(t), indent=1))
    else:
        print_trend(console(), t)
        if html is not None:
            typer.echo(f"wrote {html}")


@campaign_app.command()
def gate(
    directory: DirArg,
    milestone_name: Annotated[
        str,
        typer.Option(
            "--milestone", metavar="NAME", help="A milestone of campaign.toml, e.g. week6."
        ),
    ],
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write JUnit XML here.")
    ] = None,
    as_json: JsonOpt = False,
    today: Annotated[
        str | None,
        typer.Option("--today", metavar="YYYY-MM-DD", help="Date that decides waiver expiry."),
    ] = None,
) -> int:
    """Judge a milestone: the latest run of its week with its profile and the history.

    A milestone is judged in or after its week only: without a run of its week or later it
    is not due (JUnit: skipped) and does not pass. A week with no run is judged by the
    first run after it. Exit 0 pass, 1 fail or not due, 2 bad input, 3 runtime error.

    \b
    Example:
      netqual campaign gate joint --milestone week6 --junit week6.xml
    """
    camp = config.load_campaign(directory)
    stone = camp.milestone(milestone_name)
    profile = load_profile(stone.profile)
    day = _today(today)
    with guarded(camp.store_path):
        store = open_store(camp.store_path)
        try:
            chosen = milestone.runs_to_judge(store, stone)
            if chosen is None:  # not due: never recorded, so never shown as passed
                return emit_gate(
                    milestone.not_due(camp, store, stone, profile, day), junit, as_json
                )
            target, base = chosen
            results = load_run(Path(target.source))
            if stone.workload is not None:
                results = apply_workload(results, load_workload(stone.workload))
            if not milestone.compares(profile):
                base = None  # no baseline rule: no baseline
            report = milestone.judge(
                camp, store, stone, profile, target, results,
                baseline=milestone.stored_baseline(store, base, results) if base else None,
                baseline_source=base.source if base else None, today=day,
            )  # fmt: skip
            store.record_gate(
                target.seq,
                stone.name,
                profile.name,
                report.passed,
                [o.rule for o in report.failed],
                day,
            )
            store.set_waivers(stone.name, profile.waivers)
        finally:
            store.close()
    return emit_gate(report, junit, as_json)


@campaign_app.command()
def serve(
    directory: DirArg,
    listen: Annotated[
        str, typer.Option("--listen", metavar="HOST:PORT", help="Where to serve /metrics.")
    ] = "127.0.0.1:9515",
    seconds: Annotated[
        float | None, typer.Option("--seconds", help="Stop after this long.  [default: never]")
    ] = None,
) -> None:
    """Serve the campaign's metrics on /metrics for Prometheus (OpenMetrics).

    Listens on loopback unless --listen says otherwise. Safe to expose: per-connection
    timeouts, a connection cap, one store read per few seconds however many scrape
    (docs/campaign.md, "Serving").

    \b
    Example:
      netqual campaign serve joint --listen 0.0.0.0:9515
    """
    # prometheus-client and asyncio for this subcommand only (~50 ms of every campaign start)
    from netqual.campaign.metrics import CampaignCollector, openmetrics_text
    from netqual.campaign.serve import MetricsServer, Snapshot

    camp = config.load_campaign(directory)
    open_store(camp.store_path, read_only=True).close()  # fail now, not at the first scrape
    host, port = host_port(listen, 9515, "--listen")
    collector = CampaignCollector(camp.store_path, {m.name: m.week for m in camp.milestones})
    server = MetricsServer(Snapshot(lambda: openmetrics_text(collector).encode()), host, port)
    try:
        bound_host, bound_port = server.start()
    except OSError as err:
        raise UsageError("--listen", f"cannot listen on {listen}: {err.strerror or err}") from err
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    typer.echo(f"serving http://{shown}:{bound_port}/metrics (Ctrl-C stops)", color=False)
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        server.stop()
