"""The per-pair matrix, topology tiers and per-hop / per-rack aggregation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from netqual.model.node import Node, Role
from netqual.model.path import PathResult, Tier
from netqual.model.stats import RTT_STATISTICS
from netqual.model.verdict import Verdict
from netqual.table.paths import NO_HOPS, TIERS, VERDICTS, FloatArray, IntArray, PathTable


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


def fill_tiers(table: PathTable, nodes: Sequence[Node]) -> PathTable:
    """``table`` with every ``unknown`` tier worked out from the node list (``tier_of``'s
    rules): a results file without per-path tiers is judged by the inventory's racks and
    sites, not as one undifferentiated mass (which would blame every node for distance).
    Per-node codes compared as arrays: the cost is per node plus one pass over the rows."""
    unknown_code = TIERS.index(Tier.UNKNOWN)
    rows = np.flatnonzero(table.tier == unknown_code)
    by_name = {n.name: n for n in nodes}
    if not len(rows) or not by_name:
        return table
    ends = [by_name.get(name) for name in table.names]

    def codes(key: Callable[[Node], str | None]) -> IntArray:
        seen: dict[str, int] = {}
        out = [-1 if n is None or key(n) is None else seen.setdefault(str(key(n)), len(seen))
               for n in ends]  # fmt: skip
        return np.array(out, dtype=np.int64)

    address, site, rack = (
        codes(lambda n: n.address),
        codes(lambda n: n.labels.get("site")),
        codes(lambda n: n.rack),
    )
    s, d = table.src[rows], table.dst[rows]
    tier = np.full(len(rows), unknown_code, dtype=table.tier.dtype)
    racked = (rack[s] >= 0) & (rack[d] >= 0)
    tier[racked & (rack[s] == rack[d])] = TIERS.index(Tier.SAME_RACK)
    tier[racked & (rack[s] != rack[d])] = TIERS.index(Tier.CROSS_RACK)
    tier[(site[s] >= 0) & (site[d] >= 0) & (site[s] != site[d])] = TIERS.index(Tier.REMOTE)
    tier[(address[s] >= 0) & (address[s] == address[d])] = TIERS.index(Tier.SAME_HOST)
    if (tier == unknown_code).all():
        return table
    filled = table.tier.copy()
    filled[rows] = tier
    return dataclasses.replace(table, tier=filled)


def order_nodes(nodes: Sequence[Node]) -> list[Node]:
    """The one node order of every matrix (terminal and report): site by site, rack by rack
    (unracked last), storage after compute inside a rack, then by rail (endpoints below the
    node, docs/rails.md: a rail's NICs form one block), then by name, so matrix blocks
    follow the topology."""
    return sorted(
        nodes,
        key=lambda n: (
            n.labels.get("site", ""),
            n.rack is None,
            n.rack or "",
            n.role is Role.STORAGE,
            -1 if n.nic is None else n.nic.rail,
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
    """N x N of any per-path statistic, row = source, column = destination: cell (i, j)
    shows the path i -> j when it was measured, else the path j -> i (a run measures each
    pair once, in one direction), so a pair measured both ways (``retest
    --both-directions``) shows each direction's own value, as the report does. Several
    paths of one direction (a hand-merged file): the worse verdict, the earlier on a tie.
    The winner of each cell is picked on the columns; only the winners become records, so
    the cost is the N x N cells shown (terminal and report draw matrices for small runs
    only)."""
    ordered = matrix_nodes(nodes, paths)
    n = len(ordered)
    src, dst = paths.codes([x.name for x in ordered])
    rows = np.arange(len(paths), dtype=np.int64)
    cell = np.concatenate((src * n + dst, dst * n + src))
    who = np.concatenate((rows, rows))
    mirrored = np.concatenate((np.zeros(len(rows), np.int64), np.ones(len(rows), np.int64)))
    worse = -np.concatenate((paths.verdict, paths.verdict))
    order = np.lexsort((who, worse, mirrored, cell))
    first = np.ones(len(order), dtype=bool)
    first[1:] = cell[order][1:] != cell[order][:-1]
    vals: list[list[float | None]] = [[None] * n for _ in range(n)]
    verd: list[list[Verdict | None]] = [[None] * n for _ in range(n)]
    shown: dict[int, tuple[float | None, Verdict]] = {}
    for c, k in zip(cell[order][first].tolist(), who[order][first].tolist(), strict=True):
        if k not in shown:
            p = paths.row(k)
            shown[k] = (value(p), p.verdict)
        vals[c // n][c % n], verd[c // n][c % n] = shown[k]
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


@dataclass(frozen=True)
class Grouping:
    """Each path's group as an integer code (``codes[i]`` indexes ``labels``), and how the
    groups are ordered for display: a column, so grouping half a million paths is a
    bincount, not a dict of lists."""

    codes: IntArray
    labels: tuple[str, ...]
    order: Callable[[str], tuple[float, str]] | None = None


def _none(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def group_medians(codes: IntArray, values: FloatArray, size: int) -> FloatArray:
    """Median of ``values`` per group code (NaN values left out, NaN for a group without
    any): values sorted inside each group, then the middle of each run; equal to
    ``statistics.median``. Sorted by value, then stably by group (a radix sort when the
    codes fit 16 bits): several times faster than one lexsort over a million paths."""
    ok = ~np.isnan(values)
    g, v = codes[ok], values[ok]
    by_value = np.argsort(v)
    narrow = g[by_value].astype(np.uint16 if size <= 1 << 16 else np.int64)
    v = v[by_value[np.argsort(narrow, kind="stable")]]
    counts = np.bincount(g, minlength=size)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    has = counts > 0
    lo, hi = (starts + (counts - 1) // 2)[has], (starts + counts // 2)[has]
    out = np.full(size, np.nan)
    # one middle value when odd (kept exact: no (x + x) / 2), the mean of two when even
    out[has] = np.where(lo == hi, v[lo], (v[lo] + v[hi]) / 2)
    return out


def group_paths(paths: PathTable, grouping: Grouping) -> list[GroupRow]:
    """Per group: path count, median p50, worst p99 and the verdict counts, from the
    columns (bincounts and one sort), ordered by ``grouping.order`` (else by label)."""
    size = len(grouping.labels)
    codes = grouping.codes
    present = np.bincount(codes, minlength=size)
    verdicts = np.bincount(codes * len(VERDICTS) + paths.verdict, minlength=size * len(VERDICTS))
    verdicts = verdicts.reshape(size, len(VERDICTS))
    measured = paths.has_rtt
    medians = group_medians(codes, np.where(measured, paths.rtt["p50"], np.nan), size)
    worst = np.full(size, -np.inf)
    np.maximum.at(worst, codes[measured], paths.rtt["p99"][measured])
    rows = [
        GroupRow(
            key=grouping.labels[k],
            paths=int(present[k]),
            median_p50_us=_none(float(medians[k])),
            worst_p99_us=None if np.isneginf(worst[k]) else float(worst[k]),
            safe=int(verdicts[k, Verdict.SAFE.rank]),
            marginal=int(verdicts[k, Verdict.MARGINAL.rank]),
            unsafe=int(verdicts[k, Verdict.UNSAFE.rank]),
        )
        for k in np.flatnonzero(present).tolist()
    ]
    order = grouping.order
    return sorted(rows, key=lambda r: order(r.key) if order else (0.0, r.key))


def hop_order(key: str) -> tuple[float, str]:
    return (float(key), key) if key.isdigit() else (float("inf"), key)


def hop_groups(paths: PathTable) -> Grouping:
    """By hop count; "?" where the hop count is unknown."""
    hops, codes = np.unique(paths.hops, return_inverse=True)
    labels = tuple("?" if h == NO_HOPS else str(h) for h in hops.tolist())
    return Grouping(codes.reshape(-1).astype(np.int64), labels, hop_order)


_TIER_ORDER = {t.value: float(i) for i, t in enumerate(Tier)}


def tier_order(key: str) -> tuple[float, str]:
    return (_TIER_ORDER.get(key, float("inf")), key)


def tier_groups(paths: PathTable) -> Grouping:
    return Grouping(paths.tier, tuple(t.value for t in TIERS), tier_order)


def rail_groups(paths: PathTable) -> Grouping | None:
    """By rail (docs/rails.md): "rail 0", "rail 1", ...; "across rails" for a path between
    NICs of different rails (--rails all). None when no path ran between NICs."""
    if paths.nics is None:
        return None
    rails, codes = np.unique(paths.nics.rail, return_inverse=True)
    labels = tuple("across rails" if r < 0 else f"rail {r}" for r in rails.tolist())
    return Grouping(codes.reshape(-1).astype(np.int64), labels, rail_order)


def rail_order(key: str) -> tuple[float, str]:
    return (float(key.split()[1]) if key.startswith("rail ") else float("inf"), key)


def rack_pair_groups(nodes: Sequence[Node], paths: PathTable) -> Grouping:
    """By the (unordered) pair of racks a path joins, "-" for a node without a rack or not
    in the node list: labels like "r01 <-> r02"."""
    rack = {n.name: n.rack or "-" for n in nodes}
    racks = sorted({*rack.values(), "-"})
    code = {r: i for i, r in enumerate(racks)}
    node_rack = np.array([code[rack.get(name, "-")] for name in paths.names] or [0], np.int64)
    a, b = node_rack[paths.src], node_rack[paths.dst]
    # racks are sorted, so min/max of the codes is the sorted pair of names
    pair = np.minimum(a, b) * len(racks) + np.maximum(a, b)
    used, codes = np.unique(pair, return_inverse=True)
    labels = tuple(f"{racks[k // len(racks)]} <-> {racks[k % len(racks)]}" for k in used.tolist())
    return Grouping(codes.reshape(-1).astype(np.int64), labels)
