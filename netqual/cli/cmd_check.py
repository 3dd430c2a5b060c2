"""``netqual check``: the pre-flight check on its own; ``run`` calls ``preflight_or_stop``."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from netqual.analysis.fleet import evaluate, load_fleet_policy
from netqual.analysis.fleet import to_dict as fleet_to_dict
from netqual.base.auth import load_token
from netqual.base.errors import EXIT_FAIL, EXIT_OK
from netqual.cli.app import (
    JsonOpt,
    PolicyOpt,
    TokenFileOpt,
    TransportOpt,
    app,
    console,
    err_console,
)
from netqual.cli.engine_opts import engine_names
from netqual.model.fleet import FleetPolicy, FleetResult
from netqual.model.preflight import PreflightReport
from netqual.planning.inventory import load_inventory
from netqual.render.check import engines_lines, print_check, print_nics
from netqual.render.fleet import print_fleet
from netqual.run import preflight
from netqual.run.config import RunConfig
from netqual.transports import TransportKind

CheckTimeoutOpt = Annotated[
    float,
    typer.Option("--check-timeout", help="Seconds each agent has to answer the pre-flight check."),
]


@app.command()
def check(
    inventory: Annotated[
        Path, typer.Argument(metavar="INVENTORY", help="Inventory TOML (docs/inventory.md).")
    ],
    transport: TransportOpt = "tcp",
    token_file: TokenFileOpt = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Talk to agents started with --insecure (no token).")
    ] = False,
    timeout: CheckTimeoutOpt = 5.0,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            help="Ask again every second until every agent is ready or this much time has "
            "passed (agents still starting).",
        ),
    ] = 0.0,
    fleet: Annotated[
        bool,
        typer.Option(
            "--fleet",
            help="Also show every node's configuration snapshot and the outliers across "
            "nodes (docs/evidence.md); exit 1 on an outlier.",
        ),
    ] = False,
    policy: PolicyOpt = None,
    nics: Annotated[
        bool,
        typer.Option(
            "--nics",
            help="Also show the IP interfaces and RDMA ports each agent reports (docs/rails.md).",
        ),
    ] = False,
    as_json: JsonOpt = False,
    engine: Annotated[
        list[str] | None,
        typer.Option(
            "--engine",
            metavar="mooncake|nixl",
            help="Also check this fetch engine on every node (repeatable): installed, its "
            "version, the transport it would use (docs/engines.md).",
        ),
    ] = None,
) -> int:
    """Check every agent of an inventory before a run.

    Each agent must be reachable, accept the token, be the node the inventory names, run
    this netqual version, have a sane clock and offer the transport (RDMA only with
    --transport rdma). One row per node; exit 0 when all are ready, 1 otherwise.

    \b
    Examples:
      netqual check inventory.toml
      netqual check inventory.toml --transport rdma
      netqual check inventory.toml --fleet --policy policy.toml
    """
    inv = load_inventory(inventory)
    expect = load_fleet_policy(policy) if policy else FleetPolicy()
    token = load_token(token_file or inv.token_file, insecure=insecure)
    kind = TransportKind.parse(transport).value
    deadline = time.monotonic() + wait
    engines = tuple(dict.fromkeys(engine_names(engine or [])))
    report = preflight.check(inv.nodes, token, kind, timeout, engines=engines)
    while not report.ok and time.monotonic() + 1.0 < deadline:
        time.sleep(1.0)
        report = preflight.check(inv.nodes, token, kind, timeout, engines=engines)
    found = None
    if fleet:
        roles = {n.name: n.role.value for n in inv.nodes}
        snaps = [n.snapshot for n in report.nodes if n.snapshot is not None]
        found = evaluate(snaps, roles, expect, {n.name: n.nics for n in inv.nodes})
    if as_json:
        typer.echo(json.dumps(preflight_to_dict(report, found), indent=1))
    else:
        print_check(console(), report)
        if found is not None:
            missing = [n.node for n in report.nodes if n.snapshot is None]
            print_fleet(console(), found, missing)
        if nics:
            print_nics(console(), report)
    return EXIT_OK if report.ok and not (found and found.outliers) else EXIT_FAIL


# Not in `check --json`: the snapshot has its own fleet section; the rest is asked for `run`.
_NOT_IN_JSON = frozenset({"snapshot", "host", "measuring"})


def preflight_to_dict(
    report: PreflightReport, found: FleetResult | None = None
) -> dict[str, object]:
    doc: dict[str, object] = {
        "ok": report.ok,
        "transport": report.transport,
        "coordinator_version": report.coordinator_version,
        "duration_s": report.duration_s,
        "nodes": [
            {k: v for k, v in asdict(n).items() if k not in _NOT_IN_JSON} | {"ok": n.ok}
            for n in report.nodes
        ],
    }
    if found is not None:
        doc["fleet"] = fleet_to_dict(found)
    return doc


def preflight_or_stop(
    out: Console, keep_going: bool, timeout_s: float, cfg: RunConfig
) -> PreflightReport:
    """``run``'s first step: the check table, then stop (exit 3) on any configuration error
    unless ``keep_going``, in which case the run measures the other nodes and lists the
    pairs of these as not measured (configuration). The report, with each agent's host path
    audit and running probes, goes to the coordinator, which asks no agent again."""
    engines = (cfg.engine.name,) if cfg.engine is not None else ()
    nodes, transport = cfg.nodes, cfg.transport.value
    report = preflight.check(nodes, cfg.token, transport, timeout_s, cfg.plan, True, engines)
    if report.ok:
        out.print(
            f"pre-flight: all {len(nodes)} agents ready for {transport} probes "
            f"({report.duration_s:.1f} s)",
            style="dim",
        )
        for line in engines_lines(report):
            out.print(f"pre-flight: {line}", style="dim", soft_wrap=True)
        return report
    print_check(err_console(), report)
    if not keep_going:
        raise preflight.PreflightFailed(report)
    failed = len(report.failed)
    err_console().print(
        f"warning: --keep-going: the pairs of {failed} {'node' if failed == 1 else 'nodes'} "
        "that failed the pre-flight check will be listed as not measured (configuration)",
        style="yellow",
        soft_wrap=True,
    )
    return report
