"""Rules over each node's host path audit (``hosts`` in the results file, docs/rails.md):
``nic_affinity`` fails on a GPU without a ``PIX``/``PXB`` NIC on its rail (without NICs in
the inventory: without any such NIC), ``pcie_link_full`` on a GPU or NIC trained below its
maximum PCIe speed or width, or whose link sysfs did not give. The findings are the ones
``netqual.model.hostpath`` lists for the report: one rule, written once.

Both judge nodes, not paths. A node in scope without an audit fails (its agent sent none,
or a bad one): nothing shows its GPUs are near their NICs. So do results without any audit
(an older run), and a scope with nothing to judge (no GPU; no PCIe link).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from netqual.analysis.hostpath import HostFinding, affinity_findings, link_findings
from netqual.gate.model import Finding, GateContext, Outcome, Status
from netqual.gate.rules import Rule
from netqual.model.hostpath import HostAudit
from netqual.model.node import Nic, node_nics
from netqual.table.paths import IntArray, PathTable


def _judge(
    rule: Rule,
    ctx: GateContext,
    find: Callable[[HostAudit], list[HostFinding]],
    counted: Callable[[HostAudit], int],
    what: str,
) -> Outcome:
    if not ctx.hosts:
        return Outcome(
            rule.name,
            Status.FAIL,
            "the results have no host path audit (a run of an older netqual, or no agent "
            "answered): run netqual run or netqual doctor on the nodes",
        )
    audits = {h.node: h for h in ctx.hosts}
    names = [
        n for n in sorted(ctx.nodes.keys() | audits.keys()) if rule.scope.covers_node(n, ctx.nodes)
    ]
    failing: list[Finding] = []
    judged = 0
    for node in names:
        audit = audits.get(node)
        if audit is None or audit.error is not None:
            why = "no host path audit" if audit is None else f"no host path audit: {audit.error}"
            failing.append(Finding(node, node, why))
            continue
        judged += counted(audit)
        failing += [
            Finding(node, node, f"{f.subject}: {f.text}") for f in find(audit) if f.rule == rule.key
        ]
    if failing:
        first, plural = failing[0], "s" if len(failing) > 1 else ""
        msg = f"{len(failing)} finding{plural}: first {first.src} {first.detail}"
        return Outcome(rule.name, Status.FAIL, msg, tuple(failing))
    if not judged:
        return Outcome(
            rule.name, Status.FAIL, f"nothing to judge: no {what} on {len(names)} node(s)"
        )
    return Outcome(rule.name, Status.PASS, f"{judged} {what} on {len(names)} node(s) judged")


def _nics(ctx: GateContext, node: str) -> tuple[Nic, ...]:
    """The node's NICs; with rails the run lists endpoints (docs/rails.md)."""
    return node_nics(list(ctx.nodes.values())).get(node, ())


@dataclass(frozen=True)
class NicAffinity(Rule):
    @property
    def key(self) -> str:
        return "nic_affinity"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        return _judge(
            self,
            ctx,
            lambda a: affinity_findings(a, _nics(ctx, a.node)),
            lambda a: len(a.gpus),
            "GPU(s)",
        )


@dataclass(frozen=True)
class PcieLinkFull(Rule):
    @property
    def key(self) -> str:
        return "pcie_link_full"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        return _judge(
            self,
            ctx,
            link_findings,
            lambda a: sum(1 for d in (*a.gpus, *a.nics) if d.link.max_width is not None),
            "PCIe link(s)",
        )
