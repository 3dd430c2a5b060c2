"""The decision's records: typed pieces of evidence, and the one answer a run gives.

A path's verdict is the worst class of the evidence that judges it (docs/policy.md,
"One decision"): its RTT against the policy's lines, with a workload its chunk fetch
against the baseline, loss its counters counted, a configuration outlier on an interface
it used, a NIC far below its twins, the fan-in a storage node holds. Evidence that cannot
judge (missing, preliminary) has no class and says why; it never passes a path. The rule is
``netqual.analysis.decision``; these are its records.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from netqual.model.verdict import Verdict


class EvidenceKind(str, enum.Enum):
    """Where a piece of evidence comes from (the results file's ``evidence[].kind``)."""

    RTT = "rtt"  # the small-message round trip against the policy's lines
    WORKLOAD = "workload"  # the workload's chunk fetch against its baseline
    LOSS = "loss"  # retransmissions, RDMA retries and NAKs, pauses (details.counters)
    CONFIG = "config"  # a fleet outlier on an interface the path used
    BANDWIDTH = "bandwidth"  # a NIC or node far below its twins (bulk cells, multirail)
    FANIN = "fanin"  # the concurrent readers a storage node holds (run --fanin)
    ENGINE = "engine"  # a fetch engine's own transfer (--engine)

    @property
    def label(self) -> str:
        return _KIND_LABELS[self]


_KIND_LABELS = {
    EvidenceKind.RTT: "RTT",
    EvidenceKind.WORKLOAD: "workload",
    EvidenceKind.LOSS: "loss",
    EvidenceKind.CONFIG: "configuration",
    EvidenceKind.BANDWIDTH: "bandwidth",
    EvidenceKind.FANIN: "fan-in",
    EvidenceKind.ENGINE: "engine",
}


class SubjectKind(str, enum.Enum):
    """What a piece of evidence is about."""

    PATH = "path"  # "gpu01 -> stor02"
    NODE = "node"  # "gpu03"
    NIC = "nic"  # "gpu03/eth1"
    STORAGE = "storage"  # a storage node under fan-in
    RAILS = "rails"  # a node pair read over several rails at once ("a <-> b")
    TIER = "tier"  # the paths of a tier that distance alone takes out ("cross-rack paths")
    RAIL = "rail"  # one rail's switch plane ("rail 1")
    RACKS = "racks"  # the links between two racks, or inside one ("racks r1<->r2")
    WORKLOAD = "workload"  # the workload itself (offload can never pay)
    RUN = "run"  # the whole run (what a kind could or could not judge)


@dataclass(frozen=True)
class Subject:
    kind: SubjectKind
    name: str

    def __str__(self) -> str:
        return self.name


RUN_SUBJECT = Subject(SubjectKind.RUN, "run")


@dataclass(frozen=True)
class Evidence:
    """One input of a verdict. ``verdict`` None: this evidence cannot judge, ``detail``
    says why (missing, preliminary); a path with such evidence is never offload-safe."""

    kind: EvidenceKind
    verdict: Verdict | None
    subject: Subject
    detail: str

    @property
    def reason(self) -> str:
        """The evidence as a path's reason: 'loss: 154 TCP retransmissions ...'."""
        return f"{self.kind.label}: {self.detail}"


class Answer(str, enum.Enum):
    GO = "go"
    CONDITIONAL = "conditional"
    NO_GO = "no-go"

    @property
    def label(self) -> str:
        return _ANSWER_LABELS[self]


_ANSWER_LABELS = {
    Answer.GO: "GO",
    Answer.CONDITIONAL: "GO WITH CONDITIONS",
    Answer.NO_GO: "NO-GO",
}


@dataclass(frozen=True)
class Blocking:
    """One thing that stands between the run and "go": its subject, the kind of evidence,
    what was seen, what to do, and how many paths it keeps from offload-safe."""

    subject: Subject
    kind: EvidenceKind
    verdict: Verdict | None  # the class it gives its paths; None: cannot judge them
    detail: str
    action: str
    paths: int  # paths it holds below offload-safe (0: none of them measured yet)


@dataclass(frozen=True)
class FaninHold:
    """How many concurrent readers one sweep of a storage node says it holds (``run
    --fanin``): netqual's own probe's levels (``engine`` None) or the same levels read
    through the fetch engine (``engine``: its name). ``safe_up_to`` None: the sweep did not
    judge it; ``preliminary``: the level just past ``safe_up_to`` that the knee rule could
    not call (it never passes); ``detail``: the sweep's verdict."""

    storage: str
    engine: str | None
    safe_up_to: int | None
    preliminary: int | None
    detail: str

    @property
    def source(self) -> str:
        """'st1' for the probe's sweep, 'st1 through mooncake' for the engine's."""
        return self.storage if self.engine is None else f"{self.storage} through {self.engine}"


@dataclass(frozen=True)
class Decision:
    """The run's one answer (results ``decision``): ``go`` when every path is offload-safe on
    all the evidence and nothing could not be judged; ``no-go`` when no path is; else
    ``conditional``, with what blocks ranked by the paths it holds."""

    answer: Answer
    governs: str  # what the answer rests on, in words
    blocking: tuple[Blocking, ...]  # ranked: most paths held first, then the worse class
    counts: Mapping[Verdict, int] = field(default_factory=dict)  # paths per decided verdict
    # what each kind of evidence judged over the run, or why it could not (class None)
    evidence: tuple[Evidence, ...] = ()
    # what the answer does not rest on but a reader should know (noise, disagreements)
    cautions: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()  # what must hold before "go": finish, re-measure
    # per storage node under fan-in, what each of its sweeps holds (the probe's; with
    # --engine the engine's too): a deployment's fetches hold the fewest
    fanin: tuple[FaninHold, ...] = ()
