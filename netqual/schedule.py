"""Which pairs to probe, in rounds of disjoint pairs that can run at the same time.

full-mesh: the circle method. Fix one node, rotate the others; round r pairs position i
with position n-1-i. N-1 rounds for even N; for odd N a "bye" slot is added, giving N
rounds in which one node rests. Every unordered pair appears exactly once.
bipartite: every compute -> storage pair, scheduled greedily into disjoint rounds.
sampled: full mesh inside each rack plus k pairs between every two racks.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

from netqual.models import Mode, Node, Role

Pair = tuple[Node, Node]


def circle_rounds(nodes: Sequence[Node]) -> list[list[Pair]]:
    slots: list[Node | None] = list(nodes)
    if len(slots) < 2:
        return []
    if len(slots) % 2:
        slots.append(None)
    n = len(slots)
    rounds: list[list[Pair]] = []
    fixed, rest = slots[0], slots[1:]
    for _ in range(n - 1):
        line = [fixed, *rest]
        pairs: list[Pair] = []
        for i in range(n // 2):
            a, b = line[i], line[n - 1 - i]
            if a is not None and b is not None:
                # Keep inventory order inside a pair so src/dst read naturally.
                pairs.append((a, b) if nodes.index(a) < nodes.index(b) else (b, a))
        rounds.append(pairs)
        rest = rest[-1:] + rest[:-1]
    return rounds


def greedy_rounds(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """Pack pairs into rounds where no node appears twice (first fit)."""
    rounds: list[tuple[list[Pair], set[str]]] = []
    for a, b in pairs:
        for members, busy in rounds:
            if a.name not in busy and b.name not in busy:
                members.append((a, b))
                busy.update((a.name, b.name))
                break
        else:
            rounds.append(([(a, b)], {a.name, b.name}))
    return [members for members, _ in rounds]


def bipartite_pairs(nodes: Sequence[Node]) -> list[Pair]:
    compute = [n for n in nodes if n.role in (Role.COMPUTE, Role.ANY)]
    storage = [n for n in nodes if n.role is Role.STORAGE]
    return [(c, s) for c in compute for s in storage if c.name != s.name]


def sampled_pairs(nodes: Sequence[Node], k: int, seed: int = 0) -> list[Pair]:
    racks: dict[str, list[Node]] = {}
    for n in nodes:
        racks.setdefault(n.rack or "-", []).append(n)
    pairs: list[Pair] = []
    for members in racks.values():
        pairs.extend(itertools.combinations(members, 2))
    rng = random.Random(seed)
    for ra, rb in itertools.combinations(sorted(racks), 2):
        cross = list(itertools.product(racks[ra], racks[rb]))
        pairs.extend(rng.sample(cross, min(k, len(cross))))
    return pairs


def plan_rounds(nodes: Sequence[Node], mode: Mode, sample_k: int = 2) -> list[list[Pair]]:
    if mode is Mode.FULL_MESH:
        return circle_rounds(nodes)
    if mode is Mode.BIPARTITE:
        return greedy_rounds(bipartite_pairs(nodes))
    return greedy_rounds(sampled_pairs(nodes, sample_k))
