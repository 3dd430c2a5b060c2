"""Rule over the fan-in sweep (``fanin`` in the results file, docs/fanin.md):
``min_fanin_readers = N`` fails on a storage node whose verdict is "safe up to" fewer than
N concurrent readers, or that the sweep did not judge. "Safe up to" counts only levels the
knee rule surely called within the factor, so a level it could not call (preliminary: its
p99's confidence interval straddles the factor) never passes: the finding says so. A run
without a sweep fails it: nothing shows how many readers its storage nodes carry. A
finding names the node."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.gate.model import Finding, GateContext, Outcome, Status
from netqual.gate.rules import Rule
from netqual.model.fanin import Call, FaninResult
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
            Finding(f.storage, f.storage, self._why(f))
            for f in mine
            if f.safe_up_to is None or f.safe_up_to < self.readers
        )
        if failing:
            first = failing[0]
            return Outcome(
                self.name,
                Status.FAIL,
                f"{len(failing):,} of {len(mine):,} storage node(s) not safe up to "
                f"{self.readers} readers: first {first.src}: {first.detail}",
                failing,
            )
        return Outcome(
            self.name, Status.PASS, f"{len(mine)} storage node(s) safe up to {self.readers}+"
        )

    def _why(self, f: FaninResult) -> str:
        """The verdict, led by "preliminary" when the level that ended "safe up to" is one
        the knee rule could not call."""
        after = [lv for lv in f.levels if lv.call is not None and lv.readers > (f.safe_up_to or 0)]
        if after and after[0].call is Call.UNDECIDED:
            return f"preliminary at {after[0].readers} readers, not judged safe: {f.verdict}"
        return f.verdict
