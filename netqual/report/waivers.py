"""Waivers as the report shows them (the gate owns their meaning; the record lives in models)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.models import Results, Waiver
from netqual.narrative import used_names, waiver_problem
from netqual.pathtable import VERDICTS


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
    names = used_names(results)
    out = []
    for w in waivers:
        forward, reverse = table.rows_of([(w.src, w.dst), (w.dst, w.src)])
        row = forward if forward is not None else reverse
        v = "not measured" if row is None else VERDICTS[table.verdict[row]].value
        out.append(WaiverNote(w, w.expired(today), v, waiver_problem(results, w, names)))
    return out
