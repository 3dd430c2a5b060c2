"""The phase layout: bulk budgets, incast waves, schedule options (no sockets). Running
the phases: tests/unit/run/test_phaserun.py."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netqual.base.errors import UsageError
from netqual.base.units import KIB, MIB
from netqual.model.node import Node, Role
from netqual.model.plan import ProbePlan
from netqual.planning.budget import BulkBudget, default_cap, stream_gbps
from netqual.planning.phases import (
    ScheduleConfig,
    Timing,
    bulk_waves,
    layout,
    resolve,
    resources,
)
from netqual.planning.schedule import Pair, bipartite_pairs


def node(
    name: str, rack: str | None = None, role: Role = Role.ANY, site: str | None = None
) -> Node:
    labels = {"site": site} if site else {}
    return Node(name, f"10.0.0.{len(name) + ord(name[-1])}", role=role, rack=rack, labels=labels)


def budget(per_node: int = 1, per_rack: int = 1, incast: int | None = None) -> BulkBudget:
    return BulkBudget(per_node, per_rack, incast, 100.0)


def test_default_cap_is_one_for_the_default_plan_and_derived_from_chunk_and_depth() -> None:
    # 8 MiB x depth 8 keeps 64 MiB in flight: far above 100 GbE x 10 us, so one pair can
    # fill a 100 GbE link and only one may use it at a time.
    assert default_cap(ProbePlan()) == (1, 100.0)
    # 64 KiB at depth 1: 524,288 bits per 10 us + 5.24 us serialisation = 34.4 Gbit/s,
    # so two such pairs stay under 90% of 100 GbE.
    cap, demand = default_cap(ProbePlan(chunks_bytes=(64 * KIB,), depths=(1,)))
    assert cap == 2 and demand == pytest.approx(34.4, abs=0.1)
    assert stream_gbps(4 * KIB, 1, 100.0, 10.0) == pytest.approx(3.17, abs=0.01)
    assert default_cap(ProbePlan(chunks_bytes=(4 * KIB,), depths=(1,)))[0] == 28
    assert default_cap(ProbePlan(bulk=False))[0] == 1
    assert resolve(ScheduleConfig(bulk_per_rack=3), ProbePlan()).per_rack == 3


def test_resources_name_both_nics_and_both_uplinks_only_when_crossing() -> None:
    a, b, c = node("a", "r1"), node("b", "r1"), node("c", "r2")
    assert resources(a, b) == (("node", a.address), ("node", b.address))
    assert ("rack", "r1") in resources(a, c) and ("rack", "r2") in resources(a, c)
    s1, s2 = node("s", "r9", site="x"), node("t", "r8", site="y")
    assert ("site", "x") in resources(s1, s2)


def _check_caps(waves: list[list[Pair]], b: BulkBudget) -> None:
    for wave in waves:
        load: dict[tuple[str, str], int] = {}
        for a, d in wave:
            for r in resources(a, d):
                load[r] = load.get(r, 0) + 1
        for r, n in load.items():
            assert n <= (b.per_node if r[0] == "node" else b.per_rack), (r, n, wave)


def _racked(n: int, racks: int) -> list[Node]:
    return [Node(f"h{i}", f"10.1.{i % racks}.{i}", rack=f"r{i % racks}") for i in range(n)]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 14),
    racks=st.integers(1, 4),
    per_node=st.integers(1, 3),
    per_rack=st.integers(1, 3),
)
def test_waves_keep_every_cap_and_hold_every_pair_once(
    n: int, racks: int, per_node: int, per_rack: int
) -> None:
    nodes = _racked(n, racks)
    pairs = list(itertools.combinations(nodes, 2))
    b = budget(per_node, per_rack)
    waves = bulk_waves(pairs, b)
    _check_caps(waves, b)
    flat = [(a.name, d.name) for wave in waves for a, d in wave]
    assert sorted(flat) == sorted((a.name, d.name) for a, d in pairs)


def test_bipartite_storage_node_gets_at_most_per_node_readers() -> None:
    compute = [Node(f"c{i}", f"10.2.0.{i}", role=Role.COMPUTE) for i in range(6)]
    storage = Node("st", "10.2.1.1", role=Role.STORAGE)
    pairs = bipartite_pairs([*compute, storage])
    assert [len(w) for w in bulk_waves(pairs, budget(per_node=2))] == [2, 2, 2]
    assert [len(w) for w in bulk_waves(pairs, budget(per_node=1))] == [1] * 6


def test_incast_groups_readers_of_one_node_and_labels_nothing_else() -> None:
    compute = [Node(f"c{i}", f"10.3.0.{i}", role=Role.COMPUTE) for i in range(6)]
    st1, st2 = Node("s1", "10.3.1.1", role=Role.STORAGE), Node("s2", "10.3.1.2", role=Role.STORAGE)
    waves = bulk_waves(bipartite_pairs([*compute, st1, st2]), budget(incast=4))
    assert [len(w) for w in waves] == [4, 2, 4, 2]
    for wave in waves:
        assert len({d.name for _, d in wave}) == 1  # one responder per incast wave
        assert len({a.address for a, _ in wave}) == len(wave)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"bulk_per_node": 0}, "--bulk-per-node"),
        ({"bulk_per_rack": -1}, "--bulk-per-rack"),
        ({"incast": 1}, "--incast"),
        ({"incast": 3, "schedule": Timing.UNALIGNED}, "--incast"),
    ],
)
def test_bad_schedule_options_name_the_option(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(UsageError) as err:
        ScheduleConfig(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == option


def test_describe_records_phases_and_caps() -> None:
    b = resolve(ScheduleConfig(incast=3), ProbePlan(chunks_bytes=(MIB,), depths=(2,)))
    d = layout(ScheduleConfig(incast=3), b, bulk=True)
    assert d["name"] == "aligned" and d["phases"] == ["pingpong", "bulk"]
    assert d["bulk"] == "incast" and d["incast"] == 3
    u = layout(ScheduleConfig(Timing.UNALIGNED), b, bulk=True)
    assert u["bulk"] == "unbudgeted" and "bulk_per_node" not in u
