"""Fetch engine evidence (``run --engine``, docs/engines.md): the data mover the connector
uses, measured on the path. A cell that fell back from what was asked (TCP where RDMA was
expected, a memory copy, another NIC, a split over NICs) or that runs slower than
``[policy] max_engine_vs_probe`` times netqual's own bulk cell holds its path at marginal
and blocks "go": the deployment is not what the fabric promises until the engine's
configuration is fixed. A cell that failed cannot judge (its error says why)."""

from __future__ import annotations

import numpy as np

from netqual.analysis.engine import EngineFinding, path_findings
from netqual.analysis.evidence import Endpoints, Found, Hit, cannot, group_by_node, worst
from netqual.base.units import plural
from netqual.model.decision import (
    RUN_SUBJECT,
    Blocking,
    Evidence,
    EvidenceKind,
    Subject,
    SubjectKind,
)
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


def engine(results: Results, ends: Endpoints) -> Found:
    table = results.paths
    rows = [i for i, cells in enumerate(table.engine) if cells]
    if not rows:
        return cannot(KIND, "no fetch engine ran (run --engine mooncake|nixl, docs/engines.md)")
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
        return Found(
            KIND,
            Evidence(
                KIND,
                Verdict.SAFE,
                RUN_SUBJECT,
                f"{engine_name} on {plural(len(rows), 'path')}: every cell on the transport "
                f"and NIC asked, within {policy.max_engine_vs_probe:g}x netqual's own probe",
            ),
        )
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
    summary = Evidence(
        KIND,
        worst(hits),
        RUN_SUBJECT,
        f"{engine_name}: {plural(len(hits), 'path')} of {len(rows):,} fall short (a fallback, "
        f"slower than {policy.max_engine_vs_probe:g}x the probe, or failed)",
    )
    return Found(KIND, summary, tuple(hits), tuple(blocking))
