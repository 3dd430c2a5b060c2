"""Records of the gate: scopes, waivers, outcomes and the whole report. No I/O here."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from netqual.models import Interference, Metric, Node, PathResult, Role, Tier, Waiver


class Status(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Scope:
    """Which paths a rule looks at. Empty sets mean 'no constraint'.

    A path matches a set when its src *or* its dst is in it (a storage rule covers every
    path that touches a storage node); different sets must all match.
    """

    name: str = "all paths"
    racks: frozenset[str] = frozenset()
    roles: frozenset[Role] = frozenset()
    nodes: frozenset[str] = frozenset()
    tiers: frozenset[Tier] = frozenset()

    @property
    def is_all(self) -> bool:
        return not (self.racks or self.roles or self.nodes or self.tiers)

    def matches(self, path: PathResult, nodes: Mapping[str, Node]) -> bool:
        ends = [nodes.get(path.src), nodes.get(path.dst)]
        if self.nodes and not {path.src, path.dst} & self.nodes:
            return False
        if self.racks and not any(n is not None and n.rack in self.racks for n in ends):
            return False
        if self.roles and not any(n is not None and n.role in self.roles for n in ends):
            return False
        return not (self.tiers and path.tier not in self.tiers)


@dataclass(frozen=True)
class Finding:
    """One path that breaks (or, when waived, would break) a rule."""

    src: str
    dst: str
    detail: str

    @property
    def label(self) -> str:
        return f"{self.src} -> {self.dst}"


@dataclass(frozen=True)
class Outcome:
    rule: str
    status: Status
    message: str
    failing: tuple[Finding, ...] = ()
    waived: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class WaiverState:
    waiver: Waiver
    expired: bool
    used_by: tuple[str, ...]  # rules in which it excused a path


@dataclass(frozen=True)
class GateContext:
    nodes: Mapping[str, Node]
    metric: Metric
    waivers: tuple[Waiver, ...] = ()  # only the active ones
    baseline: Mapping[tuple[str, str], PathResult] | None = None
    interference: Interference | None = None  # the run's interference check, if it ran

    def waiver_for(self, key: tuple[str, str]) -> Waiver | None:
        for w in self.waivers:
            if w.covers(key):
                return w
        return None


@dataclass(frozen=True)
class GateReport:
    profile: str
    source: str
    results_source: str
    baseline_source: str | None
    today: dt.date
    outcomes: tuple[Outcome, ...]
    waivers: tuple[WaiverState, ...] = ()
    n_paths: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status is Status.FAIL)

    @property
    def passed(self) -> bool:
        return not self.failed
