"""Workload evidence over a run (docs/workload.md): every path's class is its workload
verdict (rebuilt per row from the workload columns); what it blocks is the workload itself
when offload cannot pay whatever the round trip, else where the paths that do not pay sit.
Where the RTT lines and the workload disagree on a path, a caution says why."""

from __future__ import annotations

import numpy as np

from netqual.analysis.evidence import Endpoints, Found, cannot, group_by_node
from netqual.base.units import format_bytes, format_duration_us, format_us, plural
from netqual.model.decision import Blocking, Evidence, EvidenceKind, Subject
from netqual.model.decision import SubjectKind as SK
from netqual.model.verdict import Verdict
from netqual.model.workload import BaselineKind
from netqual.table.paths import VERDICTS
from netqual.table.run import Results

KIND = EvidenceKind.WORKLOAD


def workload(results: Results, ends: Endpoints) -> Found:
    w, table = results.workload, results.paths
    wl = table.workload
    if w is None or wl is None:
        return cannot(
            KIND,
            "no workload given: the RTT lines decide (give --workload to judge a model's "
            "chunk fetch at its concurrency against its baseline)",
        )
    name = f"{w.model.name} (TP{w.tp})"
    subject = Subject(SK.WORKLOAD, name)
    judged = wl.verdict >= 0
    n = int(judged.sum())
    bad = judged & (wl.verdict > Verdict.SAFE.rank)
    safe = n - int(bad.sum())
    alt = "recompute" if w.budget[0] is BaselineKind.RECOMPUTE else "local NVMe read"
    chunk = f"{format_bytes(w.node_chunk_bytes)} chunk per node ({w.ranks_per_node} ranks)"
    worst = VERDICTS[int(wl.verdict[judged].max())] if n else None
    summary = Evidence(
        KIND,
        worst,
        subject,
        f"{safe:,} of {n:,} paths fetch a {chunk} at least {w.safe_speedup:g}x faster than "
        f"the {format_duration_us(w.budget_us)} {alt}",
    )
    blocking: list[Blocking] = []
    # no round trip makes offload pay: the bytes alone take longer than the baseline
    never = bad & np.isnan(wl.break_even_rtt_us) & table.has_rtt & ~np.isnan(wl.fetch_p99_us)
    if n and int(never.sum()) * 2 > n:
        fetch = float(np.median(wl.fetch_p99_us[never]))
        blocking.append(
            Blocking(
                subject,
                KIND,
                Verdict.UNSAFE,
                f"offload can never pay on {int(never.sum()):,} of {n:,} paths: a {chunk} "
                f"takes {format_duration_us(fetch)} (median p99) at the measured goodput, the "
                f"{alt} {format_duration_us(w.budget_us)}, before any round trip is counted",
                f"keep {w.model.name}'s KV on local NVMe or recompute it; or check the "
                "workload's chunk_tokens and baseline if they are not what the engine runs",
                int(bad.sum()),
            )
        )
    else:
        for where, rows in group_by_node(table, ends, bad, judged):
            first = int(rows[0])
            said = wl.reasons[first][0] if wl.reasons[first] else ""
            blocking.append(
                Blocking(
                    where,
                    KIND,
                    VERDICTS[int(wl.verdict[rows].max())],
                    said
                    if len(rows) == 1
                    else f"{len(rows)} of its paths do not pay for {name} (e.g. {said})",
                    f"fix what slows {where}'s fetch (its RTT and bandwidth evidence), or keep "
                    f"{w.model.name}'s KV for it on local NVMe",
                    len(rows),
                )
            )
    return Found(KIND, summary, (), tuple(blocking), _disagree(results))


def _disagree(results: Results) -> tuple[str, ...]:
    """Why the RTT lines and the workload verdict differ, where they do on some path."""
    table, w = results.paths, results.workload
    wl = table.workload
    if w is None or wl is None:
        return ()
    judged = wl.verdict >= 0
    policy = results.run.policy
    lines = f"{format_us(policy.safe_max_us)} / {format_us(policy.unsafe_above_us)} us"
    out = []
    stricter = judged & (table.verdict > wl.verdict)
    looser = judged & (table.verdict < wl.verdict)
    even = wl.break_even_rtt_us[judged & ~np.isnan(wl.break_even_rtt_us)]
    own = ""
    if len(even):
        median = format_us(float(np.median(even)))
        own = f"; on these paths the workload would still pay up to a median {median} us"
    if stricter.any():
        out.append(
            f"On {plural(int(stricter.sum()), 'path')} the RTT lines ({policy.metric.value} "
            f"{lines}) judge worse than the workload {w.model.name}{own}: the verdict is the "
            "worse of the two. The lines come from one field report's model class; to judge "
            f"by this workload's own, set the policy's lines from `netqual workload` "
            "(docs/workload.md)."
        )
    if looser.any():
        out.append(
            f"On {plural(int(looser.sum()), 'path')} the workload {w.model.name} judges worse "
            f"than the RTT lines ({lines}): its chunk fetch (bandwidth, the round trips per "
            "chunk) does not beat its baseline by enough although the round trip is short; the "
            "verdict is the worse of the two."
        )
    return tuple(out)
