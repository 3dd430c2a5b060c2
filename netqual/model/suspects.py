"""Localisation suspects (``netqual.analysis.localise``) and their evidence: one frozen
record per suspect kind, so a renderer reads fields the type checker knows instead of keys
of a free dict; what each suspect names is a typed subject, not a string to parse back.

A suspect stands out from its peers at the same distance by more than the run's own
repeatability (``Repeatability``): its ``Contrast`` keeps the numbers it was judged on.
The run-wide part of localisation (the repeatability used, the tiers that fail for every
node alike, what the localisation read) is a ``Localisation``.

Their JSON form (``suspects`` and ``localisation`` in results.json) is
``netqual.results.suspects_codec``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from netqual.model.path import Tier
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict


class SuspectKind(str, enum.Enum):
    """Where the localisation points: one node, one link, the links between two racks, or a
    pair whose two directions disagree."""

    NODE = "node"
    LINK = "link"
    RACK_PAIR = "rack-pair"
    ASYMMETRY = "asymmetry"
    NIC = "nic"  # one NIC of a node ("gpu03/eth1") while its other rails are fine
    RAIL = "rail"  # a whole rail plane ("rail 1")


# -- what a suspect names -------------------------------------------------------------


@dataclass(frozen=True)
class NodeSubject:
    """A node (or, inside the localisation of a rails run, one endpoint ``NODE/NIC``)."""

    node: str

    def __str__(self) -> str:
        return self.node

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.node,)


@dataclass(frozen=True)
class NicSubject:
    node: str
    nic: str

    def __str__(self) -> str:
        return f"{self.node}/{self.nic}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.node,)


@dataclass(frozen=True)
class LinkSubject:
    """One direction of a path: its two ends (nodes or endpoints)."""

    src: str
    dst: str

    def __str__(self) -> str:
        return f"{self.src}->{self.dst}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.src, self.dst)


@dataclass(frozen=True)
class PairSubject:
    """Two ends measured both ways (an asymmetry): ``a`` is the forward path's source."""

    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.a}<->{self.b}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.a, self.b)


@dataclass(frozen=True)
class RackPairSubject:
    """The links between two racks (sorted), or inside one (the same rack twice)."""

    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.a}<->{self.b}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class RailSubject:
    rail: int

    def __str__(self) -> str:
        return f"rail {self.rail}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return ()


Subject: TypeAlias = (
    NodeSubject | NicSubject | LinkSubject | PairSubject | RackPairSubject | RailSubject
)

SUBJECT_OF: Mapping[SuspectKind, type[Any]] = {
    SuspectKind.NODE: NodeSubject,
    SuspectKind.LINK: LinkSubject,
    SuspectKind.RACK_PAIR: RackPairSubject,
    SuspectKind.ASYMMETRY: PairSubject,
    SuspectKind.NIC: NicSubject,
    SuspectKind.RAIL: RailSubject,
}


# -- the run's own repeatability, and how a suspect stands out ----------------------------


class RepeatSource(str, enum.Enum):
    """Where a run's repeatability was measured."""

    FLOOR = "floor"  # nothing measured it larger: the practical floor
    GOODPUT_FLOOR = "goodput floor"  # bulk goodput: above what it moves from run to run
    INTERVALS = "intervals"  # the paths' own 95% confidence intervals of the metric
    INTERFERENCE = "interference"  # paths re-measured alone after the run
    RETEST = "retest"  # the re-tested paths, before and after


@dataclass(frozen=True)
class RepeatMeasure:
    """One source's measure: a path's metric read twice differs by up to ``ratio``."""

    source: RepeatSource
    ratio: float  # >= 1
    paths: int  # the paths it was measured on (0 for the floor)


@dataclass(frozen=True)
class Repeatability:
    """How much the run's own numbers move: a suspect must differ from its peers by more
    than ``ratio``, the largest of the measures."""

    measures: tuple[RepeatMeasure, ...]  # the floor first, then what was measured

    def __post_init__(self) -> None:
        if not self.measures:
            raise ValueError("a repeatability needs at least one measure")

    @property
    def decisive(self) -> RepeatMeasure:
        return max(self.measures, key=lambda m: m.ratio)

    @property
    def ratio(self) -> float:
        return self.decisive.ratio


