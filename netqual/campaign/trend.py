"""What the history store says about a campaign: the numbers behind ``campaign report``
(terminal, JSON, HTML) and the exporter. Queries only; no output here.

A week's state of a path is its last measurement that week (``store.WEEK_PATHS``). "Worse"
is ``netqual diff``'s (``rise.worse``: a worse class, or p99 up by more than the campaign's
percentage and at least its noise floor in microseconds); "better" is the same run
backwards, where not worse.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from netqual.analysis import rise
from netqual.campaign.config import Campaign
from netqual.campaign.store import WEEK_PATHS, Store
from netqual.table.paths import VERDICTS

MAX_LISTED = 50  # paths listed per movement; the counts cover all of them
MAX_RACK_PAIRS = 40  # rack pairs shown per report, worst latest p99 first


@dataclass(frozen=True)
class WeekCounts:
    week: int
    runs: int
    paths: int
    safe: int
    marginal: int
    unsafe: int
    workload: tuple[int, int, int] | None  # safe, marginal, unsafe; None: no workload judged


@dataclass(frozen=True)
class PathMove:
    src: str
    dst: str
    tier: str
    old_p99_us: float | None
    new_p99_us: float | None
    old_verdict: str
    new_verdict: str


@dataclass(frozen=True)
class Movement:
    """Paths that got worse / better between two weeks (at most MAX_LISTED of each)."""

    since_week: int
    worse: tuple[PathMove, ...]
    better: tuple[PathMove, ...]
    n_worse: int
    n_better: int
    compared: int


@dataclass(frozen=True)
class SuspectAge:
    kind: str
    subject: str
    first_week: int
    last_week: int
    fixed_in: int | None  # the first week after last_week with a run; None while open

    @property
    def open(self) -> bool:
        return self.fixed_in is None


@dataclass(frozen=True)
class WaiverDue:
    milestone: str
    src: str
    dst: str
    until: dt.date
    owner: str
    reason: str


@dataclass(frozen=True)
class Distribution:
    """One tier (or rack pair) in one week: p50 and p99 over its paths."""

    group: str
    week: int
    paths: int
    p50_median_us: float | None
    p99_median_us: float | None
    p99_p90_us: float | None
    p99_max_us: float | None
    unsafe: int


@dataclass(frozen=True)
class GateRow:
    milestone: str
    week: int
    profile: str
    passed: bool
    failed_rules: tuple[str, ...]
    judged_on: dt.date


class MilestoneStatus(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    DUE = "due, not judged"  # the campaign has a run of its week or later
    NOT_DUE = "not due"  # no run of its week yet: never passed


@dataclass(frozen=True)
class MilestoneState:
    """A milestone as the campaign stands: its latest judgement, else whether it is due."""

    name: str
    week: int
    status: MilestoneStatus
    judged_week: int | None  # the week of the run it judged

    @property
    def text(self) -> str:
        """'week2 FAILED (week 2)', 'week6 not due until week 6' (terminal and page)."""
        if self.status in (MilestoneStatus.PASSED, MilestoneStatus.FAILED):
            return f"{self.name} {self.status.value.upper()} (week {self.judged_week})"
        if self.status is MilestoneStatus.DUE:
            return f"{self.name} due (week {self.week}), not judged yet"
        return f"{self.name} not due until week {self.week}"


@dataclass(frozen=True)
class Trend:
    campaign: str
    weeks: tuple[WeekCounts, ...]
    latest_week: int | None
    since_last: Movement | None
    since_first: Movement | None
    suspects: tuple[SuspectAge, ...]
    waivers_due: tuple[WaiverDue, ...]
    next_milestone: str | None
    tiers: tuple[Distribution, ...]
    rack_pairs: tuple[Distribution, ...]
    gates: tuple[GateRow, ...]
    milestones: tuple[MilestoneState, ...] = ()


def week_counts(store: Store) -> tuple[WeekCounts, ...]:
    rows = store.con.execute(
        f"""SELECT week, count(*), count(*) FILTER (verdict = 0), count(*) FILTER (verdict = 1),
                   count(*) FILTER (verdict = 2), count(workload_verdict),
                   count(*) FILTER (workload_verdict = 0), count(*) FILTER (workload_verdict = 1),
                   count(*) FILTER (workload_verdict = 2)
            FROM {WEEK_PATHS} GROUP BY week ORDER BY week"""
    ).fetchall()
    runs = dict(store.con.execute("SELECT week, count(*) FROM runs GROUP BY week").fetchall())
    return tuple(
        WeekCounts(
            week=w, runs=runs.get(w, 0), paths=n, safe=s, marginal=m, unsafe=u,
            workload=(ws, wm, wu) if judged else None,
        )
        for w, n, s, m, u, judged, ws, wm, wu in rows
    )  # fmt: skip


def movement(
    store: Store, old_week: int, new_week: int, pct: float, min_delta_us: float
) -> Movement:
    rows = store.con.execute(
        f"""WITH wp AS (SELECT * FROM {WEEK_PATHS})
            SELECT n.src, n.dst, n.tier, o.p99_us AS old_p99, n.p99_us AS new_p99,
                   o.verdict AS old_v, n.verdict AS new_v
            FROM wp n JOIN wp o ON n.a = o.a AND n.b = o.b AND o.week = ?
            WHERE n.week = ?""",
        [old_week, new_week],
    ).fetchnumpy()
    old_p99 = np.asarray(rows["old_p99"], dtype=np.float64)
    new_p99 = np.asarray(rows["new_p99"], dtype=np.float64)
    old_v = np.asarray(rows["old_v"], dtype=np.int64)
    new_v = np.asarray(rows["new_v"], dtype=np.int64)
    worse = rise.worse(old_v, new_v, old_p99, new_p99, pct, min_delta_us)
    better = ~worse & rise.worse(new_v, old_v, new_p99, old_p99, pct, min_delta_us)

    def moves(mask: np.ndarray, worst_first: bool) -> tuple[PathMove, ...]:
        idx = np.flatnonzero(mask)
        change = np.nan_to_num(new_p99[idx] - old_p99[idx])
        order = idx[np.argsort(-change if worst_first else change, kind="stable")][:MAX_LISTED]
        return tuple(
            PathMove(
                src=str(rows["src"][i]), dst=str(rows["dst"][i]), tier=str(rows["tier"][i]),
                old_p99_us=_opt(old_p99[i]), new_p99_us=_opt(new_p99[i]),
                old_verdict=VERDICTS[old_v[i]].value, new_verdict=VERDICTS[new_v[i]].value,
            )
            for i in order.tolist()
        )  # fmt: skip

    return Movement(
        since_week=old_week,
        worse=moves(worse, True),
        better=moves(better, False),
        n_worse=int(worse.sum()),
        n_better=int(better.sum()),
        compared=len(old_v),
    )


def suspect_ages(store: Store) -> tuple[SuspectAge, ...]:
    weeks = [
        w for (w,) in store.con.execute("SELECT DISTINCT week FROM runs ORDER BY week").fetchall()
    ]
    rows = store.con.execute(
        """SELECT s.kind, s.subject, min(r.week), max(r.week)
           FROM suspects s JOIN runs r USING (seq) GROUP BY s.kind, s.subject
           ORDER BY min(r.week), s.kind, s.subject"""
    ).fetchall()
    out = []
    for kind, subject, first, last in rows:
        after = [w for w in weeks if w > last]
        out.append(SuspectAge(kind, subject, first, last, after[0] if after else None))
    return tuple(out)


def waivers_due(
    store: Store, campaign: Campaign, week: int
) -> tuple[str | None, tuple[WaiverDue, ...]]:
    """Waivers that expire before the next milestone's week starts (needs the campaign's
    start date to know when that is)."""
    nxt = campaign.next_milestone(week)
    if nxt is None or campaign.start is None:
        return (nxt.name if nxt else None), ()
    deadline = campaign.start + dt.timedelta(days=7 * (nxt.week - 1))
    rows = store.con.execute(
        "SELECT milestone, src, dst, until, owner, reason FROM waivers"
        " WHERE until < ? ORDER BY until",
        [deadline],
    ).fetchall()
    return nxt.name, tuple(WaiverDue(*r) for r in rows)


def distributions(
    store: Store, group_by: str, *, limit: int | None = None
) -> tuple[Distribution, ...]:
    """p50/p99 per week of each tier (``group_by="tier"``) or rack pair (``"rack"``)."""
    key = "tier"
    if group_by == "rack":
        key = (
            "least(coalesce(src_rack, '?'), coalesce(dst_rack, '?')) || ' <-> ' || "
            "greatest(coalesce(src_rack, '?'), coalesce(dst_rack, '?'))"
        )
    rows = store.con.execute(
        f"""SELECT {key} AS g, week, count(*), median(p50_us), median(p99_us),
                   quantile_cont(p99_us, 0.9), max(p99_us), count(*) FILTER (verdict = 2)
            FROM {WEEK_PATHS} GROUP BY g, week ORDER BY g, week"""
    ).fetchall()
    dists = tuple(Distribution(*r) for r in rows)
    if limit is None:
        return dists
    last: dict[str, float] = {}
    for d in dists:  # each group's latest week's median p99, to keep the worst groups
        last[d.group] = d.p99_median_us if d.p99_median_us is not None else float("inf")
    keep = set(sorted(last, key=lambda g: -last[g])[:limit])
    return tuple(d for d in dists if d.group in keep)


def gate_rows(
    store: Store, milestone_weeks: Mapping[str, int] | None = None
) -> tuple[GateRow, ...]:
    """The stored milestone outcomes. With ``milestone_weeks``, a judgement of a run before
    the milestone's week (stored by a netqual that judged milestones early) is left out: a
    milestone is never passed before its week."""
    rows = store.con.execute(
        """SELECT g.milestone, r.week, g.profile, g.passed, g.failed_rules, g.judged_on
           FROM gates g JOIN runs r USING (seq) ORDER BY r.week, g.milestone, g.seq"""
    ).fetchall()
    weeks = milestone_weeks or {}
    return tuple(
        GateRow(m, w, p, ok, tuple(json.loads(f)), d)
        for m, w, p, ok, f, d in rows
        if w >= weeks.get(m, 0)
    )


def milestone_states(
    campaign: Campaign, gates: tuple[GateRow, ...], latest_week: int | None
) -> tuple[MilestoneState, ...]:
    out = []
    for m in sorted(campaign.milestones, key=lambda m: (m.week, m.name)):
        judged = [g for g in gates if g.milestone == m.name]
        if judged:
            last = judged[-1]
            status = MilestoneStatus.PASSED if last.passed else MilestoneStatus.FAILED
            out.append(MilestoneState(m.name, m.week, status, last.week))
        elif latest_week is not None and latest_week >= m.week:
            out.append(MilestoneState(m.name, m.week, MilestoneStatus.DUE, None))
        else:
            out.append(MilestoneState(m.name, m.week, MilestoneStatus.NOT_DUE, None))
    return tuple(out)


def trend(store: Store, campaign: Campaign) -> Trend:
    weeks = week_counts(store)
    latest = weeks[-1].week if weeks else None
    since_last = since_first = None
    rules = campaign.history
    if len(weeks) >= 2 and latest is not None:
        since_last = movement(store, weeks[-2].week, latest, rules.increase_pct, rules.min_delta_us)
        since_first = movement(store, weeks[0].week, latest, rules.increase_pct, rules.min_delta_us)
    nxt, due = waivers_due(store, campaign, latest or 0)
    gates = gate_rows(store, {m.name: m.week for m in campaign.milestones})
    return Trend(
        campaign=campaign.name,
        weeks=weeks,
        latest_week=latest,
        since_last=since_last,
        since_first=since_first,
        suspects=suspect_ages(store),
        waivers_due=due,
        next_milestone=nxt,
        tiers=distributions(store, "tier"),
        rack_pairs=distributions(store, "rack", limit=MAX_RACK_PAIRS),
        gates=gates,
        milestones=milestone_states(campaign, gates, latest),
    )


def _opt(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def trend_to_dict(t: Trend) -> dict[str, object]:
    """``campaign report --json``: every field of the trend, dates as ISO text."""

    def plain(value: object) -> object:
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    doc = plain(dataclasses.asdict(t))
    assert isinstance(doc, dict)
    for s, d in zip(t.suspects, doc["suspects"], strict=True):
        d["open"] = s.open
    return doc
