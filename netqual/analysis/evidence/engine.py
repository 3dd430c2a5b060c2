"""Fetch engine evidence (``run --engine``, docs/engines.md): the data mover the connector
uses, measured on the path and, with ``--fanin``, under fan-in to each storage node.

Per path: a cell that fell back from what was asked (TCP where RDMA was expected, a memory
copy, another NIC, a split over NICs) or that runs slower than ``[policy]
max_engine_vs_probe`` times netqual's own bulk cell holds its path at marginal and blocks
"go": the deployment is not what the fabric promises until the engine's configuration is
fixed. A cell that failed cannot judge (its error says why).

Per storage node swept through the engine (its paths, subject the storage node): the
engine's levels judged as a sweep of their own against the compute nodes that would read
it (``fanin.judge_sweep``: "safe up to" below them is marginal, a level the knee rule could
not call is preliminary and cannot judge, with a workload offload that stops paying is
unsafe); a level not measured (configuration) under ``--engine-require`` cannot judge,
naming the fallback; an engine level slower than ``max_engine_vs_probe`` times the probe's
level at as many readers is marginal, a configuration finding naming the engine and the
ratio.
"""

from __future__ import annotations

import numpy as np

from netqual.analysis import fanin_engine as fe
from netqual.analysis.engine import EngineFinding, path_findings
from netqual.analysis.evidence import (
    Endpoints,
    Found,
    Hit,
    cannot,
    group_by_node,
    touching,
    worst,
)
from netqual.analysis.evidence.fanin import judge_sweep, readers_of
from netqual.analysis.fanin import storage_rtt_us
from netqual.base.units import format_duration_us, plural
from netqual.model.decision import (
    RUN_SUBJECT,
    Blocking,
    Evidence,
    EvidenceKind,
    Subject,
    SubjectKind,
)
from netqual.model.fanin import FaninResult
from netqual.model.path import path_label
from netqual.model.verdict import Verdict
from netqual.table.run import Results

KIND = EvidenceKind.ENGINE
_ACTIONS = {
    "fallback": "make the engine use the path's transport and NIC (Mooncake: its device "
    "filter, an RDMA device it can open; NIXL: UCX_TLS and UCX_NET_DEVICES), then re-run "
    "with --engine (--engine-require makes a fallback a configuration failure)",
    "slow": "the connector's data mover, not the fabric, limits this path: fix its "
    "configuration (the finding names the likely cause) and re-run with --engine, or plan "
    "for the engine's speed",
    "failed": "read the engine's error in the cell, fix it and re-run with --engine",
}


def _judged(found: tuple[EngineFinding, ...]) -> tuple[Verdict | None, EngineFinding] | None:
    """A path's class from its findings: marginal for a fallback or a slow cell, no class
    (cannot judge) when its cells only failed; None when nothing was found."""
    for kind in ("fallback", "slow"):
        for f in found:
            if f.kind == kind:
                return Verdict.MARGINAL, f
    return (None, found[0]) if found else None


def _paths(results: Results, ends: Endpoints) -> tuple[list[Hit], list[Blocking], int, str]:
    """The paths' engine cells: (hits, blocking, paths with cells, the engine's name)."""
    table = results.paths
    rows = [i for i, cells in enumerate(table.engine) if cells]
    if not rows:
        return [], [], 0, ""
    policy = results.run.policy
    names = table.names
    hits: list[Hit] = []
    why: dict[int, EngineFinding] = {}
    for i in rows:
        judged = _judged(path_findings(table.row(i), policy))
        if judged is None:
            continue
        verdict, finding = judged
        label = path_label(names[table.src[i]], names[table.dst[i]])
        ev = Evidence(KIND, verdict, Subject(SubjectKind.PATH, label), finding.text)
        hits.append(Hit(np.array([i], dtype=np.int64), ev))
        why[i] = finding
    first = table.engine[rows[0]][0]
    engine_name = f"{first.name.value} ({first.version or 'version unknown'})"
    if not hits:
        return [], [], len(rows), engine_name
    bad = np.zeros(len(table), dtype=np.bool_)
    judged_rows = np.zeros(len(table), dtype=np.bool_)
    judged_rows[rows] = True
    bad[list(why)] = True
    by_row = {int(h.rows[0]): h.evidence for h in hits}
    blocking = []
    for subject, group in group_by_node(table, ends, bad, judged_rows):
        lead = why[int(group[0])]
        detail = (
            by_row[int(group[0])].detail
            if len(group) == 1
            else f"{len(group)} of its paths: e.g. {lead.subject}: {lead.text}"
        )
        blocking.append(
            Blocking(
                subject,
                KIND,
                worst(Hit(group, by_row[int(r)]) for r in group),
                detail,
                _ACTIONS[lead.kind],
                len(group),
            )
        )
    return hits, blocking, len(rows), engine_name


