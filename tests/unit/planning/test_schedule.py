"""Schedules: every pair exactly once, rounds of disjoint pairs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netqual.model.node import Node, Role
from netqual.model.run import Mode
from netqual.planning import schedule
from netqual.planning.schedule import bipartite_pairs, circle_rounds, plan_rounds, sampled_pairs


def nodes(n: int, **kw: object) -> list[Node]:
    return [Node(f"n{i:02d}", f"198.18.0.{i + 1}", **kw) for i in range(n)]  # type: ignore[arg-type]


@settings(deadline=None)  # a loaded CI machine is no reason to fail
@given(st.integers(min_value=0, max_value=40))
def test_circle_method_covers_every_unordered_pair_once(n: int) -> None:
    ns = nodes(n)
    rounds = circle_rounds(ns)
    seen = [frozenset((a.name, b.name)) for r in rounds for a, b in r]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    for r in rounds:
        names = [x.name for pair in r for x in pair]
        assert len(names) == len(set(names)), "a node appears twice in one round"
    if n >= 2:
        assert len(rounds) == (n - 1 if n % 2 == 0 else n)


def test_even_rounds_are_full() -> None:
    rounds = circle_rounds(nodes(8))
    assert [len(r) for r in rounds] == [4] * 7


def test_pairs_keep_inventory_order() -> None:
    ns = nodes(5)
    order = {n.name: i for i, n in enumerate(ns)}
    for r in circle_rounds(ns):
        for a, b in r:
            assert order[a.name] < order[b.name]


def test_bipartite_is_every_compute_to_storage_pair() -> None:
    compute = [Node(f"gpu{i}", f"198.18.1.{i}", role=Role.COMPUTE) for i in range(1, 4)]
    storage = [Node(f"stor{i}", f"198.18.2.{i}", role=Role.STORAGE) for i in range(1, 3)]
    pairs = bipartite_pairs(compute + storage)
    assert {(a.name, b.name) for a, b in pairs} == {
        (c.name, s.name) for c, s in itertools.product(compute, storage)
    }
    rounds = plan_rounds(compute + storage, Mode.BIPARTITE)
    assert sum(len(r) for r in rounds) == 6
    for r in rounds:
        names = [x.name for pair in r for x in pair]
        assert len(names) == len(set(names))


@pytest.mark.parametrize("k", [0, 1, 3])
def test_sampled_is_full_mesh_in_rack_plus_k_between_racks(k: int) -> None:
    ns = [Node(f"r{r}h{h}", f"198.18.{r}.{h}", rack=f"r{r}") for r in range(3) for h in range(3)]
    pairs = sampled_pairs(ns, k)
    inside = [p for p in pairs if p[0].rack == p[1].rack]
    between = [p for p in pairs if p[0].rack != p[1].rack]
    assert len(inside) == 3 * 3
    assert len(between) == 3 * k
    assert sampled_pairs(ns, k) == pairs  # seeded: the same sample every run


def _check_disjoint_and_counted(s: schedule.Schedule) -> list[tuple[str, str]]:
    pairs = []
    assert s.round_count == sum(1 for _ in s.rounds_positions())
    for r in s.rounds():
        names = [x.name for pair in r for x in pair]
        assert len(names) == len(set(names)), "a node appears twice in one round"
        assert r, "an empty round"
        pairs += [(a.name, b.name) for a, b in r]
    assert len(pairs) == s.pair_count == len(set(pairs))
    return pairs


@settings(deadline=None)  # a loaded CI machine is no reason to fail
@given(st.integers(min_value=0, max_value=9), st.integers(min_value=0, max_value=9))
def test_bipartite_takes_max_of_compute_and_storage_rounds(c: int, s: int) -> None:
    ns = [Node(f"c{i}", f"198.18.1.{i + 1}", role=Role.COMPUTE) for i in range(c)]
    ns += [Node(f"s{i}", f"198.18.2.{i + 1}", role=Role.STORAGE) for i in range(s)]
    sched = schedule.bipartite(ns)
    pairs = _check_disjoint_and_counted(sched)
    assert set(pairs) == {(f"c{i}", f"s{j}") for i in range(c) for j in range(s)}
    assert sched.round_count == (max(c, s) if c and s else 0)


@settings(deadline=None)  # a loaded CI machine is no reason to fail
@given(
    st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=24),
    st.integers(min_value=0, max_value=4),
)
def test_sampled_rounds_are_disjoint_and_cover_each_rack(racks: list[int], k: int) -> None:
    ns = [Node(f"n{i}", f"198.18.4.{i + 1}", rack=f"r{r}") for i, r in enumerate(racks)]
    pairs = _check_disjoint_and_counted(schedule.sampled(ns, k))
    rack = {n.name: n.rack for n in ns}
    inside = {frozenset(p) for p in pairs if rack[p[0]] == rack[p[1]]}
    sizes = [racks.count(r) for r in set(racks)]
    assert len(inside) == sum(m * (m - 1) // 2 for m in sizes)


def test_a_thousand_node_mesh_is_planned_without_listing_pairs() -> None:
    """Hang guard for the O(pairs) planner (speed itself: bench/scale)."""
    ns = [Node(f"n{i}", f"198.18.{i // 250}.{i % 250 + 1}") for i in range(1024)]
    s = schedule.build(ns, Mode.FULL_MESH)
    assert (s.round_count, s.pair_count) == (1023, 523_776)
    assert sum(len(p) for p in s.rounds_positions()) == 523_776
