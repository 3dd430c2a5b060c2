"""The typer application and the options several commands share."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(
    name="netqual",
    help="Network pre-flight qualification for remote KV-cache offload (RDMA / TCP).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def console() -> Console:
    """Console for human output. NETQUAL_WIDTH pins the width (tests, CI logs)."""
    width = os.environ.get("NETQUAL_WIDTH")
    return Console(width=int(width) if width else None, highlight=False)


def err_console() -> Console:
    width = os.environ.get("NETQUAL_WIDTH")
    return Console(stderr=True, width=int(width) if width else None, highlight=False)


TokenFileOpt = Annotated[
    Path | None,
    typer.Option("--token-file", help="File holding the shared agent token (else NETQUAL_TOKEN)."),
]
TransportOpt = Annotated[str, typer.Option("--transport", help="tcp or rdma.")]
PolicyOpt = Annotated[Path | None, typer.Option("--policy", help="Policy TOML (DESIGN.md defaults otherwise).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
