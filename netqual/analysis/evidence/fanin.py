"""Fan-in evidence: what each swept storage node holds against the readers that would share
it (docs/fanin.md). The readers it must hold are the run's compute nodes (every node not a
storage node when no role says so). A sweep that stopped below them, or whose p99 rests on
too few chunks, cannot judge: its storage node's paths are never offload-safe on it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netqual.analysis.evidence import Endpoints, Found, Hit, cannot, touching, worst
from netqual.analysis.fanin import no_projection, pays_up_to, project, storage_rtt_us
from netqual.analysis.fanin_engine import as_sweep
from netqual.base.units import format_duration_us, plural
from netqual.model.decision import (
    RUN_SUBJECT,
    Blocking,
    Evidence,
    EvidenceKind,
    FaninHold,
    Subject,
)
from netqual.model.decision import SubjectKind as SK
from netqual.model.fanin import Call, FaninResult
from netqual.model.node import Role
from netqual.model.verdict import Verdict
from netqual.model.workload import Workload
from netqual.table.run import Results

KIND = EvidenceKind.FANIN


def readers_of(results: Results, storage: str) -> int:
    """Compute nodes that would read ``storage`` at once."""
    nodes = {n.agent or n.name: n.role for n in results.nodes}
    compute = [n for n, role in nodes.items() if role is Role.COMPUTE]
    if not compute:
        compute = [n for n, role in nodes.items() if role is not Role.STORAGE and n != storage]
    return len(compute)


def judge_sweep(
    r: FaninResult, readers: int, w: Workload | None, rtt: tuple[float, float] | None = None
) -> tuple[Verdict | None, str, str]:
    """(class, what was seen, what to do) of one storage node's sweep."""
    measured = [lv for lv in r.levels if lv.chunk is not None]
    top = max((lv.readers for lv in measured), default=0)
    # preliminary: a level the knee rule could not call (docs/fanin.md); a file written
    # before the rule made calls: a level whose p99 rests on too few chunks
    few = list(r.undecided) or [
        lv.readers
        for lv in measured
        if lv.call is None and lv.chunk is not None and "p99" in lv.chunk.untrusted
    ]
    rerun = "sweep again with more chunks a level (--fanin-chunks)"
    if len(measured) < 2:
        return None, r.verdict, f"sweep at least two levels (run --fanin 1,{max(2, readers)})"
    if few:
        levels = ", ".join(map(str, few))
        return None, f"preliminary at {levels} readers, not judged: {r.verdict}", rerun
    pays_note = ""
    if w is not None and no_projection(r, w) is None:
        proj = project(r, w, rtt)
        pays = pays_up_to(proj)
        need = min(readers, top)
        name = w.model.name
        if pays is None:  # at the first level already: no spread over storage helps
            first = proj[0]
            return (
                Verdict.UNSAFE,
                f"offload of {name} does not pay even at {plural(first.readers, 'reader')} "
                f"of {r.storage}: the projected KV fetch per request, every chunk at p99, takes "
                f"{format_duration_us(first.fetch_p99_us)} against "
                f"{format_duration_us(first.baseline_us)} without offload, whatever the "
                f"fan-in (fan-in alone: {r.verdict})",
                f"keep {name}'s KV off {r.storage} (local NVMe or recompute), or give one "
                f"reader a faster fetch from it; more storage nodes do not help",
            )
        if pays < need:
            return (
                Verdict.UNSAFE,
                f"offload of {name} pays only up to {plural(pays, 'reader')} of "
                f"{r.storage}, {readers} compute nodes would read it (fan-in alone: "
                f"{r.verdict})",
                f"add storage bandwidth or storage nodes so each holds at most "
                f"{plural(pays, 'reader')}, then sweep again",
            )
        pays_note = (
            f"; offload of {name} still pays at {plural(need, 'reader')} (the projected KV "
            "fetch per request, every chunk at p99, stays under the baseline)"
        )
    if r.knee is not None and (r.safe_up_to or 0) < readers:
        return (
            Verdict.MARGINAL,
            f"{r.verdict}; {readers} compute nodes would read it{pays_note}",
            _knee_action(r),
        )
    if top < readers:
        return (
            None,
            f"measured up to {plural(top, 'reader')} of the {readers} that would share it",
            f"sweep up to {readers} readers (run --fanin ...,{readers})",
        )
    return Verdict.SAFE, r.verdict, ""


def holds(sweeps: Sequence[FaninResult]) -> tuple[FaninHold, ...]:
    """Per storage node, what each of its sweeps holds: the probe's, then (with --engine)
    the engine's levels judged as a sweep of their own."""
    out = []
    for r in sweeps:
        out.append(_hold(r, None))
        if r.engine is not None and (through := as_sweep(r)) is not None:
            out.append(_hold(through, r.engine.engine.value))
    return tuple(out)


def _hold(r: FaninResult, engine: str | None) -> FaninHold:
    """``preliminary``: the first level past "safe up to" that the rule called, when it
    could not call it."""
    after = [lv for lv in r.levels if lv.call is not None and lv.readers > (r.safe_up_to or 0)]
    prelim = after[0].readers if after and after[0].call is Call.UNDECIDED else None
    return FaninHold(r.storage, engine, r.safe_up_to, prelim, r.verdict)


def _knee_action(r: FaninResult) -> str:
    """What to do about a knee below the readers, as its verdict placed it: the storage
    node's port, the shared rack uplinks, or (no sibling to tell them apart) either."""
    at = next(lv for lv in r.levels if lv.readers == r.knee)
    port = (
        f"give {r.storage} more bandwidth or fewer readers (at most "
        f"{plural(r.safe_up_to or 1, 'reader')})"
    )
    uplinks = ", ".join(u.split(" (")[0] for u in at.shared_uplinks)
    if not at.shared_uplinks or r.uplinks_cleared_by is not None:
        return f"{port}, then sweep again"
    if r.uplinks_implicated_by:
        return (
            f"relieve the shared rack uplinks ({uplinks}) or spread the readers over more "
            "racks, then sweep again"
        )
    return (
        f"{port}, or relieve the shared rack uplinks ({uplinks}); sweep a second storage "
        "node with the same readers to tell which"
    )


def fanin(results: Results, ends: Endpoints) -> Found:
    if not results.fanin:
        return cannot(KIND, "no fan-in sweep (run --fanin 1,4,8,16)")
    table = results.paths
    hits: list[Hit] = []
    blocking: list[Blocking] = []
    for r in results.fanin:
        readers = readers_of(results, r.storage)
        rtt = storage_rtt_us(results, r.storage)
        verdict, detail, action = judge_sweep(r, readers, results.workload, rtt)
        if verdict is Verdict.SAFE:
            continue
        subject = Subject(SK.STORAGE, r.storage)
        rows = np.flatnonzero(touching(table, ends.codes_of(r.storage)))
        hits.append(Hit(rows, Evidence(KIND, verdict, subject, detail)))
        blocking.append(Blocking(subject, KIND, verdict, detail, action, len(rows)))
    n = len(results.fanin)
    if not hits:
        return Found(
            KIND,
            Evidence(
                KIND, Verdict.SAFE, RUN_SUBJECT, f"{plural(n, 'storage node')} hold their readers"
            ),
        )
    summary = Evidence(
        KIND,
        worst(hits),
        RUN_SUBJECT,
        f"{len(hits)} of {plural(n, 'storage node')} swept do not hold their readers",
    )
    return Found(KIND, summary, tuple(hits), tuple(blocking))
