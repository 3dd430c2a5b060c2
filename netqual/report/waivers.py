"""Waivers as the report shows them (the gate owns their meaning; the record lives in models)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.models import Results, Waiver
from netqual.narrative import waiver_problem


@dataclass(frozen=True)
class WaiverNote:
    waiver: Waiver
    expired: bool
    verdict: str  # the path's verdict in this run, or 'not measured'
    problem: str | None = None  # why it cannot apply: a node or path this run lacks


def waiver_notes(results: Results, waivers: Sequence[Waiver], today: dt.date) -> list[WaiverNote]:
    if not waivers:
        return []
    verdicts = {p.key: p.verdict.value for p in results.paths}
    out = []
    for w in waivers:
        v = verdicts.get((w.src, w.dst)) or verdicts.get((w.dst, w.src)) or "not measured"
        out.append(WaiverNote(w, w.expired(today), v, waiver_problem(results, w)))
    return out
