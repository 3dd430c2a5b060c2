"""The report's first screen (docs/report.md): the run's one answer (go, go with conditions,
no-go), what it rests on, and the fixes ranked by the paths they hold, before any detail
(``netqual.analysis.decision``)."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.model.decision import Answer, Decision
from netqual.table.run import Results

FIXES_SHOWN = 5
_CSS = {Answer.GO: "go", Answer.CONDITIONAL: "conditional", Answer.NO_GO: "no-go"}


@dataclass(frozen=True)
class Fix:
    subject: str
    kind: str
    paths: int
    detail: str
    action: str


@dataclass(frozen=True)
class DecisionView:
    answer: str  # "GO WITH CONDITIONS"
    css: str  # go | conditional | no-go
    governs: str
    fixes: tuple[Fix, ...]  # the first FIXES_SHOWN, most paths held first
    more: int  # blocking items not shown
    conditions: tuple[str, ...]
    cautions: tuple[str, ...]
    not_judged: tuple[str, ...]  # kinds of evidence the run could not judge, and why


def decision_view(results: Results) -> DecisionView | None:
    d: Decision | None = results.decision
    if d is None:
        return None
    return DecisionView(
        answer=d.answer.label,
        css=_CSS[d.answer],
        governs=d.governs,
        fixes=tuple(
            Fix(b.subject.name, b.kind.label, b.paths, b.detail, b.action)
            for b in d.blocking[:FIXES_SHOWN]
        ),
        more=max(0, len(d.blocking) - FIXES_SHOWN),
        conditions=d.conditions,
        cautions=d.cautions,
        not_judged=tuple(f"{e.kind.label}: {e.detail}" for e in d.evidence if e.verdict is None),
    )
