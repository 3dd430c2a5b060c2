"""The typer application and the options several commands share."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

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
PolicyOpt = Annotated[
    Path | None, typer.Option("--policy", help="Policy TOML (DESIGN.md defaults otherwise).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

IterationsOpt = Annotated[
    int | None, typer.Option("--iterations", help="Kept ping-pong samples (default: 10000).")
]
WarmupOpt = Annotated[
    int | None, typer.Option("--warmup", help="Discarded warm-up iterations (default: 1000).")
]
SizeOpt = Annotated[
    str | None, typer.Option("--size", help="Ping-pong message size (default: 64).")
]
ChunkOpt = Annotated[
    list[str] | None,
    typer.Option("--chunk", help="Bulk chunk size, repeatable (default: 64KiB, 1MiB, 8MiB)."),
]
DepthOpt = Annotated[
    list[int] | None,
    typer.Option("--depth", help="Outstanding bulk reads, repeatable (default: 1, 8)."),
]
NoBulkOpt = Annotated[bool, typer.Option("--no-bulk", help="Skip the bulk-read probes.")]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", help="Per-pair timeout, seconds (default: 120).")
]


def split_endpoint(text: str, default_port: int, option: str) -> tuple[str, int]:
    """'host:port', '[v6]:port', 'host' or ':port' -> (host, port)."""
    from netqual.errors import UsageError

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


RdmaDeviceOpt = Annotated[
    str | None,
    typer.Option("--rdma-device", help="RDMA device (e.g. mlx5_0) (default: automatic)."),
]
RdmaPortOpt = Annotated[
    int | None, typer.Option("--rdma-port", help="RDMA port number (default: automatic).")
]
GidIndexOpt = Annotated[
    int | None,
    typer.Option("--gid-index", help="GID table index (default: RoCE v2 GID of the probed IP)."),
]


def rdma_request(
    device: str | None, port: int | None, gid_index: int | None
) -> dict[str, Any] | None:
    """Overrides for both ends of every RDMA probe, in the probe request's ``rdma`` shape."""
    from netqual.transports.rdma import RdmaOptions

    opts = RdmaOptions(device=device, port=port, gid_index=gid_index)
    return None if opts.empty else {"local": opts.to_json(), "peer": opts.to_json()}
