"""Localisation suspects (``netqual.analysis.localise``) and their evidence: one frozen
record per suspect kind, so a renderer reads fields the type checker knows instead of keys
of a free dict.

Their JSON form (``suspects`` in results.json) is ``netqual.results.suspects_codec``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

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


@dataclass(frozen=True)
class PathEvidence:
    """One path a suspect points at: its verdict and the run's metric (unrounded)."""

    src: str
    dst: str
    verdict: Verdict
    value_us: float | None  # None: no samples
    error: str | None


@dataclass(frozen=True)
class CounterCause:
    """What the counters of a suspect's bad paths agree on (``counter_evidence.annotate``)."""

    cause: str  # loss | congestion | routing
    paths: int  # bad paths whose counters say so
    example: str  # the evidence in words: "12 TCP retransmissions"


@dataclass(frozen=True)
class NodeEvidence:
    metric: Metric
    bad_paths: int
    paths: int
    median_us: float | None  # over the node's paths
    all_paths_median_us: float | None
    worst: PathEvidence
    counters: CounterCause | None = None
    nics: tuple[str, ...] | None = None  # endpoints below the node: every one of them bad


@dataclass(frozen=True)
class RackPairEvidence:
    metric: Metric
    racks: tuple[str, str]  # sorted; the same rack twice: the links inside one rack
    bad_paths: int
    paths: int
    median_us: float | None
    all_paths_median_us: float | None
    worst: PathEvidence


@dataclass(frozen=True)
class LinkEvidence:
    """One bad path whose two nodes are fine on most of their other paths."""

    metric: Metric
    path: PathEvidence  # in JSON its keys sit beside the others (src, dst, verdict, ...)
    src_bad_elsewhere: int
    src_paths_elsewhere: int
    dst_bad_elsewhere: int
    dst_paths_elsewhere: int
    counters: CounterCause | None = None


@dataclass(frozen=True)
class AsymmetryEvidence:
    metric: Metric
    forward: PathEvidence
    reverse: PathEvidence
    ratio: float | None  # larger over smaller metric; None: not finite (one side has none)


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
    counters: CounterCause | None = None


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
    subject: str  # "gpu03", "gpu01->gpu07", "r01<->r02", "gpu01<->gpu07", "rail 1"
    evidence: Evidence

    def __post_init__(self) -> None:
        if not isinstance(self.evidence, EVIDENCE_OF[self.kind]):
            raise TypeError(f"a {self.kind.value} suspect needs {EVIDENCE_OF[self.kind].__name__}")


def with_counters(s: Suspect, counters: CounterCause) -> Suspect:
    """``s`` with what its counters say; only node, NIC and link evidence carry it."""
    ev = s.evidence
    if not isinstance(ev, NodeEvidence | NicEvidence | LinkEvidence):
        raise TypeError(f"a {s.kind.value} suspect has no counters")
    return Suspect(s.kind, s.subject, dataclasses.replace(ev, counters=counters))
