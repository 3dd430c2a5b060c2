"""Fan-in sweep records (``run --fanin``, docs/fanin.md): k compute nodes fetch KV chunks
from one storage node at once, for every k. Records only; the sweep is
``netqual.run.fanin``, the statistics, knee and verdict ``netqual.analysis.fanin``."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.model.engine import EngineName
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
    # The p99's 95% confidence interval (order statistics, analysis.stats.quantile_ci): the
    # knee is judged on it. None: a results file written before it was kept
    p99_ci_us: tuple[float, float] | None = None


class Call(str, enum.Enum):
    """What the knee rule made of one level's chunk p99 against the first level's (both as
    95% confidence intervals, docs/fanin.md "Knee")."""

    BASE = "base"  # the first measured level: what the others are compared with
    WITHIN = "within"  # surely within the factor: its CI's top <= factor x the base's bottom
    BEYOND = "beyond"  # surely past it: its CI's bottom > factor x the base's top
    UNDECIDED = "undecided"  # the intervals straddle the factor, or the level is in doubt


@dataclass(frozen=True)
class RankSpan:
    """When one rank of a level read, on the coordinator's clock, in seconds from the
    level's first rank's start (each agent says how long before its answer the rank
    ended; the coordinator places it from when the answer arrived)."""

    node: str
    start_s: float
    end_s: float
    fetched_bytes: int


@dataclass(frozen=True)
class FaninLevel:
    readers: int
    chunk: ChunkStats | None  # None: not measured (see skipped / errors)
    # aggregate_gbps / readers: a reader's share while all of them read
    goodput_gbps_per_reader: float | None = None
    # What the readers received while all of them were reading (from the last reader's
    # start to the first one's end, all_reading_s), over that time: the storage node's rate
    # at this many readers at once, what iperf3 with one stream per reader measures. When
    # they were all reading for less than half of busy_s: level_gbps (and per reader:
    # the bytes over the sum of the readers' own busy times). Without the ranks' times
    # (an older results file): over the longest rank's time, which overstates it when
    # the ranks did not overlap
    aggregate_gbps: float | None = None
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
    busy_s: float | None = None  # the union of the ranks' reading intervals
    level_gbps: float | None = None  # all the level's bytes over busy_s
    all_reading_s: float | None = None  # the time every reader was reading at once
    # readers reading at once, on average over busy_s (k when all k readers overlap fully)
    readers_busy: float | None = None
    ranks: tuple[RankSpan, ...] = ()  # every rank that answered, in the order asked
    call: Call | None = None  # the knee rule's call (None: not measured, or not judged)
    # the level's rounds: 1, or more when the first left it undecided (run.fanin measures
    # an undecided level again, up to MAX_ROUNDS, and pools the rounds)
    rounds: int = 1


@dataclass(frozen=True)
class EngineFaninLevel:
    """One fan-in level read through a fetch engine (``run --fanin --engine``,
    docs/fanin.md "Through the fetch engine"): one engine worker per reader, all reading
    the storage node's one engine target, started together once every reader was
    connected. ``level`` is reduced exactly as the probe's levels are (each reader a rank:
    chunk completion, busy time, the aggregate while all read, the knee rule's call)."""

    level: FaninLevel
    transports: tuple[str, ...] = ()  # what the readers' engines moved the bytes over
    carried_by: tuple[str, ...] = ()  # the readers' interfaces that carried them (counters)
    storage_carried_by: str | None = None  # the storage node's interface that sent them
    fallback: str | None = None  # the first reader whose engine did not do as asked: why
    # the level's first request to the last reader connected and its first chunk read,
    # when the start barrier released them (engine start-up, the connection; a reader
    # that failed before is not waited for); None: no reader got there
    ready_s: float | None = None
    # chunk p50 over the probe's chunk p50 at the same readers (None: either is missing)
    vs_probe: float | None = None
    # with --engine-require: the fallback that made the level not measured (configuration),
    # as a path's engine cells make their path (its chunks are dropped: the engine did not
    # move them as the deployment must); None: measured, or no --engine-require
    configuration: str | None = None

    @property
    def readers(self) -> int:
        return self.level.readers


@dataclass(frozen=True)
class EngineFanin:
    """A storage node's fan-in levels through a fetch engine, judged by the same knee rule
    as the probe's levels, beside them in ``FaninResult.engine``."""

    engine: EngineName
    version: str | None
    levels: tuple[EngineFaninLevel, ...]
    knee: int | None
    safe_up_to: int | None
    verdict: str


@dataclass(frozen=True)
class FaninResult:
    storage: str
    profile: str
    chunk_bytes: int
    knee_factor: float
    levels: tuple[FaninLevel, ...]
    knee: int | None  # readers of the first level whose p99 is surely past the factor
    # the last level of the run of levels, from the first, surely within the factor (a
    # level the rule cannot call ends the run: it is preliminary); None: not judged
    safe_up_to: int | None
    verdict: str
    # another storage node whose sweep had the knee's readers, over the same rack
    # uplinks, without a knee: the knee is this node's own port, not the uplinks
    uplinks_cleared_by: str | None = None
    # other storage nodes read by the same readers over the same shared rack uplinks that
    # show the knee there too: the uplinks (or the readers) are the likelier cause
    uplinks_implicated_by: tuple[str, ...] = ()
    # the same levels read through the run's fetch engine (--engine), None without one
    engine: EngineFanin | None = None

    @property
    def undecided(self) -> tuple[int, ...]:
        """Levels the knee rule could not call: preliminary (docs/fanin.md)."""
        return tuple(lv.readers for lv in self.levels if lv.call is Call.UNDECIDED)
