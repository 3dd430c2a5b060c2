"""Which measured pairs get bulk reads (``--bulk-pairs``), and the waves they run in.

Coverage: ping-pong always covers every planned pair; bulk covers

- ``all``: every pair whose ping-pong succeeded;
- ``per-node:K``: at least K pairs of every node (the first K it is in, in ping-pong round
  order, so a full mesh takes its first K rounds: K perfect matchings), plus one pair of
  every rack pair (and every rack with itself) that has none yet;
- ``per-rack-pair:K``: K pairs of every rack pair, plus one pair of every node left out.

Waves: pairs are first laid into rounds where no host appears twice (each pair in the
first round after the last one either host is in: a ping-pong round's pairs stay
together). Consecutive rounds then merge into one wave while every resource (host NIC,
rack uplink, site link) stays within its cap; a round that exceeds a cap alone is split by
first fit, starting with the wave still open. Merging works on per-resource load vectors
(numpy), splitting only touches the pairs of a round that does not fit, so the whole is
O(pairs + rounds x resources) and a full mesh on a fabric that carries a round at once
needs exactly its n-1 rounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from netqual.base.errors import UsageError
from netqual.model.node import Node
from netqual.planning.schedule import Pair

COVERAGES = ("all", "per-node", "per-rack-pair")


@dataclass(frozen=True)
class Coverage:
    kind: str = "all"
    k: int = 0  # per-node / per-rack-pair only

    @classmethod
    def parse(cls, text: str) -> Coverage:
        kind, _, k_text = text.strip().partition(":")
        if kind not in COVERAGES:
            raise UsageError(
                "--bulk-pairs", f"{text!r}: expected all, per-node:K or per-rack-pair:K"
            )
        if kind == "all":
            if k_text:
                raise UsageError("--bulk-pairs", "'all' takes no count")
            return cls()
        if not k_text.isdigit() or int(k_text) < 1:
            raise UsageError("--bulk-pairs", f"{text!r}: K must be a whole number >= 1")
        return cls(kind, int(k_text))

    @property
    def label(self) -> str:
        return self.kind if self.kind == "all" else f"{self.kind}:{self.k}"


def _rack_pair(a: Node, b: Node) -> tuple[str, str]:
    ra, rb = a.rack or "-", b.rack or "-"
    return (ra, rb) if ra <= rb else (rb, ra)


def select(pairs: Sequence[Pair], coverage: Coverage) -> list[bool]:
    """Which of ``pairs`` (in ping-pong round order) get bulk; O(pairs)."""
    if coverage.kind == "all":
        return [True] * len(pairs)
    chosen = [False] * len(pairs)
    per_node: dict[str, int] = {}
    per_group: dict[tuple[str, str], int] = {}

    def take(j: int, a: Node, b: Node) -> None:
        chosen[j] = True
        per_node[a.name] = per_node.get(a.name, 0) + 1
        per_node[b.name] = per_node.get(b.name, 0) + 1
        group = _rack_pair(a, b)
        per_group[group] = per_group.get(group, 0) + 1

    k = coverage.k
    if coverage.kind == "per-node":
        for j, (a, b) in enumerate(pairs):
            if per_node.get(a.name, 0) < k or per_node.get(b.name, 0) < k:
                take(j, a, b)
        # Rack pairs still uncovered: prefer nodes that have no extra pair yet, so the
        # additions stay nearly host-disjoint (a round or two), then anything left.
        for limit in (k, None):
            for j, (a, b) in enumerate(pairs):
                if chosen[j] or _rack_pair(a, b) in per_group:
                    continue
                if limit is None or max(per_node.get(a.name, 0), per_node.get(b.name, 0)) <= limit:
                    take(j, a, b)
        return chosen
    for j, (a, b) in enumerate(pairs):
        if per_group.get(_rack_pair(a, b), 0) < k:
            take(j, a, b)
    for j, (a, b) in enumerate(pairs):
        if not chosen[j] and (a.name not in per_node or b.name not in per_node):
            take(j, a, b)
    return chosen


@dataclass(frozen=True)
class Caps:
    """Concurrent bulk pairs each resource carries; unnamed ones take the defaults."""

    per_host: int
    per_group: int  # rack uplink or site link
    hosts: Mapping[str, int] = field(default_factory=dict)  # by address
    racks: Mapping[str, int] = field(default_factory=dict)
    sites: Mapping[str, int] = field(default_factory=dict)


class _Resources:
    """Integer ids of the resources pairs load, with their caps."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.ids: dict[tuple[str, str], int] = {}
        self.limits: list[int] = []

    def id(self, kind: str, name: str) -> int:
        key = (kind, name)
        if key not in self.ids:
            self.ids[key] = len(self.limits)
            c = self.caps
            if kind == "node":
                self.limits.append(c.hosts.get(name, c.per_host))
            else:
                table = c.racks if kind == "rack" else c.sites
                self.limits.append(table.get(name, c.per_group))
        return self.ids[key]

    def of(self, n: Node) -> tuple[int, int, int]:
        site = n.labels.get("site")
        return (
            self.id("node", n.address),
            -1 if n.rack is None else self.id("rack", n.rack),
            -1 if site is None else self.id("site", site),
        )


