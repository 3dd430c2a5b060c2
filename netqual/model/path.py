"""One measured path: its statistics, verdict, reasons, and the raw samples a probe returns."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netqual.model.decision import Evidence
from netqual.model.engine import EngineCell
from netqual.model.stats import BulkStats, RttStats
from netqual.model.verdict import Verdict

if TYPE_CHECKING:  # the samples are arrays; an agent's start-up needs no numpy
    import numpy as np
    import numpy.typing as npt


def path_label(src: str, dst: str) -> str:
    """How every output names a path (and a pair of nodes): 'gpu01 -> stor02'."""
    return f"{src} -> {dst}"


class Tier(str, enum.Enum):
    """Topology tier of a path, from inventory labels (or hop count when labels are silent)."""

    SAME_HOST = "same-host"
    SAME_RACK = "same-rack"
    CROSS_RACK = "cross-rack"
    REMOTE = "remote"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class WorkloadResult:
    """A path judged by the workload's chunk: can it fetch one chunk for all ranks of a
    node faster than the budget (recompute or local read)? Beside, not instead of, the
    RTT verdict."""

    verdict: Verdict
    reasons: tuple[str, ...]
    budget_us: float
    fetch_p50_us: float | None = None
    fetch_p99_us: float | None = None
    speedup: float | None = None  # budget / fetch p99
    break_even_rtt_us: float | None = None  # RTT at which speedup would fall to 1
    interpolated: bool = False  # fetch estimated from other chunk sizes / depths


@dataclass(frozen=True)
class PathResult:
    src: str
    dst: str
    transport: str
    verdict: Verdict
    reasons: tuple[str, ...]
    rtt: RttStats | None = None
    bulk: tuple[BulkStats, ...] = ()
    hops: int | None = None
    tier: Tier = Tier.UNKNOWN
    error: str | None = None
    started_at: str | None = None  # ISO 8601 UTC
    duration_s: float | None = None
    details: Mapping[str, object] = field(default_factory=dict)
    workload: WorkloadResult | None = None
    # The NICs the probe ran between and their rail (docs/rails.md); None without NICs.
    src_nic: str | None = None
    dst_nic: str | None = None
    rail: int | None = None
    # The decision (netqual.analysis.decision): ``verdict`` is the worst class of
    # ``evidence``; ``rtt_verdict`` the RTT policy's class alone. None: not decided yet (a
    # path as a probe returns it, whose verdict is the RTT policy's).
    rtt_verdict: Verdict | None = None
    evidence: tuple[Evidence, ...] = ()
    # A fetch engine's cells on this path, one per operation (--engine, docs/engines.md).
    engine: tuple[EngineCell, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.src, self.dst)


@dataclass(frozen=True)
class NotMeasured:
    """A scheduled pair the run did not measure because of a configuration failure (the
    token, a missing device, a limit): not a network verdict, so never a path row."""

    src: str
    dst: str
    reason: str
    kind: str = "configuration"

    @property
    def key(self) -> tuple[str, str]:
        return (self.src, self.dst)


@dataclass(frozen=True)
class RawBulk:
    """One bulk-read cell as measured at the initiator (nanoseconds, not yet reduced)."""

    chunk_bytes: int
    depth: int
    completion_ns: npt.NDArray[np.int64]  # one per read: post -> last byte / completion
    elapsed_ns: int  # first post -> last completion
    error: str | None = None
    # The first post on the monotonic clock (perf_counter_ns) of the process holding the
    # record: the measuring agent's, then, once received, the coordinator's (the agent
    # says how long ago the cell ended, probe_request). Ranks of a fan-in level are placed
    # on one clock by it (docs/fanin.md); None: not known (an older agent)
    started_ns: int | None = None


@dataclass(frozen=True)
class RawProbe:
    """What one probe produced: kept RTT samples (warm-up already dropped) and bulk cells."""

    rtt_ns: npt.NDArray[np.int64]
    warmup_discarded: int
    bulk: tuple[RawBulk, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
