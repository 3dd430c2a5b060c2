"""``no_blocking``: the gate judges the run's decision (docs/policy.md, "One decision"). It
fails on every blocking piece of evidence (of the kinds it is given: all by default), one
finding per subject (``NODE``,
``NODE/NIC``, a storage node, a path, the workload) with its kind, what was seen and what
to do; its message also names the kinds of evidence the run could not judge, and why."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.gate.model import Finding, GateContext, Outcome, Status
from netqual.gate.rules import Rule
from netqual.model.decision import Blocking, EvidenceKind, SubjectKind
from netqual.table.paths import IntArray, PathTable

_NODES = (SubjectKind.NODE, SubjectKind.NIC, SubjectKind.STORAGE)


def _finding(b: Blocking) -> Finding:
    name = b.subject.name
    detail = f"{b.kind.label}: {b.detail}; {b.action}"
    if b.subject.kind is SubjectKind.PATH and " -> " in name:
        src, dst = name.split(" -> ", 1)
        return Finding(src, dst, detail)
    return Finding(name, name, detail)


def blocking_text(b: Blocking) -> str:
    """'h3/eth1 (bandwidth): every one of its 4 paths ...'."""
    return f"{b.subject.name} ({b.kind.label}): {b.detail}"


@dataclass(frozen=True)
class NoBlocking(Rule):
    kinds: frozenset[EvidenceKind] = frozenset(EvidenceKind)

    @property
    def key(self) -> str:
        return "no_blocking"

    def _in_scope(self, b: Blocking, ctx: GateContext) -> bool:
        if self.scope.is_all:
            return True
        name = b.subject.name
        if b.subject.kind in _NODES:
            return self.scope.covers_node(name.split("/")[0], ctx.nodes)
        if b.subject.kind is SubjectKind.PATH:
            ends = name.replace(" <-> ", " -> ").split(" -> ")
            return any(self.scope.covers_node(e.split("/")[0], ctx.nodes) for e in ends)
        return False  # a tier, rail, rack pair, the workload or the run: the whole run's

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        d = ctx.decision
        if d is None:
            return Outcome(self.name, Status.FAIL, "the results were not decided")
        mine = [b for b in d.blocking if b.kind in self.kinds and self._in_scope(b, ctx)]
        unjudged = [e for e in d.evidence if e.verdict is None]
        tail = ""
        if unjudged:
            tail = "; not judged: " + "; ".join(f"{e.kind.label} ({e.detail})" for e in unjudged)
        findings = [_finding(b) for b in mine]
        paths = [f for f in findings if f.src != f.dst]
        excused = ctx.waived_keys([(f.src, f.dst) for f in paths])
        waived = [f for f, w in zip(paths, excused, strict=True) if w]
        failing = [f for f in findings if f not in waived]
        if not failing:
            msg = f"decision {d.answer.label}: nothing blocks"
            if waived:
                msg += f" ({len(waived)} waived)"
            return Outcome(self.name, Status.PASS, msg + tail, (), tuple(waived))
        first = next(b for b in mine if _finding(b) in failing)
        msg = (
            f"decision {d.answer.label}: {len(failing)} blocking, first "
            f"{blocking_text(first)}{tail}"
        )
        return Outcome(self.name, Status.FAIL, msg, tuple(failing), tuple(waived))
