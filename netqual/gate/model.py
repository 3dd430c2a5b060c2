"""Records of the gate: scopes, waivers, outcomes and the whole report. No I/O here.

Rules judge the columns of a ``PathTable`` (a 1,024-node run is half a million paths): a
scope is an array of row indexes, worked out once per scope from per-node booleans; only
the offending rows become ``Finding`` records.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from netqual.model.decision import Decision
from netqual.model.fanin import FaninResult
from netqual.model.fleet import FleetResult
from netqual.model.hostpath import HostAudit
from netqual.model.node import Node, Role
from netqual.model.path import NotMeasured, Tier, path_label
from netqual.model.policy import Waiver
from netqual.model.run import Interference
from netqual.model.stats import Metric
from netqual.table.paths import TIERS, BoolArray, IntArray, PathTable, union_names


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
    rails: frozenset[int] = frozenset()  # paths between NICs of these rails (docs/rails.md)

    @property
    def is_all(self) -> bool:
        return not (self.racks or self.roles or self.nodes or self.tiers or self.rails)

    def covers_node(self, node: str, nodes: Mapping[str, Node]) -> bool:
        """Rules that judge nodes (configuration, host path): the node is one of
        ``nodes``, in one of ``racks`` and has one of ``roles``; ``tiers`` does not apply."""
        if self.nodes and node not in self.nodes:
            return False
        n = nodes.get(node)
        if self.racks and (n is None or n.rack not in self.racks):
            return False
        return not (self.roles and (n is None or n.role not in self.roles))

    def mask(self, table: PathTable, nodes: Mapping[str, Node]) -> BoolArray:
        """Which rows of ``table`` the scope covers. Each set is decided once per node name
        and looked up by the src and dst codes: the cost is per node, not per path."""
        keep = np.ones(len(table), dtype=np.bool_)
        ends = [nodes.get(name) for name in table.names]
        if self.nodes:  # a node also names its NICs' endpoints ("gpu03" covers "gpu03/eth1")
            keep &= _touches(
                table,
                [name in self.nodes or name.split("/")[0] in self.nodes for name in table.names],
            )
        if self.racks:
            keep &= _touches(table, [n is not None and n.rack in self.racks for n in ends])
        if self.roles:
            keep &= _touches(table, [n is not None and n.role in self.roles for n in ends])
        if self.tiers:
            keep &= np.isin(table.tier, [i for i, t in enumerate(TIERS) if t in self.tiers])
        if self.rails:  # a run without NICs has no path on any rail
            nics = table.nics
            keep &= np.isin(nics.rail, sorted(self.rails)) if nics is not None else False
        return keep


def _touches(table: PathTable, per_node: list[bool]) -> BoolArray:
    """Rows whose src or dst has the flag (``per_node`` is indexed by node code)."""
    flag = np.array([*per_node, False], dtype=np.bool_)  # never empty, so always indexable
    hit: BoolArray = flag[table.src] | flag[table.dst]
    return hit


def pair_codes(names: Sequence[str], pairs: Iterable[tuple[str, str]]) -> IntArray:
    """``PathTable.pair_keys`` of a few (src, dst) name pairs, every name in ``names``."""
    code = {n: i for i, n in enumerate(names)}
    keys = [code[a] * len(names) + code[b] for a, b in pairs]
    return np.array(keys, dtype=np.int64)


@dataclass(frozen=True)
class Finding:
    """One path that breaks (or, when waived, would break) a rule."""

    src: str
    dst: str
    detail: str

    @property
    def label(self) -> str:
        # a node's finding (a configuration outlier) names the node once
        return self.src if self.src == self.dst else f"{path_label(self.src, self.dst)}"


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
    baseline: PathTable | None = None
    interference: Interference | None = None  # the run's interference check, if it ran
    # Completeness (the ``complete`` rule): what the run scheduled and did not measure.
    pairs_planned: int | None = None  # None: an older file that does not say
    unmeasured: int | None = 0  # scheduled pairs without a path row; None: unknown
    interrupted: bool = False
    pingpong_only: int = 0  # interrupted run's pairs whose bulk phase never ran (unmeasured)
    not_measured: tuple[NotMeasured, ...] = ()  # configuration failures, with reasons
    resume_command: str = "netqual run INVENTORY --out DIR --resume"
    fleet: FleetResult | None = None  # the run's configuration check (netqual.analysis.fleet)
    hosts: tuple[HostAudit, ...] = ()  # each node's host path audit (netqual.model.hostpath)
    fanin: tuple[FaninResult, ...] = ()  # run --fanin: one sweep per storage node
    decision: Decision | None = None  # the run's answer from all its evidence

    def waived_keys(self, keys: Sequence[tuple[str, str]]) -> list[bool]:
        """Which of a few (src, dst) keys an active waiver excuses (either direction)."""
        return [any(w.covers(k) for w in self.waivers) for k in keys]

    def waived(self, table: PathTable, rows: IntArray) -> BoolArray:
        """Which of ``rows`` an active waiver excuses (``Waiver.covers``: either
        direction). Waivers are few: their keys are looked up among the rows' keys."""
        if not self.waivers:
            return np.zeros(len(rows), dtype=np.bool_)
        ends = [(w.src, w.dst) for w in self.waivers] + [(w.dst, w.src) for w in self.waivers]
        names = union_names(table.names, (e for pair in ends for e in pair))
        hit: BoolArray = np.isin(table.pair_keys(names, rows), pair_codes(names, ends))
        return hit


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
    # A campaign milestone before its week (or without a run of it): why it was not judged.
    # Such a report never passes (docs/campaign.md: "not due").
    not_due: str | None = None

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status is Status.FAIL)

    @property
    def passed(self) -> bool:
        return not self.failed and self.not_due is None
