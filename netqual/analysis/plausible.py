"""Values no network can produce, and verdicts that contradict their values.

An agent holding the token can still lie (or be broken), and a results file can be edited.
A negative or zero RTT, percentiles out of order, a histogram that does not hold the
samples it claims or a goodput the plan cannot carry is the path's problem: that path is
``unsafe`` with the reason ``agent reported impossible values`` and every other path of the
run is judged as usual. The same rule runs at the coordinator (``check_path``, as a probe
result arrives) and when a results file is read (``mark_impossible``), so one liar can
neither pass a path nor make the whole run directory unreadable. ``rejudge`` lets the gate
judge from the values instead of trusting a stored verdict.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from netqual.analysis.policy import classes
from netqual.base.units import format_us
from netqual.model.path import PathResult
from netqual.model.policy import Policy
from netqual.model.stats import RTT_STATISTICS
from netqual.model.verdict import Verdict
from netqual.table.paths import VERDICTS, BoolArray, PathTable

IMPOSSIBLE = "agent reported impossible values"
# Above any link that exists (8 x 400 Gbit/s); the Little's-law bound below is tighter.
MAX_GOODPUT_GBPS = 3200.0
# Little's law: goodput = bytes in flight / mean completion, and the mean of non-negative
# times is at least half their median; x2 more for timing noise.
_LITTLE_SLACK = 4.0


def _rtt_problems(t: PathTable) -> list[tuple[str, BoolArray]]:
    r = t.rtt
    stats = np.vstack([r[name] for name in ("min", "p50", "p90", "p99", "p999", "max")])
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(np.vstack([r[name] for name in RTT_STATISTICS])).all(axis=0)
        running = np.concatenate(([0], np.cumsum(t.hist_counts)))
        hist_sums = running[t.hist_offsets[1:]] - running[t.hist_offsets[:-1]]
        bins = np.diff(t.hist_offsets)
        hist_sums = np.where(bins > 0, hist_sums, t.samples)
        checks = [
            ("an RTT that is not a finite number", ~finite),
            ("an RTT of zero or less", (stats <= 0).any(axis=0)),
            ("RTT percentiles out of order", (np.diff(stats, axis=0) < 0).any(axis=0)),
            ("a mean RTT outside min..max", (r["mean"] < r["min"]) | (r["mean"] > r["max"])),
            ("a negative RTT deviation", r["stdev"] < 0),
            ("no samples behind its RTT", t.samples <= 0),
            ("a histogram that does not hold its samples", np.abs(hist_sums - t.samples) > bins),
        ]
    return [(what, mask & t.has_rtt) for what, mask in checks]


def _bulk_problems(t: PathTable) -> list[tuple[str, BoolArray]]:
    b = t.bulk
    n_cells = len(b.goodput_gbps)
    if n_cells == 0:
        return []
    owner = np.repeat(np.arange(len(t.samples)), np.diff(b.offsets))
    with np.errstate(invalid="ignore", divide="ignore"):
        times = np.vstack([b.p50_us, b.p99_us, b.max_us])
        little_gbps = _LITTLE_SLACK * b.depth * b.chunk_bytes * 8 / (b.p50_us * 1e3)
        ok = np.fromiter((e is None for e in b.error), np.bool_, n_cells)
        cell_checks = [
            ("a bulk value that is not a finite number", ~np.isfinite(times).all(axis=0)),
            ("a bulk completion time of zero or less", (times <= 0).any(axis=0) & ok),
            ("bulk completion percentiles out of order", (np.diff(times, axis=0) < 0).any(axis=0)),
            ("a negative bulk read count or goodput", (b.reads < 0) | (b.goodput_gbps < 0)),
            (
                "a goodput the plan cannot carry (above depth x chunk / completion)",
                ok & ((b.goodput_gbps > little_gbps) | (b.goodput_gbps > MAX_GOODPUT_GBPS)),
            ),
        ]
    out = []
    for what, cells in cell_checks:
        rows = np.zeros(len(t.samples), dtype=np.bool_)
        rows[owner[cells]] = True
        out.append((what, rows))
    return out


def impossible_rows(table: PathTable) -> dict[int, str]:
    """Row -> what is impossible about it (the first problem found), for the rows that lie."""
    found: dict[int, str] = {}
    problems = [*_rtt_problems(table), *_bulk_problems(table)]
    if not np.logical_or.reduce([mask for _, mask in problems]).any():
        return found  # the usual case, in one test (the coordinator checks every probe)
    for what, mask in problems:
        for i in np.flatnonzero(mask).tolist():
            found.setdefault(i, what)
    return found


def _impossible(what: str) -> tuple[str, ...]:
    return (f"{IMPOSSIBLE}: {what}",)


def mark_impossible(table: PathTable) -> PathTable:
    """The table with every lying row made unsafe, its reason saying why; else unchanged."""
    found = impossible_rows(table)
    if not found:
        return table
    verdict = table.verdict.copy()
    reasons = list(table.reasons)
    for i, what in found.items():
        verdict[i] = Verdict.UNSAFE.rank
        reasons[i] = _impossible(what)
    return dataclasses.replace(table, verdict=verdict, reasons=tuple(reasons))


def check_path(path: PathResult) -> PathResult:
    """One measured path, as the coordinator builds it from an agent's result."""
    found = impossible_rows(PathTable.from_paths([path]))
    if not found:
        return path
    return dataclasses.replace(path, verdict=Verdict.UNSAFE, reasons=_impossible(found[0]))


def rejudge(table: PathTable, policy: Policy) -> PathTable:
    """Verdicts judged again from the values (the policy's metric, sample count, errors):
    each row keeps the worse of its stored verdict and that judgement, so an edited
    ``offload-safe`` with a 1 s p99 is unsafe again. Rows that change say why."""
    values = table.rtt[policy.metric.value]
    failed = ~table.has_rtt | np.fromiter((e is not None for e in table.error), np.bool_)
    judged = np.where(failed, Verdict.UNSAFE.rank, classes(policy, values, table.samples))
    worse = np.flatnonzero(judged > table.verdict)
    if not len(worse):
        return table
    verdict = np.maximum(table.verdict, judged)
    reasons = list(table.reasons)
    m = policy.metric.value
    for i in worse.tolist():
        stored, now = VERDICTS[table.verdict[i]].value, VERDICTS[verdict[i]].value
        value = values[i]
        said = "it failed" if failed[i] else f"{m} RTT {format_us(float(value))} us"
        reasons[i] = (f"stored as {stored}, but {said}: {now} by the policy", *reasons[i])
    return dataclasses.replace(table, verdict=verdict, reasons=tuple(reasons))
