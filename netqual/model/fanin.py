"""Fan-in sweep records (``run --fanin``, docs/fanin.md): k compute nodes fetch KV chunks
from one storage node at once, for every k. Records only; the sweep is
``netqual.run.fanin``, the statistics, knee and verdict ``netqual.analysis.fanin``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.model.fetchprofile import PLAIN

DEFAULT_FANIN_CHUNK_BYTES = 256 * 1024
DEFAULT_FANIN_CHUNKS = 200


@dataclass(frozen=True)
class FaninConfig:
    levels: tuple[int, ...]  # readers at once, ascending; the knee compares with the first
    profile: str = PLAIN
    chunk_bytes: int = DEFAULT_FANIN_CHUNK_BYTES  # one chunk per rank (a workload's chunk)
    chunks: int = DEFAULT_FANIN_CHUNKS  # chunks each rank fetches at each level


@dataclass(frozen=True)
class ChunkStats:
    """Chunk completion (first request to last byte of the whole chunk), microseconds."""

    samples: int
    p50_us: float
    p99_us: float
    p999_us: float
    untrusted: tuple[str, ...] = ()  # percentiles with fewer than 10 samples beyond them


@dataclass(frozen=True)
class FaninLevel:
    readers: int
    chunk: ChunkStats | None  # None: not measured (see skipped / errors)
    goodput_gbps_per_reader: float | None = None  # mean over the readers
    aggregate_gbps: float | None = None  # all readers' bytes over the longest reader's time
    nodes: tuple[str, ...] = ()  # the compute nodes reading at this level
    # racks other than the storage node's with more than one reader: their rack uplink is
    # shared, so a knee here may be the uplink's, not the storage link's
    shared_uplinks: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # readers that failed, with why
    skipped: str | None = None  # why the level was not measured at all
    # TCP retransmissions of the storage node's side of every rank's (first) connection
    # over the level (details.counters.dst.tcp_retrans, summed); None: some rank's unknown
    storage_tcp_retrans: int | None = None
    # The storage agent's host counters over the whole level, one window (not per rank):
    # {interfaces (bytes, drops, pause/PFC), rdma (port and hw counters), rdma_ports_read,
    # shared}, as one side of a path's details.counters; None: its agent did not count
    storage_counters: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class FaninResult:
    storage: str
    profile: str
    chunk_bytes: int
    knee_factor: float
    levels: tuple[FaninLevel, ...]
    knee: int | None  # readers of the first level whose p99 > knee_factor x level 1's
    safe_up_to: int | None  # the most readers measured below the knee; None: not judged
    verdict: str
