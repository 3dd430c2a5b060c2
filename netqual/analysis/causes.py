"""Why a suspect's paths are bad: a cause is attached only when more than half of the
suspect's bad paths show it (docs/evidence.md).

Per bad path, each of these it shows:

* ``loss``, ``congestion``, ``routing``: what its counters say
  (``counter_evidence.cause``);
* ``mtu``: an MTU outlier of the configuration check (``fleet``) on an interface the path
  used: its node's main interface for a path between nodes, the NIC for a path between
  NICs;
* ``delay``: its p50 exceeds the run's repeatability times its tier's level (the lower
  median of the tier's p50s): the whole distribution moved, not only its tail;
* ``bandwidth``: its best bulk goodput is below half its tier's level (the goodput
  floor, ``analysis/repeatability``): far below its peers'.

A suspect's cause is one that more than half of its bad paths show, the most specific
where several do (loss, mtu, congestion, routing, bandwidth, delay), with how many show it
and of how many. One of seven bad paths touching a lossy neighbour does not make a
delayed node lossy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from netqual.analysis import counter_evidence
from netqual.analysis.policy import sample_limited
from netqual.analysis.stats import lower_median
from netqual.model.fleet import FleetOutlier, compared_key
from netqual.model.stats import Metric
from netqual.model.suspects import (
    Cause,
    CauseKind,
    LinkEvidence,
    NicEvidence,
    NodeEvidence,
    Repeatability,
    Suspect,
    SuspectKind,
    with_cause,
)
from netqual.table.paths import PathTable
from netqual.table.run import Results

MAJORITY = 0.5
GOODPUT_FLOOR = 2.0  # repeatability.GOODPUT_FLOOR
ORDER = (
    CauseKind.LOSS, CauseKind.MTU, CauseKind.CONGESTION, CauseKind.ROUTING,
    CauseKind.BANDWIDTH, CauseKind.DELAY,
)  # fmt: skip

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Shown:
    """One cause one path shows, in words."""

    kind: CauseKind
    text: str


def best_goodput(table: PathTable) -> FloatArray:
    """Per path, the best goodput over its bulk cells (NaN without any)."""
    b = table.bulk
    n = len(table)
    counts = np.diff(b.offsets[: n + 1])
    good = np.where(np.isfinite(b.goodput_gbps), b.goodput_gbps, -np.inf)
    out = np.full(n, np.nan)
    has = counts > 0
    if has.any():
        best = np.maximum.reduceat(good, b.offsets[:n][has])
        out[has] = np.where(np.isfinite(best), best, np.nan)
    return out


def _mtu_outliers(results: Results) -> dict[str, FleetOutlier]:
    """Path end ("NODE" for its main interface, "NODE/NIC") -> an MTU outlier there."""
    out: dict[str, FleetOutlier] = {}
    for o in results.fleet.outliers if results.fleet is not None else ():
        key = compared_key(o.key)
        if key.field != "mtu":
            continue
        if key.nic_scope and o.nic is not None:
            out.setdefault(f"{o.node}/{o.nic}", o)
        else:  # every interface of the node, or its main one: what its node paths use
            out.setdefault(o.node, o)
    return out


def path_shows(
    results: Results, rows: Iterable[int], repeat: Repeatability
) -> dict[int, list[Shown]]:
    """Per row, the causes that path shows (module docstring)."""
    table = results.paths
    rows = [int(i) for i in rows]
    if not rows:
        return {}
    threshold = repeat.ratio
    p50 = table.values(Metric.P50)
    tier_p50 = {t: lower_median(p50[table.tier == t]) for t in np.unique(table.tier[rows]).tolist()}
    goodput = best_goodput(table) if len(table.bulk.goodput_gbps) else None
    tier_gbps = (
        {t: lower_median(goodput[table.tier == t]) for t in tier_p50} if goodput is not None else {}
    )
    mtu = _mtu_outliers(results)
    out: dict[int, list[Shown]] = {}
    for i in rows:
        src, dst = table.names[table.src[i]], table.names[table.dst[i]]
        shown: list[Shown] = []
        d = table.details[i]
        if d is not None and (c := counter_evidence.cause(d, src, dst)) is not None:
            shown.append(Shown(c.kind, c.text))
        for end in (src, dst):
            if (o := mtu.get(end)) is not None:
                shown.append(Shown(CauseKind.MTU, o.text))
                break
        t = int(table.tier[i])
        ref = tier_p50.get(t, float("nan"))
        if np.isfinite(p50[i]) and np.isfinite(ref) and ref > 0 and p50[i] > threshold * ref:
            shown.append(
                Shown(CauseKind.DELAY, f"p50 {p50[i]:,.1f} us vs {ref:,.1f} us on its tier")
            )
        if goodput is not None:
            g, ref_g = goodput[i], tier_gbps.get(t, float("nan"))
            if np.isfinite(g) and np.isfinite(ref_g) and g * GOODPUT_FLOOR < ref_g:
                shown.append(
                    Shown(
                        CauseKind.BANDWIDTH, f"{g:,.2f} Gbit/s vs {ref_g:,.2f} Gbit/s on its tier"
                    )
                )
        out[i] = shown
    return out


def majority(shown: Sequence[list[Shown]]) -> Cause | None:
    """The cause more than half of these bad paths show, or None."""
    of = len(shown)
    counts: dict[CauseKind, list[str]] = {}
    for found in shown:
        for kind in {s.kind for s in found}:
            counts.setdefault(kind, []).append(next(s.text for s in found if s.kind is kind))
    held = [k for k in ORDER if len(counts.get(k, ())) > MAJORITY * of]
    if not held:
        return None
    best = held[0]  # the most specific of those most of them show
    return Cause(best, len(counts[best]), counts[best][0], of)


def _bad_rows_by_code(ends: IntArray, bad: npt.NDArray[np.bool_]) -> dict[int, IntArray]:
    """An end's code -> the bad rows with that end, ascending."""
    rows = np.flatnonzero(bad)
    if not len(rows):
        return {}
    at = ends[rows]
    order = np.argsort(at, kind="stable")
    keys, starts = np.unique(at[order], return_index=True)
    return dict(zip(keys.tolist(), np.split(rows[order], starts[1:]), strict=True))


