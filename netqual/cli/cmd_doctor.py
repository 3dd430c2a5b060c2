"""``netqual doctor``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from netqual.agent import doctor as doctor_core
from netqual.cli.app import JsonOpt, SysfsRootOpt, TokenFileOpt, TransportOpt, app, console
from netqual.cli.cmd_check import check as check_command
from netqual.render.doctor import render
from netqual.transports import TransportKind


@app.command()
def doctor(
    inventory: Annotated[
        Path | None, typer.Option("--inventory", help="Ask every agent of this inventory.")
    ] = None,
    token_file: TokenFileOpt = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Agents run without a token (lab use only).")
    ] = False,
    transport: TransportOpt = "tcp",
    as_json: JsonOpt = False,
    sysfs_root: SysfsRootOpt = Path("/"),
) -> None:
    """Check this node's RDMA readiness.

    Devices, port state, link layer, active MTU, GID table, pyverbs; the host path audit
    (GPUs, NICs, GPU-NIC affinity, PCIe links: docs/rails.md). With --inventory every
    agent is asked: for --transport tcp that is the pre-flight check (netqual check), for
    rdma every agent's RDMA report, with differences between nodes flagged. Exit 1 when
    anything is wrong, 0 when ready.

    \b
    Examples:
      netqual doctor
      netqual doctor --inventory inventory.toml --transport rdma
    """
    if inventory is not None and TransportKind.parse(transport) is TransportKind.TCP:
        # A TCP run needs no RDMA device: ask what a TCP run needs, not what RDMA would.
        raise typer.Exit(check_command(inventory, "tcp", token_file, insecure, as_json=as_json))
    result = doctor_core.run(inventory, token_file, insecure=insecure, sysfs_root=sysfs_root)
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        render(console(), result)
    if not result["healthy"]:
        raise typer.Exit(1)
