"""Rule over the fan-in sweep (``fanin`` in the results file, docs/fanin.md):
``min_fanin_readers = N`` fails on a storage node whose verdict is "safe up to" fewer than
N concurrent readers, or that the sweep did not judge. A run without a sweep fails it:
nothing shows how many readers its storage nodes carry. A finding names the node."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.gate.model import Finding, GateContext, Outcome, Status
from netqual.gate.rules import Rule
from netqual.table.paths import IntArray, PathTable


@dataclass(frozen=True)
class MinFaninReaders(Rule):
    readers: int = 1

    @property
    def key(self) -> str:
        return "min_fanin_readers"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        mine = [f for f in ctx.fanin if self.scope.covers_node(f.storage, ctx.nodes)]
        if not mine:
            return Outcome(
                self.name,
                Status.FAIL,
                "the results have no fan-in sweep of a storage node in scope: run with "
                f"--mode bipartite --fanin 1,...,{self.readers} (docs/fanin.md)",
            )
        failing = tuple(
            Finding(f.storage, f.storage, f.verdict)
            for f in mine
            if f.safe_up_to is None or f.safe_up_to < self.readers
        )
        if failing:
            first = failing[0]
            return Outcome(
                self.name,
                Status.FAIL,
                f"{len(failing)} of {len(mine)} storage node(s) not safe up to "
                f"{self.readers} readers: first {first.src}: {first.detail}",
                failing,
            )
        return Outcome(
            self.name, Status.PASS, f"{len(mine)} storage node(s) safe up to {self.readers}+"
        )
