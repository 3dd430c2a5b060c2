"""The evidence a run holds beyond each path's RTT, kind by kind (docs/policy.md, "One
decision"): loss its counters counted, configuration outliers on the interfaces a path used,
a NIC far below its twins, a node pair whose added rails add nothing, and what a storage
node holds under fan-in. Each kind gives the paths it judges (``Hit``: rows and the piece of
evidence they share), one run-level line (what it judged, or why it could not) and what it
blocks, with its subject. ``netqual.analysis.decision`` combines them.

Nothing is blamed without evidence beyond the run's own repeatability: a loss rate needs a
few events and a rate above the policy's line; a NIC is slow only when every one of its
paths is below half of what its twins carry; a configuration value is a fact, not a sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from netqual.model.decision import (
    RUN_SUBJECT,
    Blocking,
    Evidence,
    EvidenceKind,
    Subject,
    SubjectKind,
)
from netqual.model.node import Role
from netqual.model.path import path_label
from netqual.model.verdict import Verdict
from netqual.table.paths import BoolArray, IntArray, PathTable
from netqual.table.run import Results


@dataclass(frozen=True)
class Hit:
    """Paths (rows of the run's table) and the piece of evidence they share."""

    rows: IntArray
    evidence: Evidence


@dataclass(frozen=True)
class Found:
    """One kind's evidence over a run."""

    kind: EvidenceKind
    summary: Evidence  # run level: what it judged, or (class None) why it could not
    hits: tuple[Hit, ...] = ()
    blocking: tuple[Blocking, ...] = ()
    cautions: tuple[str, ...] = ()


def cannot(kind: EvidenceKind, why: str) -> Found:
    return Found(kind, Evidence(kind, None, RUN_SUBJECT, why))


def worst(hits: Iterable[Hit]) -> Verdict:
    ranks = [
        Verdict.MARGINAL.rank if h.evidence.verdict is None else h.evidence.verdict.rank
        for h in hits
    ]
    return [Verdict.SAFE, Verdict.MARGINAL, Verdict.UNSAFE][max(ranks, default=0)]


def as_map(value: object) -> Mapping[str, Any]:
    """A JSON value read defensively: the mapping, or an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- endpoints: a table's names are nodes, or NODE/NIC below them (rails) ------------------


@dataclass(frozen=True)
class Endpoints:
    """Per table name code: its node, its inventory NIC (None: the node's own address) and
    rail (-1: none), its role; and per node name its codes."""

    node: tuple[str, ...]
    nic: tuple[str | None, ...]
    rail: tuple[int, ...]
    role: tuple[Role, ...]

    @classmethod
    def of(cls, results: Results) -> Endpoints:
        by_name = {n.name: n for n in results.nodes}
        nodes, nics, rails, roles = [], [], [], []
        for name in results.paths.names:
            n = by_name.get(name)
            node = (n.agent if n is not None and n.agent else None) or name.split("/")[0]
            nic = n.nic if n is not None else None
            nodes.append(node)
            nics.append(nic.name if nic is not None else None)
            rails.append(nic.rail if nic is not None else -1)
            base = by_name.get(node, n)
            roles.append(base.role if base is not None else Role.ANY)
        return cls(tuple(nodes), tuple(nics), tuple(rails), tuple(roles))

    def codes_of(self, node: str) -> list[int]:
        return [i for i, n in enumerate(self.node) if n == node]


def touching(table: PathTable, codes: Iterable[int]) -> BoolArray:
    """Rows whose src or dst is one of the name codes."""
    flag = np.zeros(len(table.names) + 1, dtype=np.bool_)
    flag[list(codes)] = True
    hit: BoolArray = flag[table.src] | flag[table.dst]
    return hit


def _per_node(ends: Endpoints, table: PathTable) -> tuple[list[str], IntArray, IntArray]:
    """(node names, each row's src node and dst node as indexes into them)."""
    nodes = list(dict.fromkeys(ends.node))
    index = {n: i for i, n in enumerate(nodes)}
    of_code = np.array([index[n] for n in ends.node] + [0], dtype=np.int64)
    return nodes, of_code[table.src], of_code[table.dst]


def _count(src: IntArray, dst: IntArray, rows: BoolArray, n: int) -> IntArray:
    """Rows per node, a row counted once at each of its two nodes (once when they match)."""
    got: IntArray = np.bincount(src[rows], minlength=n) + np.bincount(
        dst[rows & (src != dst)], minlength=n
    )
    return got


def group_by_node(
    table: PathTable, ends: Endpoints, bad: BoolArray, judged: BoolArray
) -> list[tuple[Subject, IntArray]]:
    """Bad rows grouped where they sit, greedily: a node more than half of whose judged
    paths are bad (at least two) takes them; each bad row left is its own subject. Counts
    per node are bincounts over the rows: no loop over nodes and paths."""
    left = bad.copy()
    out: list[tuple[Subject, IntArray]] = []
    nodes, src, dst = _per_node(ends, table)
    total = np.maximum(_count(src, dst, judged, len(nodes)), 1)
    while left.any():
        n_bad = _count(src, dst, left, len(nodes))
        share = np.where((n_bad >= 2) & (n_bad > 0.5 * total), n_bad / total, 0.0)
        if not share.any():
            break
        # the largest share, then the most bad paths, then the first name
        best = int(np.lexsort((np.arange(len(nodes)), -n_bad, -share))[0])
        rows = np.flatnonzero(left & ((src == best) | (dst == best)))
        out.append((Subject(SubjectKind.NODE, nodes[best]), rows))
        left[rows] = False
    names = table.names
    for i in np.flatnonzero(left).tolist():
        label = path_label(names[table.src[i]], names[table.dst[i]])
        out.append((Subject(SubjectKind.PATH, label), np.array([i], dtype=np.int64)))
    return out
