"""Milestone gates: a campaign milestone judges a run with its gate profile (the gate's
``evaluate``, the previous week's run as the baseline) plus the campaign's history rules:

* ``history: no path worse than its best week``: the run's p99 against the lowest weekly p99
  each pair had in earlier weeks, by ``rise.p99_rises`` (the campaign's percentage and
  noise floor); the profile's waivers excuse a path here as in every other rule;
* ``history: no suspect open longer than N weeks``: a localisation suspect of the run first
  seen more than N weeks before the run's week.

(Every waiver has an owner and an expiry date: the profile parser refuses one without.)
The result is a plain ``GateReport``: the terminal, JSON and JUnit outputs of ``gate``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np

from netqual.analysis.rise import p99_rises
from netqual.base.errors import CampaignError
from netqual.base.units import format_us
from netqual.campaign.config import Campaign, Milestone
from netqual.campaign.store import WEEK_PATHS, RunRow, Store
from netqual.campaign.stored import stored_paths
from netqual.gate import Finding, GateReport, Outcome, Profile, Status, evaluate
from netqual.gate.registry import compares_baseline
from netqual.model.policy import Waiver
from netqual.table.run import Results


@dataclasses.dataclass(frozen=True)
class SubjectFinding(Finding):
    """A finding about a node, a link or a rack pair rather than one path."""

    @property
    def label(self) -> str:
        return self.src


def runs_to_judge(store: Store, milestone: Milestone) -> tuple[RunRow, RunRow | None] | None:
    """The run a milestone judges, and the latest run of an earlier week (the baseline of a
    profile that compares). A milestone is judged in or after its week only: the latest run
    of its week, else (judged late) the first run after it; None while the campaign has no
    run of its week or later: the milestone is not due (``not_due``), never passed.
    Retests count as part of their run."""
    runs = [r for r in store.runs() if r.retest_of is None]
    if not runs:
        raise CampaignError(
            str(store.path), f"no run in the campaign to judge for {milestone.name}", "runs"
        )
    in_week = [r for r in runs if r.week == milestone.week]
    later = sorted((r for r in runs if r.week > milestone.week), key=lambda r: (r.week, r.seq))
    if not in_week and not later:
        return None
    target = in_week[-1] if in_week else later[0]
    earlier = [r for r in runs if r.week < target.week]
    return target, (earlier[-1] if earlier else None)


def not_due(
    campaign: Campaign, store: Store, milestone: Milestone, profile: Profile, today: dt.date
) -> GateReport:
    """The gate report of a milestone without a run of its week or later: one skipped rule
    and ``not_due`` set, so it does not pass (exit 1) and JUnit marks it skipped."""
    runs = store.runs()
    latest = max(r.week for r in runs)
    now = campaign.week_of(today)
    if now is not None and now >= milestone.week:
        why = (
            f"{milestone.name} is due (week {milestone.week}; today is in week {now}) but the"
            f" campaign has no run of week {milestone.week} or later (latest: week {latest}):"
            " add this week's run, then judge it"
        )
    else:
        why = (
            f"{milestone.name} is not due until week {milestone.week}: the campaign's latest"
            f" run is in week {latest}; a milestone is judged in or after its week only"
        )
    outcome = Outcome(f"milestone {milestone.name}", Status.SKIP, why)
    return GateReport(
        profile=f"{milestone.name} ({profile.name})",
        source=profile.source,
        results_source=f"no run of week {milestone.week} or later",
        baseline_source=None,
        today=today,
        outcomes=(outcome,),
        not_due=why,
    )


def compares(profile: Profile) -> bool:
    """Whether the profile has a rule against a baseline run."""
    return profile.baseline_required or any(compares_baseline(r) for r in profile.rules)


def stored_baseline(store: Store, base: RunRow, results: Results) -> Results:
    """The baseline run as the store keeps it (``stored.stored_paths``): the baseline rules
    read its paths' names, verdicts and p99; its nodes are the campaign's (every run of a
    campaign has them, ``campaign add`` refuses others), taken from the judged run."""
    return dataclasses.replace(results, paths=stored_paths(store.con, base.seq), interference=None)


def judge(
    campaign: Campaign,
    store: Store,
    milestone: Milestone,
    profile: Profile,
    target: RunRow,
    results: Results,
    *,
    baseline: Results | None,
    baseline_source: str | None,
    today: dt.date,
) -> GateReport:
    report = evaluate(
        results, profile, today=today, baseline=baseline,
        results_source=target.source, baseline_source=baseline_source,
    )  # fmt: skip
    active = [w for w in profile.waivers if not w.expired(today)]
    history = (
        _worse_than_best(campaign, store, target, active),
        _suspect_age(campaign, store, target),
    )
    return dataclasses.replace(
        report, profile=f"{milestone.name} ({profile.name})", outcomes=report.outcomes + history
    )


def _worse_than_best(
    campaign: Campaign, store: Store, target: RunRow, waivers: list[Waiver]
) -> Outcome:
    rules = campaign.history
    name = "history: no path worse than its best week"
    rows = store.con.execute(
        f"""WITH best AS (
                SELECT a, b, min(p99_us) AS best_us, arg_min(week, p99_us) AS best_week
                FROM {WEEK_PATHS} WHERE week < ? AND p99_us IS NOT NULL GROUP BY a, b)
            SELECT n.src, n.dst, best.best_us, best.best_week, n.p99_us
            FROM paths n JOIN best USING (a, b) WHERE n.seq = ? AND n.p99_us IS NOT NULL
            ORDER BY n.src, n.dst""",
        [target.week, target.seq],
    ).fetchnumpy()
    best = np.asarray(rows["best_us"], dtype=np.float64)
    now = np.asarray(rows["p99_us"], dtype=np.float64)
    if not len(best):
        return Outcome(name, Status.SKIP, f"no earlier week to compare week {target.week} with")
    offends = np.flatnonzero(p99_rises(best, now, rules.increase_pct, rules.min_delta_us))
    failing: list[Finding] = []
    waived: list[Finding] = []
    for i in offends.tolist():
        src, dst = str(rows["src"][i]), str(rows["dst"][i])
        rise = 100.0 * (now[i] - best[i]) / best[i]
        detail = (
            f"p99 {format_us(float(now[i]))} us, best {format_us(float(best[i]))} us"
            f" in week {int(rows['best_week'][i])} (+{rise:.0f}%)"
        )
        excused = any(w.covers((src, dst)) for w in waivers)
        (waived if excused else failing).append(Finding(src, dst, detail))
    status = Status.FAIL if failing else Status.PASS
    message = (
        f"{len(failing):,} of {len(best):,} paths with p99 more than {rules.increase_pct:g}%"
        f" and {rules.min_delta_us:g} us above their best week"
    )
    return Outcome(name, status, message, tuple(failing), tuple(waived))


def _suspect_age(campaign: Campaign, store: Store, target: RunRow) -> Outcome:
    limit = campaign.history.max_suspect_age_weeks
    name = f"history: no suspect open longer than {limit} weeks"
    rows = store.con.execute(
        """SELECT s.kind, s.subject, min(r.week) AS first_week
           FROM suspects s JOIN runs r USING (seq)
           JOIN (SELECT DISTINCT kind, subject FROM suspects WHERE seq = ?) now
             USING (kind, subject)
           WHERE r.week <= ?
           GROUP BY s.kind, s.subject ORDER BY first_week, s.kind, s.subject""",
        [target.seq, target.week],
    ).fetchall()
    old = [
        SubjectFinding(
            f"{kind} {subject}", "", f"suspect since week {first} ({target.week - first} weeks)"
        )
        for kind, subject, first in rows
        if target.week - first > limit
    ]
    status = Status.FAIL if old else Status.PASS
    message = f"{len(old):,} of {len(rows):,} open suspects first seen more than {limit} weeks ago"
    return Outcome(name, status, message, tuple(old))
