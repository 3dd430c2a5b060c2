"""The typer application and the options several commands share."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer

from netqual.base.units import format_size
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.render.console import LiteralConsole
from netqual.transports import TRANSPORT_NAMES

# option help shows the defaults of the records themselves: one place for each
_POLICY, _PLAN = Policy(), ProbePlan()
_DEPTHS = ", ".join(map(str, _PLAN.depths))

app = typer.Typer(
    name="netqual",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help (git/uv style): rich panels would tag every option with its type.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from netqual import __version__

        typer.echo(f"netqual {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Network pre-flight qualification for remote KV-cache offload (RDMA / TCP).

    Example: start an agent on every node, then qualify the paths between them:

    \b
      netqual agent --token-file netqual.token     # on every node
      netqual check inventory.toml                 # every agent reachable?
      netqual run inventory.toml --out run1        # measure every path
      netqual gate run1                            # pass or fail

    Try it on this machine first: netqual demo
    """


PIPED_WIDTH = 120  # columns of output that goes to a file or pipe (README: NETQUAL_WIDTH)


def _width(stream: TextIO) -> int | None:
    """NETQUAL_WIDTH pins the width (tests, CI logs); else a terminal's own width (rich
    asks it, or reads COLUMNS); else, piped or redirected, ``PIPED_WIDTH`` rather than
    rich's 80, which split tables and headlines of a log in two."""
    width = os.environ.get("NETQUAL_WIDTH", "")
    if width.isdigit() and int(width) > 0:
        return int(width)
    if os.environ.get("COLUMNS") or stream.isatty():
        return None
    return PIPED_WIDTH


def console() -> LiteralConsole:
    """Console for human output, text always literal (netqual.render.console)."""
    return LiteralConsole(width=_width(sys.stdout))


def err_console() -> LiteralConsole:
    return LiteralConsole(stderr=True, width=_width(sys.stderr))


TokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        help="File holding the shared agent token. "
        " [default: $NETQUAL_TOKEN, else the inventory's token_file]",
    ),
]
# agent, probe, doctor: no inventory, so no inventory token_file to fall back on
LoneTokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        help="File holding the shared agent token.  [default: $NETQUAL_TOKEN]",
    ),
]
TransportOpt = Annotated[
    str,
    typer.Option("--transport", metavar="|".join(TRANSPORT_NAMES), help="Transport to probe with."),
]
PolicyOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Policy TOML (docs/policy.md).  [default: "
        f"{_POLICY.metric.value} <= {_POLICY.safe_max_us:g} us safe, "
        f"> {_POLICY.unsafe_above_us:g} us unsafe]",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
WorkloadOpt = Annotated[
    str | None,
    typer.Option(
        "--workload",
        metavar="FILE|PRESET",
        help="Also judge every path by a model's KV chunk: a workload TOML or a preset "
        "(docs/workload.md).",
    ),
]

IterationsOpt = Annotated[
    int | None,
    typer.Option("--iterations", help=f"Kept ping-pong samples.  [default: {_PLAN.iterations}]"),
]
WarmupOpt = Annotated[
    int | None,
    typer.Option("--warmup", help=f"Discarded warm-up iterations.  [default: {_PLAN.warmup}]"),
]
SizeOpt = Annotated[
    str | None,
    typer.Option(
        "--size",
        metavar="BYTES",
        help=f"Ping-pong message size (64, 4KiB).  [default: {_PLAN.size_bytes}]",
    ),
]
ChunkOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--chunk",
        metavar="BYTES",
        help="Bulk chunk size, repeatable.  "
        f"[default: {', '.join(map(format_size, _PLAN.chunks_bytes))}]",
    ),
]
DepthOpt = Annotated[
    list[int] | None,
    typer.Option("--depth", help=f"Outstanding bulk reads, repeatable.  [default: {_DEPTHS}]"),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace output files that already exist.")]
AllowIncomparableOpt = Annotated[
    bool,
    typer.Option(
        "--allow-incomparable",
        help="Compare runs that differ in transport, ping-pong size, policy metric or chunk "
        "set (refused otherwise, exit 2); every output then says so.",
    ),
]
NoBulkOpt = Annotated[bool, typer.Option("--no-bulk", help="Skip the bulk-read probes.")]
BULK_BYTES_HELP = (
    "Bytes read per bulk cell (each chunk at each depth), at least 32 chunks; less for a slow link."
)
BulkBytesOpt = Annotated[
    str | None,
    typer.Option(
        "--bulk-bytes",
        metavar="BYTES",
        help=f"{BULK_BYTES_HELP}  [default: {format_size(_PLAN.bulk_bytes)}]",
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", help=f"Per-pair timeout in seconds.  [default: {_PLAN.timeout_s:g}]"),
]


def host_port(text: str, default_port: int, option: str) -> tuple[str, int]:
    """'host:port', '[v6]:port', 'host' or ':port' -> (host, port)."""
    from netqual.base.errors import UsageError

    host, port_text = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise UsageError(option, f"bad port in {text!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(option, f"port out of range in {text!r}")
    return host or "0.0.0.0", port


def probe_node(text: str, option: str) -> Node:
    """'NAME@HOST:PORT' (the agent must prove it is NAME) or 'HOST:PORT' (whoever answers)."""
    from netqual.base.errors import UsageError
    from netqual.base.names import name_problem
    from netqual.model.node import DEFAULT_PORT

    name, at, endpoint = text.rpartition("@")
    host, port = host_port(endpoint, DEFAULT_PORT, option)
    if not at:
        return Node(name=text, address=host, port=port, verify_name=False)
    if (problem := name_problem(name)) is not None:
        raise UsageError(option, problem)
    return Node(name=name, address=host, port=port)


RdmaDeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--rdma-device",
        metavar="DEVICE",
        help="RDMA device, e.g. mlx5_0.  [default: the one holding the probed IP]",
    ),
]
RdmaPortOpt = Annotated[
    int | None, typer.Option("--rdma-port", help="RDMA port number.  [default: the active port]")
]
SysfsRootOpt = Annotated[
    Path,
    typer.Option(
        "--sysfs-root",
        metavar="DIR",
        help="Root the host path audit, the NIC report and the configuration snapshot "
        "read sys/, proc/ and etc/ below (tests, containers with the host's /sys mounted "
        "elsewhere).",
    ),
]
GidIndexOpt = Annotated[
    int | None,
    typer.Option(
        "--gid-index", help="GID table index.  [default: the RoCE v2 GID of the probed IP]"
    ),
]
QpTimeoutOpt = Annotated[
    int | None,
    typer.Option(
        "--rdma-qp-timeout",
        metavar="N",
        help="RDMA QP local ACK timeout exponent: 4.096 us x 2^N per try, 6 retries before "
        "IBV_WC_RETRY_EXC_ERR (1..31; 18 = 1.07 s). Raise it for long-haul links and for "
        "software RDMA (rxe, siw) on slow or loaded hosts.  [default: 14 = 67 ms]",
    ),
]
