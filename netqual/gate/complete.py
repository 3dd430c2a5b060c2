"""The ``complete`` rule: a verdict covers only what was measured, so a run that left
scheduled pairs unmeasured (interrupted, or agents that failed their configuration) fails
the gate unless the profile (``complete = false``) or ``--allow-incomplete`` relaxes it.
A run that measured nothing fails even then: there is nothing to judge."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.gate.model import Finding, GateContext, Outcome, Status
from netqual.gate.rules import Rule
from netqual.table.paths import IntArray, PathTable


def _pairs(n: int) -> str:
    return f"{n:,} pair" if n == 1 else f"{n:,} pairs"


def missing_sentence(ctx: GateContext, measured: int) -> str | None:
    """E.g. '23 of 28 scheduled pairs not measured (run interrupted)'; None when complete."""
    planned, missing = ctx.pairs_planned, ctx.unmeasured
    why = []
    if ctx.interrupted:
        why.append("run interrupted")
    if ctx.pingpong_only:
        why.append(f"{ctx.pingpong_only:,} with ping-pong only: their bulk phase never ran")
    if ctx.not_measured:
        why.append(f"{len(ctx.not_measured)} by a configuration failure")
    because = f" ({', '.join(why)})" if why else ""
    if missing is None:  # an interrupted run whose schedule is not known
        return f"run interrupted after {_pairs(measured)}; scheduled pairs unknown"
    if missing == 0:
        return None
    of = f" of {planned:,} scheduled" if planned is not None else " scheduled"
    verb = "was" if missing == 1 else "were"
    noun = "pair" if missing == 1 and planned is None else "pairs"  # "1 of 28 pairs was"
    return f"{missing:,}{of} {noun} {verb} not measured{because}"


@dataclass(frozen=True)
class Complete(Rule):
    relaxed_by: str | None = None  # "--allow-incomplete" or "complete = false"; None: strict

    @property
    def key(self) -> str:
        return "complete"

    def check(self, table: PathTable, rows: IntArray, ctx: GateContext) -> Outcome:
        measured = len(table) - ctx.pingpong_only
        failing = tuple(
            Finding(m.src, m.dst, f"not measured ({m.kind}): {m.reason}") for m in ctx.not_measured
        )
        if measured == 0:
            planned = f" of {ctx.pairs_planned:,} scheduled" if ctx.pairs_planned else ""
            return Outcome(self.name, Status.FAIL, f"no pair measured (0{planned})", failing)
        missing = missing_sentence(ctx, measured)
        if missing is None:
            return Outcome(self.name, Status.PASS, f"every scheduled pair measured ({measured:,})")
        if self.relaxed_by is not None:
            return Outcome(
                self.name, Status.SKIP, f"relaxed by {self.relaxed_by}: {missing}", failing
            )
        first = "fix the configuration (netqual check), then " if ctx.not_measured else ""
        hint = f"{first}finish the run: {ctx.resume_command} (plus the run's own options)"
        return Outcome(self.name, Status.FAIL, f"{missing}; {hint}", failing)
