"""Bandwidth evidence: a NIC (or node) every path of which reads under half of what its
twins carry, and node pairs whose added rails add nothing (docs/policy.md, "Bandwidth")."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence

import numpy as np

from netqual.analysis.evidence import Endpoints, Found, Hit, as_map, cannot, touching, worst
from netqual.base.names import is_loopback
from netqual.base.units import format_size, plural
from netqual.model.decision import (
    RUN_SUBJECT,
    Blocking,
    Evidence,
    EvidenceKind,
    Subject,
    SubjectKind,
)
from netqual.model.node import Role
from netqual.model.verdict import Verdict
from netqual.table.paths import PathTable
from netqual.table.run import Results

TWIN_SHARE = 0.5  # every path of a NIC below this share of its twins' median
MIN_TWINS = 2  # other endpoints of the same rail (or role) to compare with
MIN_PATHS = 2  # paths of the NIC itself
BIG_GROUP = 64  # endpoints of one rail (or role) beyond which one median stands for all


def _good(table: PathTable) -> np.ndarray:
    """Cells that read without an error and moved something."""
    b = table.bulk
    ok: np.ndarray = np.fromiter(map(operator.not_, b.error), np.bool_, len(b.error))
    return ok & (b.goodput_gbps > 0)


def _cell(table: PathTable, good: np.ndarray) -> tuple[int, int] | None:
    """The (chunk, depth) cell most paths have, the most bytes in flight on a tie."""
    b = table.bulk
    if not good.any():
        return None
    # one int64 per cell: depths stay far below 2**20 (the agents' limit is 64)
    keys, counts = np.unique(b.chunk_bytes[good] * (1 << 20) + b.depth[good], return_counts=True)
    chunk, depth = keys >> 20, keys & ((1 << 20) - 1)
    best = max(range(len(keys)), key=lambda k: (counts[k], chunk[k] * depth[k], chunk[k]))
    return int(chunk[best]), int(depth[best])


def _goodput(table: PathTable, good: np.ndarray, chunk: int, depth: int) -> np.ndarray:
    """Per path, its goodput at the cell (NaN without it)."""
    b = table.bulk
    out = np.full(len(table), np.nan)
    owner = np.repeat(np.arange(len(table)), np.diff(b.offsets))
    ok = good & (b.chunk_bytes == chunk) & (b.depth == depth)
    out[owner[ok]] = b.goodput_gbps[ok]
    return out


def _carried_nic(table: PathTable, rows: Sequence[int], code: int) -> str | None:
    """The interface that carried most of an endpoint's paths' bytes on its side."""
    seen: Counter[str] = Counter()
    for i in rows:
        carried = as_map(as_map(table.details[i] or {}).get("carried_by"))
        side = "src" if table.src[i] == code else "dst"
        if isinstance(nic := carried.get(side), str):
            seen[nic] += 1
    if not seen:
        return None
    nic, n = seen.most_common(1)[0]
    return nic if n > len(rows) / 2 else None


def _per_endpoint(table: PathTable, g: np.ndarray) -> dict[int, np.ndarray]:
    """Per name code with at least MIN_PATHS values, the goodputs of its paths (a path
    counts at both ends): one sort, no loop over paths."""
    ok = ~np.isnan(g)
    codes = np.concatenate([table.src[ok], table.dst[ok]])
    values = np.concatenate([g[ok], g[ok]])
    order = np.argsort(codes, kind="stable")
    codes, values = codes[order], values[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else codes
    out: dict[int, np.ndarray] = {}
    for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(codes)], strict=True):
        if b - a >= MIN_PATHS:
            out[int(codes[a])] = values[a:b]
    return out


def bandwidth(results: Results, ends: Endpoints) -> Found:
    kind = EvidenceKind.BANDWIDTH
    table = results.paths
    good = _good(table)
    cell = _cell(table, good)
    if cell is None:
        return cannot(kind, "no bulk cells (--no-bulk): NICs not compared")
    if results.nodes and all(is_loopback(n.address) for n in results.nodes):
        return cannot(kind, "every agent on this host (loopback): no NIC to compare")
    g = _goodput(table, good, *cell)
    stats = _per_endpoint(table, g)
    groups: dict[tuple[int, Role], list[int]] = {}
    for code in stats:
        groups.setdefault((ends.rail[code], ends.role[code]), []).append(code)
    hits: list[Hit] = []
    blocking: list[Blocking] = []
    at = f"{format_size(cell[0])} x depth {cell[1]}"
    for (rail, _), codes in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
        medians = {c: float(np.median(stats[c])) for c in codes}
        # in a large group one endpoint moves the median by nothing: one median for all
        whole = float(np.median(list(medians.values()))) if len(codes) > BIG_GROUP else None
        for c in codes:
            if whole is not None:
                twins_n, twin = len(codes) - 1, whole
            else:
                twins = [medians[t] for t in codes if ends.node[t] != ends.node[c]]
                twins_n, twin = len(twins), float(np.median(twins)) if twins else 0.0
            if twins_n < MIN_TWINS:
                continue
            top = float(stats[c].max())
            if not top < TWIN_SHARE * twin:
                continue
            rows = np.flatnonzero(touching(table, [c]))
            nic = ends.nic[c] or _carried_nic(table, rows.tolist(), c)
            name = ends.node[c] if nic is None else f"{ends.node[c]}/{nic}"
            subject = Subject(SubjectKind.NODE if nic is None else SubjectKind.NIC, name)
            twins_of = f"rail {rail}" if rail >= 0 else "its role"
            detail = (
                f"every one of its {len(stats[c])} paths reads at most {top:.2f} Gbit/s at "
                f"{at}, under {TWIN_SHARE:.0%} of the {twin:.2f} Gbit/s median of "
                f"{twins_n} twins ({twins_of}): a KV chunk takes over twice as long"
            )
            ev = Evidence(kind, Verdict.UNSAFE, subject, detail)
            hits.append(Hit(rows, ev))
            blocking.append(
                Blocking(
                    subject,
                    kind,
                    Verdict.UNSAFE,
                    detail,
                    f"check {name}'s negotiated link speed, cable, PCIe slot and firmware, and "
                    "any rate limit on its switch port, then re-test",
                    len(rows),
                )
            )
    for m in results.multirail:
        if not m.short or {m.src, m.dst} & {b.subject.name.split("/")[0] for b in blocking}:
            continue
        rows = np.flatnonzero(
            touching(table, ends.codes_of(m.src)) & touching(table, ends.codes_of(m.dst))
        )
        subject = Subject(SubjectKind.RAILS, f"{m.src} <-> {m.dst}")
        ev = Evidence(kind, Verdict.MARGINAL, subject, m.verdict)
        hits.append(Hit(rows, ev))
        blocking.append(
            Blocking(
                subject,
                kind,
                Verdict.MARGINAL,
                m.verdict,
                "find the slow rail's NIC: run --rails same with bulk cells compares each NIC "
                "with its twins",
                len(rows),
            )
        )
    judged = f"{len(stats)} endpoints compared at {at}"
    if not hits:
        return Found(
            kind,
            Evidence(
                kind,
                Verdict.SAFE,
                RUN_SUBJECT,
                f"{judged}: none under {TWIN_SHARE:.0%} of its twins",
            ),
        )
    summary = Evidence(
        kind,
        worst(hits),
        RUN_SUBJECT,
        f"{judged}: {plural(len(blocking), 'subject')} far below its twins",
    )
    return Found(kind, summary, tuple(hits), tuple(blocking))
