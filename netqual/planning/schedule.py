"""Which pairs to probe, in rounds of disjoint pairs that can run at the same time.

A ``Schedule`` works on node *positions* (indices into the inventory's node tuple) held in
numpy arrays, so building one is O(pairs) at worst and a 10,000-node full mesh (50 million
pairs) is never a list of Python tuples. Rounds are produced one at a time.

full-mesh: the circle method. Fix one slot, rotate the others; round r pairs line
position i with position m-1-i. N-1 rounds for even N; for odd N a "bye" slot is added,
giving N rounds in which one node rests. Every unordered pair appears exactly once, and
inside a pair the node listed first in the inventory is the source.
bipartite: every compute (or any-role) -> storage pair. For C compute and S storage nodes
with C >= S, round r pairs storage j with compute (j + r) mod C: C rounds of S pairs
(symmetrically when C < S), the fewest rounds possible.
sampled: full mesh inside each rack (the racks' circle rounds run side by side) plus k
seeded-random pairs between every two racks, packed after them: each pair goes into the
first round after the last one either of its nodes is busy in.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from netqual.base.errors import UsageError
from netqual.model.node import Node, Role
from netqual.model.run import Mode

Pair = tuple[Node, Node]
Positions = npt.NDArray[np.int64]  # shape (k, 2): (src position, dst position) per pair
IntArray = npt.NDArray[np.int64]

DEFAULT_SAMPLE_K = 2  # sampled mode: pairs between every two racks (run --sample-k)


def _circle_round(m: int, r: int) -> Positions:
    """Round r of the circle method on m slots (m even), as slot pairs (low, high)."""
    half = m // 2
    i = np.arange(half, dtype=np.int64)
    # line[0] is the fixed slot 0; line[j] for j >= 1 is rest rotated right by r,
    # where rest = slots 1..m-1, so line[j] = 1 + (j - 1 - r) mod (m - 1).
    left = np.where(i == 0, 0, 1 + (i - 1 - r) % (m - 1))
    right = 1 + (m - 2 - i - r) % (m - 1)
    return np.stack([np.minimum(left, right), np.maximum(left, right)], axis=1)


@dataclass(frozen=True)
class Schedule:
    """Rounds of node-disjoint pairs over ``nodes``; see the module docstring per mode."""

    nodes: tuple[Node, ...]
    mode: Mode
    round_count: int
    pair_count: int
    # sampled (and any explicit pair list): all pairs, sorted by round, and round offsets
    _pairs: Positions | None = None
    _offsets: npt.NDArray[np.int64] | None = None
    # bipartite: positions of the compute and storage nodes
    _compute: npt.NDArray[np.int64] | None = None
    _storage: npt.NDArray[np.int64] | None = None

    def round_positions(self, r: int) -> Positions:
        """Pairs of round r as positions into ``nodes``, shape (k, 2)."""
        if not 0 <= r < self.round_count:
            raise IndexError(f"round {r} of {self.round_count}")
        if self.mode is Mode.FULL_MESH and self._pairs is None:
            n = len(self.nodes)
            m = n + n % 2  # a bye slot (position n) for odd n
            pos = _circle_round(m, r)
            return pos[pos[:, 1] < n] if m != n else pos
        if self._compute is not None and self._storage is not None:
            c, s = self._compute, self._storage
            if len(c) >= len(s):
                j = np.arange(len(s), dtype=np.int64)
                pos = np.stack([c[(j + r) % len(c)], s[j]], axis=1)
            else:
                i = np.arange(len(c), dtype=np.int64)
                pos = np.stack([c[i], s[(i + r) % len(s)]], axis=1)
            return pos[np.argsort(pos[:, 0], kind="stable")]
        assert self._pairs is not None and self._offsets is not None
        return self._pairs[self._offsets[r] : self._offsets[r + 1]]

    def rounds_positions(self) -> Iterator[Positions]:
        for r in range(self.round_count):
            yield self.round_positions(r)

    def rounds(self) -> Iterator[list[Pair]]:
        """Rounds as Node pairs, one round at a time."""
        nodes = self.nodes
        for pos in self.rounds_positions():
            yield [(nodes[a], nodes[b]) for a, b in pos.tolist()]

    def max_round_pairs(self) -> int:
        if self.mode is Mode.FULL_MESH and self._pairs is None:
            return len(self.nodes) // 2
        if self._compute is not None and self._storage is not None:
            return min(len(self._compute), len(self._storage)) if self.round_count else 0
        assert self._offsets is not None
        return int(np.diff(self._offsets).max()) if self.round_count else 0


def full_mesh(nodes: Sequence[Node]) -> Schedule:
    n = len(nodes)
    rounds = 0 if n < 2 else n - 1 + n % 2
    return Schedule(tuple(nodes), Mode.FULL_MESH, rounds, n * (n - 1) // 2)


def bipartite(nodes: Sequence[Node]) -> Schedule:
    roles = [n.role for n in nodes]
    compute = np.array(
        [i for i, r in enumerate(roles) if r in (Role.COMPUTE, Role.ANY)], dtype=np.int64
    )
    storage = np.array([i for i, r in enumerate(roles) if r is Role.STORAGE], dtype=np.int64)
    c, s = len(compute), len(storage)
    rounds = max(c, s) if c and s else 0
    return Schedule(tuple(nodes), Mode.BIPARTITE, rounds, c * s, _compute=compute, _storage=storage)


def _racks(nodes: Sequence[Node]) -> dict[str, list[int]]:
    racks: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        racks.setdefault(n.rack or "-", []).append(i)
    return racks


def _sampled_between(racks: dict[str, list[int]], k: int, seed: int) -> list[tuple[int, int]]:
    """k seeded-random pairs between every two racks; sampling indices, never the product."""
    rng = random.Random(seed)
    out: list[tuple[int, int]] = []
    for ra, rb in itertools.combinations(sorted(racks), 2):
        a, b = racks[ra], racks[rb]
        for x in rng.sample(range(len(a) * len(b)), min(k, len(a) * len(b))):
            out.append((a[x // len(b)], b[x % len(b)]))
    return out


def sampled(nodes: Sequence[Node], k: int, seed: int = 0) -> Schedule:
    racks = _racks(nodes)
    blocks: list[Positions] = []
    round_of: list[npt.NDArray[np.int64]] = []
    inside_rounds = 0
    for members in racks.values():
        sub = full_mesh([nodes[i] for i in members])
        idx = np.array(members, dtype=np.int64)
        for r in range(sub.round_count):
            pos = idx[sub.round_positions(r)]
            blocks.append(pos)
            round_of.append(np.full(len(pos), r, dtype=np.int64))
        inside_rounds = max(inside_rounds, sub.round_count)
    between = _sampled_between(racks, k, seed)
    if between:
        blocks.append(np.array(between, dtype=np.int64))
        round_of.append(_pack(between, len(nodes), first_round=inside_rounds))
    return _from_blocks(nodes, Mode.SAMPLED, blocks, round_of)


def _pack(pairs: Sequence[tuple[int, int]], n_nodes: int, first_round: int = 0) -> IntArray:
    """Round of each pair: the first round after the last one either of its nodes is in."""
    free = [first_round] * n_nodes
    rounds = np.empty(len(pairs), dtype=np.int64)
    for j, (a, b) in enumerate(pairs):
        r = max(free[a], free[b])
        rounds[j] = r
        free[a] = free[b] = r + 1
    return rounds


def _from_blocks(
    nodes: Sequence[Node], mode: Mode, blocks: list[Positions], round_of: list[IntArray]
) -> Schedule:
    pairs = np.concatenate(blocks) if blocks else np.empty((0, 2), dtype=np.int64)
    rounds = np.concatenate(round_of) if round_of else np.empty(0, dtype=np.int64)
    order = np.argsort(rounds, kind="stable")
    count = int(rounds.max()) + 1 if len(rounds) else 0
    offsets = np.searchsorted(rounds[order], np.arange(count + 1)).astype(np.int64)
    return Schedule(tuple(nodes), mode, count, len(pairs), _pairs=pairs[order], _offsets=offsets)


def explicit(nodes: Sequence[Node], pairs: Sequence[tuple[str, str]], mode: Mode) -> Schedule:
    """Just these (src, dst) pairs, packed into rounds of disjoint pairs (``netqual retest``).

    ``mode`` is the run's mode as recorded; the pairs come from the caller."""
    index = {n.name: i for i, n in enumerate(nodes)}
    pos = [(index[a], index[b]) for a, b in pairs]
    if not pos:
        return _from_blocks(nodes, mode, [], [])
    return _from_blocks(nodes, mode, [np.array(pos, dtype=np.int64)], [_pack(pos, len(nodes))])


