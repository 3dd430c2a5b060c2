"""``netqual export``: a run or a campaign as metrics for Prometheus (docs/campaign.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from netqual.base.errors import UsageError
from netqual.campaign.config import CONFIG_FILE, load_campaign
from netqual.campaign.metrics import CampaignCollector, GateMetric, RunCollector, openmetrics_text
from netqual.cli.app import app
from netqual.cli.cmd_gate import _today
from netqual.cli.rundir import check_file_out
from netqual.files.outfiles import write_text_atomic
from netqual.gate import evaluate, load_profile
from netqual.run.runfiles import load_run


@app.command()
def export(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="RESULTS_OR_CAMPAIGN",
            help="A run directory or results file, or a campaign directory.",
        ),
    ],
    openmetrics: Annotated[
        bool,
        typer.Option(
            "--openmetrics", help="OpenMetrics text: the only format, so also the default."
        ),
    ] = True,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="FILE",
            help="Write to this file, never over one unless --force.  [default: stdout]",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    profile: Annotated[
        Path | None,
        typer.Option("--profile", help="For a run: also export this gate profile's outcome."),
    ] = None,
) -> None:
    """Write metrics for Prometheus: per-path or rack-pair RTTs, verdict counts, gates.

    \b
    Examples:
      netqual export run1 > run1.prom
      netqual export joint --out joint.prom
    """
    del openmetrics  # the one format: the flag is accepted, and what happens without it
    if out is not None:
        check_file_out(out, force, "--out")  # before reading anything
    if (source / CONFIG_FILE).is_file():
        if profile is not None:
            raise UsageError("--profile", "a campaign exports its milestones' outcomes already")
        camp = load_campaign(source)
        weeks = {m.name: m.week for m in camp.milestones}
        text = openmetrics_text(CampaignCollector(camp.store_path, weeks))
    else:
        results = load_run(source)
        gates = []
        if profile is not None:
            prof = load_profile(profile)
            report = evaluate(results, prof, today=_today(None), results_source=str(source))
            gates.append(GateMetric(prof.name, report.passed))
        text = openmetrics_text(RunCollector(results, gates))
    if out is None:
        typer.echo(text, nl=False)
    else:
        write_text_atomic(out, text)
