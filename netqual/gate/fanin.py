"""Rule over the fan-in sweep (``fanin`` in the results file, docs/fanin.md):
``min_fanin_readers = N`` fails on a storage node whose verdict is "safe up to" fewer than
N concurrent readers, or that the sweep did not judge. "Safe up to" counts only levels the
knee rule surely called within the factor, so a level it could not call (preliminary: its
p99's confidence interval straddles the factor) never passes: the finding says so. With
``--engine`` the storage node holds the fewer of its probe's and its engine's "safe up to"
(the deployment fetches through the engine): the rule reads both from the decision
(``Decision.fanin``), and a level through the engine not measured (configuration) ends the
engine's "safe up to" below it. A run without a sweep fails it: nothing shows how many
readers its storage nodes carry. A finding names the node (and the engine)."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.analysis.evidence.fanin import holds
from netqual.gate.model import Finding, GateContext, Outcome, Status
from netqual.gate.rules import Rule
from netqual.model.decision import FaninHold
from netqual.table.paths import IntArray, PathTable


@dataclass(frozen=True)
class MinFaninReaders(Rule):
    readers: int = 1

    @property
    def key(self) -> str:
        return "min_fanin_readers"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        every = ctx.decision.fanin if ctx.decision is not None else holds(ctx.fanin)
        mine = [h for h in every if self.scope.covers_node(h.storage, ctx.nodes)]
        if not mine:
            return Outcome(
                self.name,
                Status.FAIL,
                "the results have no fan-in sweep of a storage node in scope: run with "
                f"--mode bipartite --fanin 1,...,{self.readers} (docs/fanin.md)",
            )
        short: dict[str, FaninHold] = {}  # per storage node its first sweep short of N
        for h in mine:
            if (h.safe_up_to is None or h.safe_up_to < self.readers) and h.storage not in short:
                short[h.storage] = h
        failing = tuple(Finding(h.storage, h.storage, self._why(h)) for h in short.values())
        nodes = len({h.storage for h in mine})
        if failing:
            first = failing[0]
            return Outcome(
                self.name,
                Status.FAIL,
                f"{len(failing):,} of {nodes:,} storage node(s) not safe up to "
                f"{self.readers} readers: first {first.src}: {first.detail}",
                failing,
            )
        engines = sorted({h.engine for h in mine if h.engine is not None})
        also = f" (and through {', '.join(engines)})" if engines else ""
        return Outcome(
            self.name, Status.PASS, f"{nodes} storage node(s) safe up to {self.readers}+{also}"
        )

    def _why(self, h: FaninHold) -> str:
        """The sweep's verdict, named ('through mooncake: ...' for the engine's levels), led
        by "preliminary" when the level that ended "safe up to" is one the knee rule could
        not call."""
        said = h.detail if h.engine is None else f"through {h.engine}: {h.detail}"
        if h.preliminary is not None:
            return f"preliminary at {h.preliminary} readers, not judged safe: {said}"
        return said
