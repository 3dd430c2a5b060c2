"""Frozen records that cross module boundaries. Units are in the names; nothing is rounded.

The JSON mapping of these records (the results file, docs/results.md) lives in
``netqual.results``; this module knows nothing about files. Every other layer may import
it; it imports no other part of netqual but the fetch profiles' names (a plan names one).
"""

from __future__ import annotations

import datetime as dt
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.choices import choices_text
from netqual.fetchprofile import PROFILES

KIB = 1 << 10
MIB = 1 << 20

DEFAULT_PORT = 18515
SCHEMA_VERSION = "1"  # the results file format (docs/results.md)


def path_label(src: str, dst: str) -> str:
    """How every output names a path (and a pair of nodes): 'gpu01 -> stor02'."""
    return f"{src} -> {dst}"


class Verdict(str, enum.Enum):
    SAFE = "offload-safe"
    MARGINAL = "marginal"
    UNSAFE = "unsafe"

    @property
    def rank(self) -> int:
        """0 best .. 2 worst; used to order paths and to detect a class drop."""
        return _VERDICT_RANK[self]


_VERDICT_RANK = {Verdict.SAFE: 0, Verdict.MARGINAL: 1, Verdict.UNSAFE: 2}


class Role(str, enum.Enum):
    COMPUTE = "compute"
    STORAGE = "storage"
    ANY = "any"


class Mode(str, enum.Enum):
    FULL_MESH = "full-mesh"
    BIPARTITE = "bipartite"
    SAMPLED = "sampled"


class Metric(str, enum.Enum):
    """An RTT percentile: the statistic a policy judges and paths are ranked by.

    The one registry of percentiles: its quantile (what stats computes), its RttStats field
    (``p99`` -> ``p99_us``), and its name in files and options (the value)."""

    P50 = "p50"
    P90 = "p90"
    P99 = "p99"
    P999 = "p999"

    @property
    def quantile(self) -> float:
        return _QUANTILE[self]

    @property
    def field(self) -> str:
        """The RttStats attribute holding this percentile."""
        return f"{self.value}_us"


_QUANTILE = {Metric.P50: 0.50, Metric.P90: 0.90, Metric.P99: 0.99, Metric.P999: 0.999}

# Every RTT statistic a path carries, in the order tables, exports and the results file use.
RTT_STATISTICS = ("min", "p50", "p90", "p99", "p999", "max", "mean", "stdev")


class Tier(str, enum.Enum):
    """Topology tier of a path, from inventory labels (or hop count when labels are silent)."""

    SAME_HOST = "same-host"
    SAME_RACK = "same-rack"
    CROSS_RACK = "cross-rack"
    REMOTE = "remote"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Nic:
    """One NIC of a node (inventory ``nics``, docs/rails.md): the interface name, its
    address (what a probe binds to and connects to), its rail, and the RDMA device on it."""

    name: str
    address: str
    rail: int
    device: str | None = None


@dataclass(frozen=True)
class IpInterface:
    """An IP interface an agent found on its node (``netqual check --nics``)."""

    name: str
    addresses: tuple[str, ...]  # IP literals, without prefix length
    mtu: int | None = None
    speed_mbps: int | None = None  # None: not reported (virtual, down, unreadable)


