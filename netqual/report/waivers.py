"""Waivers as the report shows them (the gate owns their meaning; the record lives in models)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.analysis.narrative import waiver_problems
from netqual.model.policy import Waiver
from netqual.table.paths import VERDICTS
from netqual.table.run import Results


@dataclass(frozen=True)
class WaiverNote:
    waiver: Waiver
    expired: bool
    verdict: str  # the path's verdict in this run, or 'not measured'
    problem: str | None = None  # why it cannot apply: a node or path this run lacks


def waiver_notes(results: Results, waivers: Sequence[Waiver], today: dt.date) -> list[WaiverNote]:
    if not waivers:
        return []
    table = results.paths
    rows = table.rows_of([k for w in waivers for k in ((w.src, w.dst), (w.dst, w.src))])
    out = []
    for i, (w, problem) in enumerate(zip(waivers, waiver_problems(results, waivers), strict=True)):
        forward, reverse = rows[2 * i], rows[2 * i + 1]
        row = forward if forward is not None else reverse
        v = "not measured" if row is None else VERDICTS[table.verdict[row]].value
        out.append(WaiverNote(w, w.expired(today), v, problem))
    return out