def _storage_findings(
    results: Results, r: FaninResult, readers: int
) -> list[tuple[Verdict | None, str, str]]:
    """What one storage node's levels through the engine show: (class, detail, action)
    each, none when they hold its readers as the probe measured them."""
    e, through = r.engine, fe.as_sweep(r)
    assert e is not None and through is not None
    name = e.engine.value
    out: list[tuple[Verdict | None, str, str]] = []
    gone = [lv for lv in e.levels if lv.configuration is not None]
    if gone:
        at = ", ".join(str(lv.readers) for lv in gone)
        out.append(
            (
                None,
                f"through {name}, {fe.NOT_MEASURED} at {at} reader"
                f"{'s' if len(gone) > 1 else ''}: {gone[0].configuration}",
                _ACTIONS["fallback"],
            )
        )
    else:
        rtt = storage_rtt_us(results, r.storage)
        verdict, detail, action = judge_sweep(through, readers, results.workload, rtt)
        if verdict is not Verdict.SAFE:
            probe_holds = r.safe_up_to or 0
            if e.knee is not None and probe_holds > (e.safe_up_to or 0):
                action = (
                    f"{name}'s data mover, not the fabric, limits {r.storage} to "
                    f"{plural(e.safe_up_to or 0, 'reader')} (netqual's probe holds "
                    f"{probe_holds}): fix the engine's configuration and sweep again with "
                    f"--engine {name}, or plan for its readers"
                )
            out.append((verdict, f"through {name}: {detail}", action))
    limit = results.run.policy.max_engine_vs_probe
    if (slow := fe.slowest(e, limit)) is not None:
        lv, n = slow
        assert lv.vs_probe is not None and lv.level.chunk is not None
        probe = next(p for p in r.levels if p.readers == lv.readers)
        assert probe.chunk is not None
        more = f"; {n} of {len(e.levels)} levels past it" if n > 1 else ""
        out.append(
            (
                Verdict.MARGINAL,
                f"the connector's data mover ({name} read) is {lv.vs_probe:.1f}x slower than "
                f"the fabric at {plural(lv.readers, 'reader')} of {r.storage} (chunk p50 "
                f"{format_duration_us(lv.level.chunk.p50_us)} against netqual's probe's "
                f"{format_duration_us(probe.chunk.p50_us)}; limit {limit:g}x{more}): "
                f"configuration; likely cause: {fe.level_cause(lv, e.engine)}",
                _ACTIONS["slow"],
            )
        )
    return out


def _storage(results: Results, ends: Endpoints) -> tuple[list[Hit], list[Blocking], int]:
    """Each storage node swept through the engine: (hits, blocking, nodes swept)."""
    table = results.paths
    hits: list[Hit] = []
    blocking: list[Blocking] = []
    swept = [r for r in results.fanin if r.engine is not None]
    for r in swept:
        subject = Subject(SubjectKind.STORAGE, r.storage)
        rows = np.flatnonzero(touching(table, ends.codes_of(r.storage)))
        for verdict, detail, action in _storage_findings(
            results, r, readers_of(results, r.storage)
        ):
            hits.append(Hit(rows, Evidence(KIND, verdict, subject, detail)))
            blocking.append(Blocking(subject, KIND, verdict, detail, action, len(rows)))
    return hits, blocking, len(swept)


def engine(results: Results, ends: Endpoints) -> Found:
    path_hits, path_blocking, n_paths, engine_name = _paths(results, ends)
    st_hits, st_blocking, n_swept = _storage(results, ends)
    if not n_paths and not n_swept:
        return cannot(KIND, "no fetch engine ran (run --engine mooncake|nixl, docs/engines.md)")
    if not engine_name:
        e = next(r.engine for r in results.fanin if r.engine is not None)
        engine_name = f"{e.engine.value} ({e.version or 'version unknown'})"
    limit = results.run.policy.max_engine_vs_probe
    parts = []
    if n_paths:
        parts.append(
            f"{plural(len(path_hits), 'path')} of {n_paths:,} fall short (a fallback, slower "
            f"than {limit:g}x the probe, or failed)"
            if path_hits
            else f"on {plural(n_paths, 'path')} every cell on the transport and NIC asked, "
            f"within {limit:g}x netqual's own probe"
        )
    if n_swept:
        short = len({h.evidence.subject for h in st_hits})
        parts.append(
            f"under fan-in {short} of {plural(n_swept, 'storage node')} swept through it "
            "fall short (a level not measured, not holding their readers, or slower than "
            f"{limit:g}x the probe's level)"
            if short
            else f"under fan-in {plural(n_swept, 'storage node')} swept through it hold their "
            f"readers, every level within {limit:g}x the probe's"
        )
    hits = path_hits + st_hits
    verdict = worst(hits) if hits else Verdict.SAFE
    summary = Evidence(KIND, verdict, RUN_SUBJECT, f"{engine_name}: {'; '.join(parts)}")
    return Found(KIND, summary, tuple(hits), tuple(path_blocking + st_blocking))