class Measure(str, enum.Enum):
    """What a contrast compares: the run's RTT metric (microseconds, higher is worse) or
    the paths' best bulk goodput (Gbit/s, lower is worse)."""

    RTT = "rtt"
    GOODPUT = "goodput"

    @property
    def unit(self) -> str:
        return "us" if self is Measure.RTT else "Gbit/s"


@dataclass(frozen=True)
class Contrast:
    """A suspect against its peers at the same distance (tier).

    On the RTT metric: ``level`` is the suspect's paths' lower median at that tier (more
    than half of them are at least this slow), ``peers_level`` the lower median of the
    same level over its peers (the other nodes of its role, rack pairs or paths at that
    tier). On goodput, mirrored: more than half of its paths read at most ``level``. It is
    a suspect because ``ratio`` (worse over better) exceeds ``threshold``, the run's
    repeatability for that measure."""

    tier: Tier
    level: float | None  # None: its paths there failed (no samples)
    peers_level: float | None
    peers: int
    threshold: float
    source: RepeatSource  # where the threshold was measured
    measure: Measure = Measure.RTT

    @property
    def ratio(self) -> float | None:
        """Worse over better (>= 1 when it stands out); None when either is missing (a
        failed suspect: infinite)."""
        if self.level is None or not self.peers_level:
            return None
        if self.measure is Measure.RTT:
            return self.level / self.peers_level
        return self.peers_level / self.level if self.level > 0 else None


# -- what the suspect's bad paths agree on -------------------------------------------


class CauseKind(str, enum.Enum):
    """Why a suspect's paths are bad, from their counters, the fleet snapshot, or their
    own numbers."""

    LOSS = "loss"  # retransmissions, RDMA sequence errors (counters)
    CONGESTION = "congestion"  # pauses, CNPs, ECN marks (counters)
    ROUTING = "routing"  # the bytes took another NIC or TCP (counters)
    MTU = "mtu"  # a configuration outlier on the MTU of an interface it uses (fleet)
    DELAY = "delay"  # the whole distribution moved: its p50 too, beyond the repeatability
    BANDWIDTH = "bandwidth"  # its bulk goodput far below its peers'

    @property
    def from_counters(self) -> bool:
        return self in (CauseKind.LOSS, CauseKind.CONGESTION, CauseKind.ROUTING)


@dataclass(frozen=True)
class Cause:
    """What more than half of a suspect's bad paths show (``analysis.causes.attach``)."""

    kind: CauseKind
    paths: int  # its bad paths that show it
    example: str  # the evidence in words: "12 TCP retransmissions"
    of: int | None = None  # its bad paths (None: a file written before this was kept)


# -- evidence, one record per kind -------------------------------------------------------


@dataclass(frozen=True)
class PathEvidence:
    """One path a suspect points at: its verdict and the run's metric (unrounded)."""

    src: str
    dst: str
    verdict: Verdict
    value_us: float | None  # None: no samples
    error: str | None


@dataclass(frozen=True)
class NodeEvidence:
    metric: Metric
    bad_paths: int
    paths: int
    median_us: float | None  # over the node's paths
    all_paths_median_us: float | None
    worst: PathEvidence
    cause: Cause | None = None
    nics: tuple[str, ...] | None = None  # endpoints below the node: every one of them bad
    contrast: Contrast | None = None  # None: a file written before contrasts were kept


@dataclass(frozen=True)
class RackPairEvidence:
    metric: Metric
    racks: tuple[str, str]  # sorted; the same rack twice: the links inside one rack
    bad_paths: int
    paths: int
    median_us: float | None
    all_paths_median_us: float | None
    worst: PathEvidence
    contrast: Contrast | None = None


@dataclass(frozen=True)
class LinkEvidence:
    """One bad path whose two nodes are fine on most of their other paths."""

    metric: Metric
    path: PathEvidence  # in JSON its keys sit beside the others (src, dst, verdict, ...)
    src_bad_elsewhere: int
    src_paths_elsewhere: int
    dst_bad_elsewhere: int
    dst_paths_elsewhere: int
    cause: Cause | None = None
    contrast: Contrast | None = None


