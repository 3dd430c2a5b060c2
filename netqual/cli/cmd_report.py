"""`netqual report` (terminal / HTML / CSV from a results file) and `netqual diff`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from netqual.cli.app import JsonOpt, app, console
from netqual.cli.diff_text import print_diff
from netqual.diff import diff_runs, diff_to_dict
from netqual.errors import UsageError
from netqual.gate import load_profile
from netqual.matrix import STATISTICS
from netqual.render.terminal import print_results
from netqual.report import write_csv, write_html
from netqual.report.html import render_diff_html
from netqual.results import load


@app.command()
def report(
    results: Annotated[Path, typer.Argument(help="results.json of a run.")],
    html: Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.")] = None,
    csv: Annotated[
        Path | None, typer.Option("--csv", help="Write one CSV row per path here.")
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option("--profile", help="Gate profile whose waivers the HTML report shows."),
    ] = None,
    stat: Annotated[
        str | None,
        typer.Option(
            "--stat",
            help=f"Statistic in the terminal matrix: {', '.join(STATISTICS)} "
            "(default: the policy metric).",
        ),
    ] = None,
) -> None:
    """Re-render a results file: terminal summary and matrix, and optionally HTML and CSV."""
    if stat is not None and stat not in STATISTICS:
        raise UsageError("--stat", f"unknown statistic {stat!r} (one of {', '.join(STATISTICS)})")
    res = load(results)
    out = console()
    print_results(out, res, stat)
    waivers = load_profile(profile).waivers if profile else ()
    if html:
        write_html(res, html, waivers=waivers)
        out.print(f"wrote {html}")
    if csv:
        write_csv(res, csv)
        out.print(f"wrote {csv}")


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="results.json of the earlier run.")],
    new: Annotated[Path, typer.Argument(help="results.json of the later run.")],
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the comparison as HTML.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare two runs: paths that changed class, p99 deltas, new and missing paths."""
    d = diff_runs(load(old), load(new), old_source=str(old), new_source=str(new))
    if html:
        html.write_text(render_diff_html(d), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(diff_to_dict(d), indent=1))
        return
    print_diff(console(), d)
    if html:
        console().print(f"wrote {html}")
