"""``netqual agent``."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from netqual.agent.server import Agent
from netqual.base.auth import load_token
from netqual.base.errors import UsageError
from netqual.base.names import LiteralFormatter, name_problem
from netqual.cli.app import (
    GidIndexOpt,
    LoneTokenFileOpt,
    QpTimeoutOpt,
    RdmaDeviceOpt,
    RdmaPortOpt,
    SysfsRootOpt,
    app,
    err_console,
    host_port,
)
from netqual.cli.engine_opts import offered_engines
from netqual.model.node import DEFAULT_PORT
from netqual.transports import AgentLimits, TransportOptions, preload


@app.command()
def agent(
    listen: Annotated[
        str, typer.Option("--listen", metavar="HOST:PORT", help="Address to listen on.")
    ] = f"0.0.0.0:{DEFAULT_PORT}",
    token_file: LoneTokenFileOpt = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Run without a token (lab use only).")
    ] = False,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="Name reported to peers; must match the inventory.  [default: hostname]"
        ),
    ] = None,
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", help="Most control sessions at once.")
    ] = 64,
    auth_timeout: Annotated[
        float,
        typer.Option("--auth-timeout", help="Seconds a new connection has to authenticate."),
    ] = 5.0,
    idle_timeout: Annotated[
        float,
        typer.Option(
            "--idle-timeout",
            help="Seconds a session may stay silent before the agent ends it (a slow or "
            "emulated node may need more).",
        ),
    ] = AgentLimits.idle_timeout_s,
    rdma_device: RdmaDeviceOpt = None,
    rdma_port: RdmaPortOpt = None,
    gid_index: GidIndexOpt = None,
    qp_timeout: QpTimeoutOpt = None,
    engines: Annotated[
        str | None,
        typer.Option(
            "--engines",
            metavar="mooncake,nixl|none",
            help="The fetch engines this agent offers (--engine runs; docs/engines.md); an "
            "engine left out is one this node lacks.  [default: every one installed]",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every session.")] = False,
    sysfs_root: SysfsRootOpt = Path("/"),
) -> None:
    """Run the agent that answers probes (one on every node).

    The coordinator and the other agents connect to it; every connection must present
    the shared token. Its name (--name) must equal the node's name in the inventory.

    \b
    Example:
      netqual agent --listen 0.0.0.0:18515 --token-file /etc/netqual.token
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LiteralFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    token = load_token(token_file, insecure=insecure)
    if token is None:
        err_console().print(
            "warning: running WITHOUT authentication (--insecure); anyone who can "
            "reach this port can make this node send traffic",
            style="bold yellow",
        )
    host, port = host_port(listen, DEFAULT_PORT, "--listen")
    if name is not None and (problem := name_problem(name)) is not None:
        raise UsageError("--name", problem)
    if max_sessions < 1:
        raise UsageError("--max-sessions", f"must be >= 1, got {max_sessions}")
    if not auth_timeout > 0:
        raise UsageError("--auth-timeout", f"must be > 0, got {auth_timeout:g}")
    if not 1 <= idle_timeout <= 86_400:
        raise UsageError("--idle-timeout", f"must be 1 to 86400 s, got {idle_timeout:g}")
    own = TransportOptions.from_flags(rdma_device, rdma_port, gid_index, qp_timeout)
    a = Agent(
        host,
        port,
        token,
        name=name,
        limits=AgentLimits(
            max_sessions=max_sessions, auth_timeout_s=auth_timeout, idle_timeout_s=idle_timeout
        ),
        transport_options=own.over(TransportOptions.from_env()),
        sysfs_root=sysfs_root,
        engines=None if engines is None else offered_engines(engines),
    )
    preload(a.transport_options or own)
    a.bind()
    a.install_signal_handlers()
    a.serve_forever(
        on_ready=lambda: print(f"netqual agent {a.name} listening on {a.host}:{a.port}", flush=True)
    )