@dataclass(frozen=True)
class AsymmetryEvidence:
    metric: Metric
    forward: PathEvidence
    reverse: PathEvidence
    ratio: float | None  # larger over smaller metric; None: not finite (one side has none)
    threshold: float | None = None  # the repeatability the ratio exceeded (None: older file)


@dataclass(frozen=True)
class OtherNic:
    """Another NIC of a suspect NIC's node, on another rail (docs/rails.md)."""

    nic: str
    rail: int
    bad_paths: int | None = None  # None: the endpoint has no paths in the table
    paths: int | None = None
    median_us: float | None = None


@dataclass(frozen=True)
class NicEvidence:
    metric: Metric
    bad_paths: int
    paths: int
    median_us: float | None
    all_paths_median_us: float | None
    worst: PathEvidence
    node: str
    nic: str
    rail: int
    other_nics: tuple[OtherNic, ...]
    cause: Cause | None = None
    contrast: Contrast | None = None


@dataclass(frozen=True)
class RailEvidence:
    metric: Metric
    rail: int
    bad_nics: tuple[str, ...]  # endpoint names, sorted
    nics: int  # endpoints on the rail
    worst: PathEvidence


Evidence: TypeAlias = (
    NodeEvidence | RackPairEvidence | LinkEvidence | AsymmetryEvidence | NicEvidence | RailEvidence
)

EVIDENCE_OF: Mapping[SuspectKind, type[Any]] = {
    SuspectKind.NODE: NodeEvidence,
    SuspectKind.RACK_PAIR: RackPairEvidence,
    SuspectKind.LINK: LinkEvidence,
    SuspectKind.ASYMMETRY: AsymmetryEvidence,
    SuspectKind.NIC: NicEvidence,
    SuspectKind.RAIL: RailEvidence,
}


@dataclass(frozen=True)
class Suspect:
    kind: SuspectKind
    about: Subject  # what it names, typed; ``subject`` is its text
    evidence: Evidence

    def __post_init__(self) -> None:
        if not isinstance(self.evidence, EVIDENCE_OF[self.kind]):
            raise TypeError(f"a {self.kind.value} suspect needs {EVIDENCE_OF[self.kind].__name__}")
        if not isinstance(self.about, SUBJECT_OF[self.kind]):
            raise TypeError(f"a {self.kind.value} suspect names a {SUBJECT_OF[self.kind].__name__}")

    @property
    def subject(self) -> str:
        """How every output and results.json name it: "gpu03", "gpu01->gpu07",
        "r01<->r02", "gpu01<->gpu07", "gpu03/eth1", "rail 1"."""
        return str(self.about)


def with_cause(s: Suspect, cause: Cause) -> Suspect:
    """``s`` with what its bad paths agree on; only node, NIC and link evidence carry it."""
    ev = s.evidence
    if not isinstance(ev, NodeEvidence | NicEvidence | LinkEvidence):
        raise TypeError(f"a {s.kind.value} suspect has no cause")
    return Suspect(s.kind, s.about, dataclasses.replace(ev, cause=cause))


# -- the run-wide part -------------------------------------------------------------------


@dataclass(frozen=True)
class DistanceEvidence:
    """A farther tier whose paths fail for every node alike: the distance is the cause
    (offload inside racks, or not to the remote site), not its nodes or racks."""

    metric: Metric
    tier: Tier
    bad_paths: int
    paths: int
    unsafe: bool  # some of them unsafe (else marginal only)
    low_us: float | None  # the bad paths' metric, lowest and highest measured
    high_us: float | None
    hops: tuple[int, ...]  # the hop counts of the tier's paths, where known
    near_safe: int  # same-rack paths offload-safe (the reference), and all of them
    near_paths: int


@dataclass(frozen=True)
class Localisation:
    """What the localisation read and used besides the suspects: the run's repeatability,
    the tiers that fail by distance, and (a re-test) the run it re-tested, whose paths it
    localised on together with its own re-measurements."""

    repeatability: Repeatability
    distance: tuple[DistanceEvidence, ...] = ()
    paths: int = 0  # paths localised on (a re-test: the re-tested run's, re-measured ones replaced)
    retested: int = 0  # of them, re-measured by this run (0: not a re-test)
    base: str | None = None  # the re-tested run (``retest_of``); None: this run alone