@dataclass(frozen=True)
class RdmaPort:
    """An RDMA device port an agent found: the netdev under it and its non-zero GIDs."""

    device: str
    port: int
    state: str
    netdev: str | None = None
    gids: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostNics:
    """What an agent reports of its NICs in the pre-flight check (docs/rails.md)."""

    interfaces: tuple[IpInterface, ...] = ()
    rdma: tuple[RdmaPort, ...] = ()


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    port: int = DEFAULT_PORT
    role: Role = Role.ANY
    rack: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # The agent must prove it is ``name`` (its --name); False for ``probe HOST:PORT``.
    verify_name: bool = True
    nics: tuple[Nic, ...] = ()
    # An endpoint below a node (netqual.planning.rails): ``name`` is "NODE/NIC" and ``address`` the
    # NIC's (what probes connect to and bind, what the bulk budget counts per host);
    # ``agent`` / ``agent_address`` are the node whose agent serves it and where that
    # agent takes requests; ``nic`` is the NIC.
    agent: str | None = None
    agent_address: str | None = None
    nic: Nic | None = None

    @property
    def identity(self) -> str | None:
        """The name the agent at this address must authenticate as, if known."""
        if not self.verify_name:
            return None
        return self.agent or self.name

    @property
    def node_name(self) -> str:
        """The node this is, or the node this endpoint belongs to."""
        return self.agent or self.name

    @property
    def control_address(self) -> str:
        """Where the coordinator asks this node's agent for a probe."""
        return self.agent_address or self.address

    @property
    def endpoint(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"


def node_nics(nodes: Sequence[Node]) -> dict[str, tuple[Nic, ...]]:
    """Each node's NICs, from a node list or from a run's endpoints (``NODE/NIC``)."""
    out: dict[str, tuple[Nic, ...]] = {}
    for n in nodes:
        if n.nic is not None and n.agent is not None:
            out[n.agent] = (*out.get(n.agent, ()), n.nic)
        else:
            out[n.name] = n.nics
    return out


class FieldError(ValueError):
    """A record's field out of its range; each input (option, inventory key, wire field,
    results file) names ``field`` its own way."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class PlanFieldError(FieldError):
    """A ProbePlan field out of its range."""


class PolicyFieldError(FieldError):
    """A Policy field out of its range, or thresholds in the wrong order."""


# Field -> (lowest, highest) for the integer fields of a ProbePlan. Wide enough for any
# real plan; their job is to keep absurd values (negative, 4300-digit) out of arithmetic.
_PLAN_INT_RANGES = {
    "iterations": (1, 10**9),
    "warmup": (0, 10**9),
    "size_bytes": (1, 1 << 30),
    "bulk_bytes": (0, 1 << 50),
    "min_reads": (1, 10**9),
}
_PLAN_LIST_RANGES = {"chunks_bytes": (1, 1 << 40), "depths": (1, 1 << 20)}
_PLAN_MAX_TIMEOUT_S = 7 * 86400.0
PLAN_MAX_LIST_ITEMS = 64


def _check_int(field: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanFieldError(field, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        shown = value if abs(value) < 10**30 else f"a {value.bit_length()}-bit number"
        bound = f">= {low}" if value < low else f"<= {high}"
        raise PlanFieldError(field, f"must be {bound}, got {shown}")


def _check_policy_int(field: str, value: object) -> None:
    try:
        _check_int(field, value, 1, 10**12)
    except PlanFieldError as err:
        raise PolicyFieldError(err.field, err.problem) from None


@dataclass(frozen=True)
class ProbePlan:
    """What to measure on one path. Defaults: docs/inventory.md "[probe]".

    Validated on construction (PlanFieldError naming the field): no other place checks a
    plan's own consistency; ``AgentLimits.check`` adds what one agent allows.
    """

    iterations: int = 10_000
    warmup: int = 1_000
    size_bytes: int = 64
    chunks_bytes: tuple[int, ...] = (64 * KIB, 1 * MIB, 8 * MIB)
    depths: tuple[int, ...] = (1, 8)
    bulk: bool = True
    # Bytes moved per (chunk, depth) bulk cell; reads = max(min_reads, bulk_bytes // chunk).
    bulk_bytes: int = 128 * MIB
    min_reads: int = 32
    timeout_s: float = 120.0
    # A connector's access pattern for the bulk cells (netqual.fetchprofile); "" = plain
    # reads at every depth, as without a profile.
    fetch_profile: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.fetch_profile, str) or (
            self.fetch_profile and self.fetch_profile not in PROFILES
        ):
            raise PlanFieldError("fetch_profile", f"unknown, known: {', '.join(PROFILES)}")
        for name, (low, high) in _PLAN_INT_RANGES.items():
            _check_int(name, getattr(self, name), low, high)
        for name, (low, high) in _PLAN_LIST_RANGES.items():
            values = getattr(self, name)
            if not isinstance(values, tuple) or not 0 < len(values) <= PLAN_MAX_LIST_ITEMS:
                raise PlanFieldError(name, f"must be 1-{PLAN_MAX_LIST_ITEMS} values")
            for v in values:
                _check_int(name, v, low, high)
        if not isinstance(self.bulk, bool):
            raise PlanFieldError("bulk", "must be true or false")
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise PlanFieldError("timeout_s", f"must be a number, got {type(t).__name__}")
        if not (math.isfinite(t) and 0 < t <= _PLAN_MAX_TIMEOUT_S):
            raise PlanFieldError("timeout_s", f"must be in (0, {_PLAN_MAX_TIMEOUT_S:g}], got {t}")

    def reads_for(self, chunk_bytes: int) -> int:
        return max(self.min_reads, self.bulk_bytes // max(1, chunk_bytes))


@dataclass(frozen=True)
class Percentile:
    """One percentile, with whether enough samples stand behind it."""

    value_us: float
    trusted: bool


@dataclass(frozen=True)
class Ci95:
    """The distribution-free 95% confidence interval (low_us, high_us) of each percentile,
    one field per ``Metric`` (named by its value). None where it was not computed: files of
    older versions kept only the policy metric's interval."""

    p50: tuple[float, float] | None = None
    p90: tuple[float, float] | None = None
    p99: tuple[float, float] | None = None
    p999: tuple[float, float] | None = None

    def of(self, metric: Metric) -> tuple[float, float] | None:
        got: tuple[float, float] | None = getattr(self, metric.value)
        return got


NO_CI95 = Ci95()


@dataclass(frozen=True)
class RttStats:
    """Small-message round trip statistics, microseconds, full RTT at the initiator."""

    samples: int
    min_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    p999_us: float
    max_us: float
    mean_us: float
    stdev_us: float  # population standard deviation (ddof=0) of the kept samples
    untrusted: tuple[str, ...] = ()  # e.g. ("p999",) when n < 10,000
    # Distribution-free 95% confidence interval of every percentile (netqual.analysis.stats)
    ci95: Ci95 = NO_CI95
    # Compact distribution for plots: log-spaced bin edges (len = len(counts) + 1)
    histogram_edges_us: tuple[float, ...] = ()
    histogram_counts: tuple[int, ...] = ()

    def value(self, metric: Metric) -> float:
        return self.statistic(metric.value)

    def statistic(self, name: str) -> float:
        """One of RTT_STATISTICS by name ("p99", "stdev", ...), in microseconds."""
        value: float = getattr(self, f"{name}_us")
        return value

    @property
    def histogram_bins(self) -> tuple[float, float] | None:
        """(first_bin, bins_per_decade) of the log-spaced histogram; None without one."""
        edges = self.histogram_edges_us
        if len(edges) < 2:
            return None
        per_decade = round(1 / math.log10(edges[1] / edges[0]))
        return (float(round(math.log10(edges[0]) * per_decade)), float(per_decade))

    def summary_values(self) -> tuple[float, ...]:
        """samples, then RTT_STATISTICS: the order tables and exports use."""
        return (self.samples, *(self.statistic(n) for n in RTT_STATISTICS))

    @property
    def unstable(self) -> bool:
        """pyperf's rule of thumb: stdev >= 10% of the mean."""
        return self.mean_us > 0 and self.stdev_us >= 0.1 * self.mean_us


@dataclass(frozen=True)
class BulkStats:
    """Bulk read of chunk_bytes with depth requests outstanding."""

    chunk_bytes: int
    depth: int
    reads: int
    goodput_gbps: float  # payload bits / wall time of the whole cell, 10^9 bit/s
    completion_p50_us: float  # request posted -> last byte of that chunk received
    completion_p99_us: float
    completion_max_us: float
    error: str | None = None


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

    @property
    def key(self) -> tuple[str, str]:
        return (self.src, self.dst)


@dataclass(frozen=True)
class Policy:
    """How paths are judged. Validated on construction (PolicyFieldError naming the field),
    wherever it comes from: a policy file, a results file, the defaults."""

    metric: Metric = Metric.P99
    safe_max_us: float = 200.0
    unsafe_above_us: float = 500.0
    min_samples: int = 10_000
    # --fanin: the knee is the first level whose chunk p99 exceeds level 1's by more
    # than this factor (docs/fanin.md)
    fanin_knee_factor: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.metric, Metric):
            raise PolicyFieldError(
                "metric", f"must be one of {choices_text(Metric)}, got {self.metric!r}"
            )
        for name in ("safe_max_us", "unsafe_above_us"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PolicyFieldError(name, f"must be a number, got {type(value).__name__}")
            if not 0 < value < math.inf:
                raise PolicyFieldError(name, f"must be a positive finite number, got {value}")
        if self.unsafe_above_us < self.safe_max_us:
            raise PolicyFieldError(
                "unsafe_above_us",
                f"must be >= safe_max_us ({self.safe_max_us:g}), got {self.unsafe_above_us:g}",
            )
        _check_policy_int("min_samples", self.min_samples)
        k = self.fanin_knee_factor
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not 1 < k < math.inf:
            raise PolicyFieldError("fanin_knee_factor", f"must be a number > 1, got {k!r}")


@dataclass(frozen=True)
class RunMeta:
    started_at: str
    finished_at: str
    transport: str
    mode: Mode
    policy: Policy
    plan: ProbePlan
    clock: Mapping[str, object]  # time.get_clock_info("perf_counter") and the function used
    host: Mapping[str, object] = field(default_factory=dict)  # coordinator host, python, ...
    inventory: str | None = None
    # How probes were laid out in time (netqual.planning.phases.layout); empty for older files.
    schedule: Mapping[str, object] = field(default_factory=dict)
    complete: bool = True  # False: interrupted (Ctrl-C, SIGTERM) or read from results.jsonl
    pairs_planned: int | None = None  # the pairs the schedule had (None in older files)
    # per node, what the pre-flight saw of its agent: {"version", "clock_offset_s"}
    agents: Mapping[str, Mapping[str, object]] = field(default_factory=dict)


@dataclass(frozen=True)
class SampledPath:
    """One path of the interference sample: as measured in the run, and again alone."""

    src: str
    dst: str
    tier: Tier
    run_p50_us: float
    run_p99_us: float
    alone_p50_us: float | None  # None when the alone re-measurement failed
    alone_p99_us: float | None
    run_verdict: Verdict
    alone_verdict: Verdict | None
    disturbed: bool  # run p99 beyond the alone p99's noise and the tolerance
    error: str | None = None

    @property
    def p50_ratio(self) -> float | None:
        return None if not self.alone_p50_us else self.run_p50_us / self.alone_p50_us

    @property
    def p99_ratio(self) -> float | None:
        return None if not self.alone_p99_us else self.run_p99_us / self.alone_p99_us


@dataclass(frozen=True)
class TierInterference:
    tier: Tier
    paths: int
    p50_ratio: float | None  # median over the tier's sampled paths, run / alone
    p99_ratio: float | None
    affected: bool


@dataclass(frozen=True)
class Interference:
    """Run vs the same paths measured alone (netqual.analysis.interference)."""

    sample: int
    p50_ratio: float | None  # median over the sample of run p50 / alone p50
    p99_ratio: float | None
    verdict_changes: int
    tolerance: float
    tiers: tuple[TierInterference, ...]
    paths: tuple[SampledPath, ...]

    @property
    def affected_tiers(self) -> tuple[Tier, ...]:
        return tuple(t.tier for t in self.tiers if t.affected)

    @property
    def exceeds(self) -> bool:
        """The run's numbers exceed the alone numbers beyond noise on at least one tier."""
        return bool(self.affected_tiers)


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
class Summary:
    counts: Mapping[Verdict, int]
    worst: tuple[tuple[str, str], ...]  # (src, dst) keys, worst first


@dataclass(frozen=True)
class RawBulk:
    """One bulk-read cell as measured at the initiator (nanoseconds, not yet reduced)."""

    chunk_bytes: int
    depth: int
    completion_ns: npt.NDArray[np.int64]  # one per read: post -> last byte / completion
    elapsed_ns: int  # first post -> last completion
    error: str | None = None


@dataclass(frozen=True)
class RawProbe:
    """What one probe produced: kept RTT samples (warm-up already dropped) and bulk cells."""

    rtt_ns: npt.NDArray[np.int64]
    warmup_discarded: int
    bulk: tuple[RawBulk, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentLimits:
    """Hard caps on what a peer may ask of an agent; a request over a cap gets an error.

    ``check`` (a whole plan, on the initiating agent) and ``check_pingpong`` /
    ``check_bulk`` (one request, on the responder) are the only places they are applied.
    """

    max_frame_bytes: int = 1 << 20
    max_iterations: int = 1_000_000
    max_message_bytes: int = 1 << 20
    max_chunk_bytes: int = 64 << 20
    max_depth: int = 64
    max_bulk_bytes: int = 8 << 30  # per bulk request
    max_reads: int = 1 << 20  # per bulk request: the initiator keeps 40 bytes per read
    # per probe: (chunk, depth) cells and reads over all cells (8 bytes of samples each
    # are kept until the result is sent)
    max_cells: int = 64
    max_probe_reads: int = 1 << 22
    max_buffer_bytes: int = 1 << 30  # payload buffers of all sessions together
    max_duration_s: float = 600.0
    max_sessions: int = 64
    auth_timeout_s: float = 5.0
    max_pending: int = 256  # unauthenticated connections, all sources (oldest dropped first)
    max_pending_per_source: int = 128  # unauthenticated connections from one IP address
    idle_timeout_s: float = 120.0

    def check(self, plan: ProbePlan) -> str | None:
        """The first cap ``plan`` exceeds, in words naming the cap; None when it fits."""
        if plan.timeout_s > self.max_duration_s:
            return f"timeout {plan.timeout_s:g} s exceeds max_duration_s={self.max_duration_s:g}"
        problem = self.check_pingpong(plan.warmup + plan.iterations, plan.size_bytes)
        if problem is None and plan.bulk:
            cells = len(plan.chunks_bytes) * len(plan.depths)
            if cells > self.max_cells:
                return f"{cells} bulk cells (chunks x depths) exceed max_cells={self.max_cells}"
            reads = sum(plan.reads_for(c) for c in plan.chunks_bytes) * len(plan.depths)
            if reads > self.max_probe_reads:
                return (
                    f"{reads} bulk reads over all cells exceed "
                    f"max_probe_reads={self.max_probe_reads}"
                )
            for chunk in plan.chunks_bytes:
                for depth in plan.depths:
                    if (
                        problem := self.check_bulk(chunk, plan.reads_for(chunk), depth)
                    ) is not None:
                        return problem
        return problem

    def check_pingpong(self, rounds: int, size_bytes: int) -> str | None:
        if rounds > self.max_iterations:
            return f"iterations+warmup {rounds} exceeds max_iterations={self.max_iterations}"
        if size_bytes > self.max_message_bytes:
            return f"size {size_bytes} exceeds max_message_bytes={self.max_message_bytes}"
        return None

    def check_bulk(self, chunk_bytes: int, reads: int, depth: int) -> str | None:
        if chunk_bytes > self.max_chunk_bytes:
            return f"chunk {chunk_bytes} exceeds max_chunk_bytes={self.max_chunk_bytes}"
        if reads > self.max_reads:
            return f"{reads} reads of {chunk_bytes} bytes exceed max_reads={self.max_reads}"
        if reads * chunk_bytes > self.max_bulk_bytes:
            return (
                f"bulk cell of {reads} x {chunk_bytes} bytes exceeds "
                f"max_bulk_bytes={self.max_bulk_bytes}"
            )
        if depth > self.max_depth:
            return f"depth {depth} exceeds max_depth={self.max_depth}"
        return None


@dataclass(frozen=True)
class Waiver:
    """A known-bad path accepted until a date (inclusive), with a reason and an owner.

    The gate decides what a waiver excuses; the report only shows them."""

    src: str
    dst: str
    until: dt.date
    reason: str
    owner: str

    def covers(self, key: tuple[str, str]) -> bool:
        return key in ((self.src, self.dst), (self.dst, self.src))

    def expired(self, today: dt.date) -> bool:
        return today > self.until

    @property
    def label(self) -> str:
        return f"{path_label(self.src, self.dst)}"