def build(nodes: Sequence[Node], mode: Mode, sample_k: int = DEFAULT_SAMPLE_K) -> Schedule:
    if mode is Mode.FULL_MESH:
        return full_mesh(nodes)
    if mode is Mode.BIPARTITE:
        return bipartite(nodes)
    return sampled(nodes, sample_k)


def require_pairs(sched: Schedule, nodes: Sequence[Node], option: str = "--mode") -> Schedule:
    """``sched`` when it has a pair to measure; else a usage error that says why not."""
    if sched.pair_count:
        return sched
    if len(nodes) < 2:
        n = len(nodes)
        why = f"the inventory has {n} node{'' if n == 1 else 's'}; a pair needs two"
    elif sched.mode is Mode.BIPARTITE:
        roles = {n.role for n in nodes}
        missing = "storage" if Role.STORAGE not in roles else "compute (or any)"
        why = f"bipartite pairs compute with storage nodes and the inventory has no {missing} node"
    else:
        why = "no pair to measure"
    raise UsageError(option, f"the plan schedules 0 pairs: {why}; nothing was contacted")


# -- list views, for callers that want Node pairs --------------------------------------
def circle_rounds(nodes: Sequence[Node]) -> list[list[Pair]]:
    return list(full_mesh(nodes).rounds())


def bipartite_pairs(nodes: Sequence[Node]) -> list[Pair]:
    return [p for r in bipartite(nodes).rounds() for p in r]


def sampled_pairs(nodes: Sequence[Node], k: int, seed: int = 0) -> list[Pair]:
    return [p for r in sampled(nodes, k, seed).rounds() for p in r]


def plan_rounds(
    nodes: Sequence[Node], mode: Mode, sample_k: int = DEFAULT_SAMPLE_K
) -> list[list[Pair]]:
    return list(build(nodes, mode, sample_k).rounds())


# For plans built from other plans (netqual.planning.rails expands node pairs into NIC pairs).
pack = _pack
from_blocks = _from_blocks
