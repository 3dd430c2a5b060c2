"""``run --fanin`` options: parsed into a FaninConfig, every mistake a UsageError naming
the option (exit 2) before any agent is asked."""

from __future__ import annotations

from typing import Annotated

import typer

from netqual.base.errors import UsageError
from netqual.base.units import parse_size
from netqual.model.fanin import DEFAULT_FANIN_CHUNKS, FaninConfig
from netqual.model.fetchprofile import PLAIN, PROFILES
from netqual.model.run import Mode
from netqual.model.workload import Workload

FaninOpt = Annotated[
    str | None,
    typer.Option(
        "--fanin",
        metavar="LEVELS",
        help="Fan-in sweep after the pairs (bipartite): for each storage node, k compute "
        "nodes fetch chunks at once for every k, e.g. 1,4,8,16 (docs/fanin.md).",
    ),
]
FetchProfileOpt = Annotated[
    str,
    typer.Option(
        "--fetch-profile",
        metavar="NAME",
        help=f"How the sweep fetches a chunk: {', '.join(PROFILES)}.",
    ),
]
FaninChunkOpt = Annotated[
    str | None,
    typer.Option(
        "--fanin-chunk",
        metavar="BYTES",
        help="Chunk per rank in the sweep.  [default: the workload's chunk, else 256KiB]",
    ),
]
FaninChunksOpt = Annotated[
    int,
    typer.Option("--fanin-chunks", help="Chunks each rank fetches at each level."),
]
MAX_LEVEL = 4096


def fanin_config(
    levels: str | None,
    profile: str,
    chunk: str | None,
    chunks: int,
    mode: Mode,
    workload: Workload | None,
) -> FaninConfig | None:
    if levels is None:
        if profile != PLAIN or chunk is not None:
            opt = "--fetch-profile" if profile != PLAIN else "--fanin-chunk"
            raise UsageError(opt, "applies to the fan-in sweep: add --fanin LEVELS")
        return None
    try:
        ks = sorted({int(x) for x in levels.split(",") if x.strip()})
    except ValueError:
        raise UsageError("--fanin", f"expected readers like 1,4,8,16, got {levels!r}") from None
    if not ks or ks[0] < 1 or ks[-1] > MAX_LEVEL:
        raise UsageError("--fanin", f"levels must be 1 to {MAX_LEVEL}, got {levels!r}")
    if mode is not Mode.BIPARTITE:
        raise UsageError("--fanin", "needs --mode bipartite (readers are compute nodes)")
    known = {name.lower(): name for name in PROFILES}
    if profile.lower() not in known:
        raise UsageError("--fetch-profile", f"unknown {profile!r} (known: {', '.join(PROFILES)})")
    profile = known[profile.lower()]  # names in any case
    if not 1 <= chunks <= 1_000_000:
        raise UsageError("--fanin-chunks", f"must be 1 to 1000000, got {chunks}")
    try:
        size = parse_size(chunk) if chunk is not None else None
    except ValueError as err:
        raise UsageError("--fanin-chunk", str(err)) from None
    if size is None:
        size = workload.chunk_bytes if workload is not None else FaninConfig((1,)).chunk_bytes
    if not 1 <= size <= 64 << 20:
        raise UsageError("--fanin-chunk", f"must be 1 byte to 64MiB, got {size}")
    return FaninConfig(tuple(ks), profile, size, chunks)


__all__ = ["DEFAULT_FANIN_CHUNKS", "fanin_config"]
