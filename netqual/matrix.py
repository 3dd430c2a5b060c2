"""The per-pair matrix, topology tiers and per-hop / per-rack aggregation."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from netqual.models import RTT_STATISTICS, Node, PathResult, Role, Tier, Verdict
from netqual.pathtable import PathTable


def tier_of(a: Node, b: Node) -> Tier:
    """Tier from inventory labels: same rack, same site (labels.site), or remote."""
    if a.address == b.address:
        return Tier.SAME_HOST
    site_a, site_b = a.labels.get("site"), b.labels.get("site")
    if site_a is not None and site_b is not None and site_a != site_b:
        return Tier.REMOTE
    if a.rack is None or b.rack is None:
        return Tier.UNKNOWN
    return Tier.SAME_RACK if a.rack == b.rack else Tier.CROSS_RACK


def order_nodes(nodes: Sequence[Node]) -> list[Node]:
    """The one node order of every matrix (terminal and report): site by site, rack by rack
    (unracked last), storage after compute inside a rack, then by name, so matrix blocks
    follow the topology."""
    return sorted(
        nodes,
        key=lambda n: (
            n.labels.get("site", ""),
            n.rack is None,
            n.rack or "",
            n.role is Role.STORAGE,
            n.name,
        ),
    )


def matrix_nodes(nodes: Sequence[Node], paths: PathTable) -> list[Node]:
    """The rows of every matrix, in order_nodes order; a path endpoint missing from the node
    list (a hand-edited file) still gets a row."""
    known = {n.name for n in nodes}
    used = np.unique(np.concatenate((paths.src, paths.dst))).tolist()
    extra = {paths.names[i] for i in used} - known
    return order_nodes([*nodes, *(Node(name=name, address="") for name in sorted(extra))])


@dataclass(frozen=True)
class Statistic:
    """A per-path value a matrix can show."""

    name: str
    label: str  # e.g. "p99 RTT (us)"
    value: Callable[[PathResult], float | None]


def _rtt(name: str) -> Callable[[PathResult], float | None]:
    def get(p: PathResult) -> float | None:
        return None if p.rtt is None else p.rtt.statistic(name)

    return get


def _largest_bulk(attr: str) -> Callable[[PathResult], float | None]:
    def get(p: PathResult) -> float | None:
        cells = [b for b in p.bulk if b.error is None]
        if not cells:
            return None
        return float(getattr(max(cells, key=lambda b: (b.chunk_bytes, b.depth)), attr))

    return get


STATISTICS: dict[str, Statistic] = {
    s.name: s
    for s in (
        *(Statistic(n, f"{n} RTT (us)", _rtt(n)) for n in RTT_STATISTICS),
        Statistic(
            "goodput", "goodput of the largest bulk cell (Gbit/s)", _largest_bulk("goodput_gbps")
        ),
        Statistic(
            "completion",
            "p99 completion of the largest bulk cell (us)",
            _largest_bulk("completion_p99_us"),
        ),
        Statistic("hops", "hop count", lambda p: None if p.hops is None else float(p.hops)),
    )
}


@dataclass(frozen=True)
class Matrix:
    names: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]  # values[i][j]: path i<->j, None if unmeasured
    verdicts: tuple[tuple[Verdict | None, ...], ...]


def build_matrix(
    nodes: Sequence[Node],
    paths: PathTable,
    value: Callable[[PathResult], float | None],
) -> Matrix:
    """Symmetric N x N of any per-path statistic (a path fills both (src,dst) and (dst,src))."""
    ordered = matrix_nodes(nodes, paths)
    index = {n.name: i for i, n in enumerate(ordered)}
    n = len(ordered)
    vals: list[list[float | None]] = [[None] * n for _ in range(n)]
    verd: list[list[Verdict | None]] = [[None] * n for _ in range(n)]
    for p in paths:
        i, j = index[p.src], index[p.dst]
        v = value(p)
        for a, b in ((i, j), (j, i)):
            if verd[a][b] is None or p.verdict.rank > (verd[a][b] or Verdict.SAFE).rank:
                vals[a][b], verd[a][b] = v, p.verdict
    return Matrix(
        names=tuple(x.name for x in ordered),
        values=tuple(tuple(r) for r in vals),
        verdicts=tuple(tuple(r) for r in verd),
    )


@dataclass(frozen=True)
class GroupRow:
    """Paths grouped by a key (hop count, tier, rack pair): how many, how fast, how judged."""

    key: str
    paths: int
    median_p50_us: float | None
    worst_p99_us: float | None
    safe: int
    marginal: int
    unsafe: int


def group_paths(
    paths: Iterable[PathResult],
    key: Callable[[PathResult], str],
    order: Callable[[str], tuple[float, str]] | None = None,
) -> list[GroupRow]:
    groups: dict[str, list[PathResult]] = {}
    for p in paths:
        groups.setdefault(key(p), []).append(p)
    rows = []
    for k, members in groups.items():
        measured = [p.rtt for p in members if p.rtt is not None]
        rows.append(
            GroupRow(
                key=k,
                paths=len(members),
                median_p50_us=statistics.median(r.p50_us for r in measured) if measured else None,
                worst_p99_us=max(r.p99_us for r in measured) if measured else None,
                safe=sum(p.verdict is Verdict.SAFE for p in members),
                marginal=sum(p.verdict is Verdict.MARGINAL for p in members),
                unsafe=sum(p.verdict is Verdict.UNSAFE for p in members),
            )
        )
    return sorted(rows, key=lambda r: order(r.key) if order else (0.0, r.key))


def hop_key(p: PathResult) -> str:
    return "?" if p.hops is None else str(p.hops)


def hop_order(key: str) -> tuple[float, str]:
    return (float(key), key) if key.isdigit() else (float("inf"), key)


_TIER_ORDER = {t.value: float(i) for i, t in enumerate(Tier)}


def tier_key(p: PathResult) -> str:
    return p.tier.value


def tier_order(key: str) -> tuple[float, str]:
    return (_TIER_ORDER.get(key, float("inf")), key)


def rack_pair_key(nodes: Sequence[Node]) -> Callable[[PathResult], str]:
    rack = {n.name: n.rack or "-" for n in nodes}

    def key(p: PathResult) -> str:
        a, b = sorted((rack.get(p.src, "-"), rack.get(p.dst, "-")))
        return f"{a} <-> {b}"

    return key