def resource_rows(pairs: Sequence[Pair], res: _Resources) -> npt.NDArray[np.int64]:
    """(pairs, 6) resource ids a pair loads, -1 where none: both hosts (one when they share
    an address), both racks and both sites when the pair crosses them."""
    codes: dict[str, tuple[int, int, int]] = {}
    for a, b in pairs:
        for n in (a, b):
            if n.name not in codes:
                codes[n.name] = res.of(n)
    index = {name: i for i, name in enumerate(codes)}
    table = np.array(list(codes.values()), dtype=np.int64).reshape(-1, 3)
    ia = np.fromiter((index[a.name] for a, _ in pairs), dtype=np.int64, count=len(pairs))
    ib = np.fromiter((index[b.name] for _, b in pairs), dtype=np.int64, count=len(pairs))
    x, y = table[ia], table[ib]
    crosses = (x >= 0) & (y >= 0) & (x != y)
    rows = np.full((len(pairs), 6), -1, dtype=np.int64)
    rows[:, 0] = x[:, 0]
    rows[:, 1] = np.where(y[:, 0] != x[:, 0], y[:, 0], -1)
    for col in (1, 2):
        rows[:, 2 * col] = np.where(crosses[:, col], x[:, col], -1)
        rows[:, 2 * col + 1] = np.where(crosses[:, col], y[:, col], -1)
    return rows


def _host_rounds(rows: npt.NDArray[np.int64], resources: int) -> list[int]:
    """Round of each pair: the first after the last one either of its hosts is in (the
    hot loop of packing: plain lists, no calls)."""
    xs = rows[:, 0].tolist()
    ys = np.where(rows[:, 1] >= 0, rows[:, 1], rows[:, 0]).tolist()
    free = [0] * resources
    out = []
    for x, y in zip(xs, ys, strict=True):
        fx, fy = free[x], free[y]
        r = fx if fx > fy else fy
        out.append(r)
        free[x] = free[y] = r + 1
    return out


def waves(pairs: Sequence[Pair], caps: Caps) -> list[list[Pair]]:
    """Bulk waves of ``pairs`` under ``caps`` (module docstring); every pair exactly once."""
    if not pairs:
        return []
    res = _Resources(caps)
    rows = resource_rows(pairs, res)
    limits = np.array(res.limits, dtype=np.int64)
    rounds = np.array(_host_rounds(rows, len(limits)), dtype=np.int64)
    order = np.argsort(rounds, kind="stable")
    bounds = np.searchsorted(rounds[order], np.arange(int(rounds.max()) + 2))
    out: list[list[int]] = []
    current: list[int] = []
    load = np.zeros(len(limits), dtype=np.int64)
    for r in range(len(bounds) - 1):
        idx = order[bounds[r] : bounds[r + 1]]
        used = rows[idx]
        add = np.bincount(used[used >= 0], minlength=len(limits))
        if np.all(load + add <= limits):
            current.extend(idx.tolist())
            load += add
        elif np.all(add <= limits):
            out.append(current)  # the round runs alone as a wave, and stays open
            current, load = idx.tolist(), add
        else:
            done, current, load = _split(idx.tolist(), rows, limits, current, load)
            out += done
    if current:
        out.append(current)
    return [[pairs[j] for j in wave] for wave in out]


_NONE_CAP = 1 << 62  # the stand-in resource of a row's empty slots: never full


def _split(
    idx: list[int],
    rows: npt.NDArray[np.int64],
    limits: npt.NDArray[np.int64],
    current: list[int],
    load: npt.NDArray[np.int64],
) -> tuple[list[list[int]], list[int], npt.NDArray[np.int64]]:
    """One round that exceeds a cap on its own: first fit of its pairs into the wave still
    open and as many new ones as needed. The hot loop of an oversubscribed fabric (every
    round of a full mesh splits there), so it runs on plain lists: room left per resource
    and wave, a row's six slots unrolled, its empty slots (-1) pointing at one extra
    resource that never fills. Returns the waves now closed, and the last one (still open)
    with its load."""
    none = len(limits)
    cap = [*limits.tolist(), _NONE_CAP]
    members = [current]
    rooms = [[c - u for c, u in zip(cap, [*load.tolist(), 0], strict=True)]]
    start = [0] * len(cap)  # resource -> first wave that may still have room for it
    round_rows = np.where(rows[idx] >= 0, rows[idx], none).tolist()
    for j, (r0, r1, r2, r3, r4, r5) in zip(idx, round_rows, strict=True):
        w = max(start[r0], start[r1], start[r2], start[r3], start[r4], start[r5])
        while w < len(members):
            rm = rooms[w]
            if min(rm[r0], rm[r1], rm[r2], rm[r3], rm[r4], rm[r5]) > 0:
                break
            w += 1
        if w == len(members):
            members.append([])
            rooms.append(list(cap))
        members[w].append(j)
        rm = rooms[w]
        for r in (r0, r1, r2, r3, r4, r5):
            rm[r] -= 1
            if rm[r] == 0 and start[r] == w:
                start[r] = w + 1
    last = np.array(cap[:none], dtype=np.int64) - np.array(rooms[-1][:none], dtype=np.int64)
    return [m for m in members[:-1] if m], members[-1], last
