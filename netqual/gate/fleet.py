"""Rules over the run's configuration check (``fleet`` in the results file, netqual.analysis.fleet):
``fleet_consistent`` fails on a node whose fleet key differs from the majority of its
role, ``fleet_expected`` on one whose value differs from the policy's ``[fleet]``
expectation. A finding names the node and the key. A run without snapshots fails both:
nothing shows that its configuration is alike (or as expected).
"""

from __future__ import annotations

from dataclasses import dataclass

from netqual.gate.model import Finding, GateContext, Outcome, Status
from netqual.gate.rules import Rule
from netqual.model.fleet import FleetOutlier
from netqual.table.paths import IntArray, PathTable


def _judge(rule: Rule, ctx: GateContext, pick: str, what: str) -> Outcome:
    if ctx.fleet is None or not ctx.fleet.snapshot:
        return Outcome(
            rule.name,
            Status.FAIL,
            "the results have no configuration snapshots (a run from before netqual "
            "collected them, a demo, or a retest whose agents sent none): run netqual "
            "check --fleet",
        )
    found: tuple[FleetOutlier, ...] = getattr(ctx.fleet, pick)
    mine = [o for o in found if rule.scope.covers_node(o.node, ctx.nodes)]
    failing = tuple(Finding(o.node, o.node, o.finding) for o in mine)
    nodes = len(ctx.fleet.snapshot)
    if not mine:
        return Outcome(rule.name, Status.PASS, f"no {what} among {nodes} node snapshots")
    first = mine[0]
    msg = f"{len(mine)} {what}{'s' if len(mine) > 1 else ''}: first {first.text}"
    return Outcome(rule.name, Status.FAIL, msg, failing)


@dataclass(frozen=True)
class FleetConsistent(Rule):
    @property
    def key(self) -> str:
        return "fleet_consistent"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        return _judge(self, ctx, "consistency", "configuration outlier")


@dataclass(frozen=True)
class FleetExpected(Rule):
    @property
    def key(self) -> str:
        return "fleet_expected"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        return _judge(self, ctx, "unexpected", "value unlike the policy's [fleet]")
