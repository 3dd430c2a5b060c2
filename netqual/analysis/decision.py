"""One decision from all the evidence a run holds (docs/policy.md, "One decision").

Per path, the verdict is the worst class of its evidence: its RTT against the policy's lines
(``rtt_verdict``), with a workload its chunk fetch against the baseline, and what the run's
other instruments say about the interfaces it used (``netqual.analysis.evidence``: loss,
configuration, bandwidth, fan-in). Evidence that cannot judge holds a path at marginal: it
never passes one. The run's answer is ``go`` when every path is offload-safe and nothing
was left unjudged, ``no-go`` when no path is, else ``conditional``; what blocks is ranked
by the paths it holds below offload-safe.

``decide`` starts from the RTT classes (``undecided``), so a decided run decided again, an
older results file or a run re-judged with another workload all come out the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from netqual.analysis.evidence import Endpoints, Found
from netqual.analysis.evidence.bandwidth import bandwidth
from netqual.analysis.evidence.config import config
from netqual.analysis.evidence.engine import engine
from netqual.analysis.evidence.fanin import fanin, holds
from netqual.analysis.evidence.loss import loss
from netqual.analysis.evidence.rtt import rtt
from netqual.analysis.evidence.workload import workload
from netqual.analysis.narrative import incomplete_note, preliminary_note
from netqual.analysis.stability import unstable_paths
from netqual.model.decision import (
    Answer,
    Blocking,
    Decision,
    Evidence,
    EvidenceKind,
)
from netqual.model.verdict import Verdict
from netqual.table.columns import DecisionColumns
from netqual.table.kinds import Shared
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.table.summary import summarize


def undecided(table: PathTable) -> PathTable:
    """The table as the RTT policy judged it: verdicts and reasons of the RTT alone."""
    dc = table.decision
    if dc is None:
        return table
    return dataclasses.replace(table, verdict=dc.rtt_verdict, reasons=dc.rtt_reasons, decision=None)


def _rank(v: Verdict | None) -> int:
    """A class's rank; evidence that cannot judge holds a path at marginal."""
    return Verdict.MARGINAL.rank if v is None else v.rank


def _verdicts(
    table: PathTable, found: Sequence[Found]
) -> tuple[np.ndarray, dict[int, list[Evidence]]]:
    """Per path the decided rank, and per path with any the evidence beyond RTT/workload."""
    verdict = table.verdict.copy()
    wl = table.workload
    if wl is not None:
        verdict = np.maximum(verdict, np.where(wl.verdict >= 0, wl.verdict, Verdict.MARGINAL.rank))
    per_row: dict[int, list[Evidence]] = {}
    for f in found:
        for hit in f.hits:
            if not len(hit.rows):
                continue
            verdict[hit.rows] = np.maximum(verdict[hit.rows], _rank(hit.evidence.verdict))
            for i in hit.rows.tolist():
                per_row.setdefault(i, []).append(hit.evidence)
    return verdict, per_row


def _reasons(
    table: PathTable, verdict: np.ndarray, per_row: dict[int, list[Evidence]]
) -> tuple[tuple[str, ...], ...]:
    """A path whose evidence made it worse than its RTT says so first (each line exactly its
    evidence's ``reason``, so a decided file's RTT reasons are told apart again)."""
    reasons = list(table.reasons)
    wl = table.workload
    worse = np.flatnonzero(verdict > table.verdict)
    for i in worse.tolist():
        own = table.verdict[i]
        lines = []
        if wl is not None and wl.verdict[i] > own and wl.reasons[i]:
            lines.append(f"{EvidenceKind.WORKLOAD.label}: {wl.reasons[i][0]}")
        lines += [e.reason for e in per_row.get(i, ()) if _rank(e.verdict) > own]
        reasons[i] = (*dict.fromkeys(lines), *table.reasons[i])
    return tuple(reasons)


def _evidence_column(
    n: int, per_row: dict[int, list[Evidence]]
) -> tuple[tuple[Evidence, ...], ...]:
    shared = Shared()
    empty: tuple[Evidence, ...] = ()
    column = [empty] * n
    for i, items in per_row.items():
        column[i] = shared.remember(tuple(dict.fromkeys(items)))
    return tuple(column)


def _governs(results: Results, found: Sequence[Found]) -> str:
    policy = results.run.policy
    lines = (
        f"{policy.metric.value} RTT against {policy.safe_max_us:g} / {policy.unsafe_above_us:g} us"
    )
    w = results.workload
    if w is None:
        head = f"the RTT lines ({lines}; no workload given, so they are the default)"
    else:
        head = (
            f"workload {w.model.name} (TP{w.tp}, {w.chunk_tokens}-token chunks at "
            f"{w.ranks_per_node} reads in flight) and the RTT lines ({lines})"
        )
    more = [
        f.kind.label
        for f in found
        if f.kind not in (EvidenceKind.RTT, EvidenceKind.WORKLOAD) and f.summary.verdict is not None
    ]
    return head + (f", with {', '.join(more)}" if more else "")


def _rank_blocking(items: Sequence[Blocking]) -> tuple[Blocking, ...]:
    """What blocks the most paths first, then the worse class, then by name."""
    return tuple(
        sorted(items, key=lambda b: (-b.paths, -_rank(b.verdict), b.kind.value, b.subject.name))
    )


def decide(results: Results) -> Results:
    """The run with every path decided, its summary counted again and its ``decision``."""
    table = undecided(results.paths)
    base = dataclasses.replace(results, paths=table, decision=None)
    ends = Endpoints.of(base)
    found = [
        rtt(base, ends),
        workload(base, ends),
        loss(base, ends),
        config(base, ends),
        bandwidth(base, ends),
        fanin(base, ends),
        engine(base, ends),
    ]
    rank, per_row = _verdicts(table, found)
    decided = dataclasses.replace(
        table,
        verdict=rank,
        reasons=_reasons(table, rank, per_row),
        decision=DecisionColumns(
            rtt_verdict=table.verdict,
            rtt_reasons=table.reasons,
            evidence=_evidence_column(len(table), per_row),
        ),
    )
    counts = decided.counts()
    conditions = []
    if results.incomplete:
        conditions.append(
            f"{incomplete_note(results)}: finish the run (the unmeasured pairs may be the bad ones)"
        )
    if results.preliminary:
        conditions.append(f"{preliminary_note(results)}: measure again with the policy's samples")
    cautions = [c for f in found for c in f.cautions]
    if shaky := unstable_paths(base):
        cautions.append(
            f"unstable RTT on {shaky:,} offload-safe path{'s' if shaky != 1 else ''}: a "
            "standard deviation of 10% of the mean or more, and beyond what the other paths "
            "of its tier vary by the run's repeatability (docs/report.md); re-test before "
            "sign-off. A caution, it decides nothing"
        )
    blocking = _rank_blocking([b for f in found for b in f.blocking])
    total = len(decided)
    if not total or not counts.get(Verdict.SAFE, 0):
        answer = Answer.NO_GO
    elif blocking or conditions or counts.get(Verdict.SAFE, 0) < total:
        answer = Answer.CONDITIONAL
    else:
        answer = Answer.GO
    decision = Decision(
        answer=answer,
        governs=_governs(base, found),
        blocking=blocking,
        counts=counts,
        evidence=tuple(f.summary for f in found),
        cautions=tuple(cautions),
        conditions=tuple(conditions),
        fanin=holds(results.fanin),
    )
    return dataclasses.replace(
        results,
        paths=decided,
        summary=summarize(decided, results.run.policy.metric),
        decision=decision,
    )
