"""`netqual workload`: KV sizes and budget of a workload file, without any run."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from netqual.cli.app import JsonOpt, app, console
from netqual.render.workload import print_workload
from netqual.workload import load_workload, preset_names


@app.command()
def workload(
    file: Annotated[
        str,
        typer.Argument(
            help=f"Workload TOML, or a preset: {', '.join(preset_names())}.",
            metavar="FILE",
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Print a workload's KV sizes and the time budget a chunk fetch must beat.

    KV bytes per token, per chunk, per rank and per node, the budget and the break-even
    round trip. Contacts no agent.

    \b
    Examples:
      netqual workload llama-3.1-70b-tp8
      netqual workload workload.toml --json
    """
    w = load_workload(file)
    if as_json:
        typer.echo(json.dumps({"workload": w.to_json()}, indent=1))
        return
    print_workload(console(), w)