def attach(
    results: Results, found: tuple[Suspect, ...], repeat: Repeatability
) -> tuple[Suspect, ...]:
    """Node, NIC and link suspects with the cause most of their bad paths show."""
    table = results.paths
    if not found or not len(table):
        return found
    bad = (table.verdict > 0) & ~sample_limited(results.run.policy, table)
    # the bad rows grouped by their ends' codes, once: a suspect's rows compared as an
    # array of names per suspect took ~35 s of CPU for 1,024 nodes' ~2,000 suspects
    codes: dict[str, list[int]] = {}
    for i, n in enumerate(table.names):
        codes.setdefault(n, []).append(i)
    by_src, by_dst = _bad_rows_by_code(table.src, bad), _bad_rows_by_code(table.dst, bad)
    none = np.zeros(0, dtype=np.int64)

    def rows_of(groups: dict[int, IntArray], ends: Iterable[str]) -> list[IntArray]:
        return [groups.get(c, none) for e in ends for c in codes.get(e, ())]

    wanted: dict[int, list[int]] = {}
    for k, s in enumerate(found):
        if s.kind is SuspectKind.LINK:
            a, b = s.about.nodes
            rows = np.unique(np.concatenate([none, *rows_of(by_src, (a,))]))
            rows = rows[np.isin(table.dst[rows], codes.get(b, []))]
        elif s.kind in (SuspectKind.NODE, SuspectKind.NIC):
            name = s.subject
            ends = {name}
            ev = s.evidence
            if isinstance(ev, NodeEvidence) and ev.nics:
                ends = {f"{name}/{nic}" for nic in ev.nics}
            parts = [none, *rows_of(by_src, ends), *rows_of(by_dst, ends)]
            rows = np.unique(np.concatenate(parts))
        else:
            continue
        wanted[k] = [int(i) for i in rows.tolist()]
    shows = path_shows(results, sorted({i for mine in wanted.values() for i in mine}), repeat)
    out = list(found)
    for k, mine in wanted.items():
        cause = majority([shows[i] for i in mine]) if mine else None
        ev = out[k].evidence
        if cause is not None and isinstance(ev, NodeEvidence | NicEvidence | LinkEvidence):
            out[k] = with_cause(out[k], cause)
    return tuple(out)
