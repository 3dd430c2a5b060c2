"""Bulk coverage (--bulk-pairs), caps from the stated fabric, and wave packing at scale."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from netqual.base.errors import InventoryError, UsageError
from netqual.base.units import KIB
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.planning.fabric import Fabric, Uplink
from netqual.planning.inventory import load_inventory
from netqual.planning.packing import Coverage, select
from netqual.planning.phases import (
    ScheduleConfig,
    Timing,
    bulk_waves,
    resolve,
    resources,
)
from netqual.planning.schedule import Pair, full_mesh


def racked(n: int, racks: int) -> list[Node]:
    return [
        Node(f"h{i:04d}", f"10.{i // 250}.{i % 250}.1", rack=f"r{i * racks // n:02d}")
        for i in range(n)
    ]


def mesh(nodes: list[Node]) -> list[Pair]:
    return [p for r in full_mesh(nodes).rounds() for p in r]


def check_caps(waves: list[list[Pair]], caps: dict[tuple[str, str], int]) -> None:
    for wave in waves:
        load = Counter(r for a, b in wave for r in resources(a, b))
        for r, n in load.items():
            assert n <= caps[r], (r, n)


def caps_of(nodes: list[Node], cfg: ScheduleConfig, fabric: Fabric) -> dict[tuple[str, str], int]:
    c = resolve(cfg, ProbePlan(), nodes, fabric).packing_caps()
    out = {("node", a): v for a, v in c.hosts.items()}
    out.update({("rack", r): v for r, v in c.racks.items()})
    return out


def test_a_1024_node_full_mesh_packs_into_its_1023_rounds() -> None:
    nodes = racked(1024, 32)
    pairs = mesh(nodes)
    budget = resolve(ScheduleConfig(), ProbePlan(), nodes)  # nothing stated: non-blocking
    waves = bulk_waves(pairs, budget)  # how fast: bench/packing (docs/performance.md)
    # n-1 waves, each a perfect matching (no host twice), every pair exactly once
    assert len(waves) == 1023 and {len(w) for w in waves} == {512}
    assert all(len({n.address for p in w for n in p}) == 1024 for w in waves)
    assert sorted((a.name, b.name) for w in waves for a, b in w) == sorted(
        (a.name, b.name) for a, b in pairs
    )


def test_caps_come_from_the_stated_fabric() -> None:
    nodes = racked(64, 4)  # 16 hosts per rack
    fabric = Fabric(
        nic_gbps={nodes[0].name: 400.0},
        racks={"r01": Uplink(oversubscription=2.0), "r02": Uplink(uplink_gbps=400.0)},
    )
    caps = resolve(ScheduleConfig(), ProbePlan(), nodes, fabric).packing_caps()
    # default plan: one stream fills a NIC, so one bulk pair per host whatever its rate;
    # r00 non-blocking carries all 16, 2:1 half, 400 Gbit/s four 100 GbE streams
    assert set(caps.hosts.values()) == {1}
    assert caps.racks == {"r00": 16, "r01": 8, "r02": 4, "r03": 16}
    small = ProbePlan(chunks_bytes=(4 * KIB,), depths=(1,))
    small_caps = resolve(ScheduleConfig(), small, nodes, fabric).packing_caps()
    assert small_caps.hosts[nodes[0].address] == 110 and small_caps.hosts[nodes[1].address] == 28
    assert small_caps.racks["r03"] == 16 * 28
    forced = resolve(ScheduleConfig(bulk_per_node=2, bulk_per_rack=3), ProbePlan(), nodes, fabric)
    assert set(forced.packing_caps().hosts.values()) == {2}
    assert set(forced.packing_caps().racks.values()) == {3}


def test_an_oversubscribed_fabric_splits_rounds_and_keeps_every_cap() -> None:
    nodes = racked(64, 4)
    fabric = Fabric(racks={f"r{i:02d}": Uplink(oversubscription=2.0) for i in range(4)})
    pairs = mesh(nodes)
    waves = bulk_waves(pairs, resolve(ScheduleConfig(), ProbePlan(), nodes, fabric))
    check_caps(waves, caps_of(nodes, ScheduleConfig(), fabric))
    assert Counter((a.name, b.name) for w in waves for a, b in w) == Counter(
        (a.name, b.name) for a, b in pairs
    )
    # each rack carries 8 cross-rack pairs at once where a round has up to 16: about 2x
    assert 63 < len(waves) <= 2 * 63 + 4


@pytest.mark.parametrize("per_rack", [1, 2, 5])
def test_forced_small_rack_caps_still_hold_every_pair_once(per_rack: int) -> None:
    nodes = racked(40, 5)
    cfg = ScheduleConfig(bulk_per_rack=per_rack)
    pairs = mesh(nodes)
    waves = bulk_waves(pairs, resolve(cfg, ProbePlan(), nodes))
    check_caps(waves, caps_of(nodes, cfg, Fabric()))
    assert sorted((a.name, b.name) for w in waves for a, b in w) == sorted(
        (a.name, b.name) for a, b in pairs
    )


def test_per_node_coverage_reaches_every_node_and_rack_pair_in_few_waves() -> None:
    nodes = racked(256, 8)
    pairs = mesh(nodes)
    chosen = [
        p for p, c in zip(pairs, select(pairs, Coverage.parse("per-node:2")), strict=True) if c
    ]
    per_node = Counter(n.name for p in chosen for n in p)
    assert min(per_node[n.name] for n in nodes) >= 2
    rack_pairs = {tuple(sorted((a.rack or "", b.rack or ""))) for a, b in chosen}
    racks = sorted({n.rack or "" for n in nodes})
    assert rack_pairs == set(itertools.combinations_with_replacement(racks, 2))
    assert len(chosen) < 300  # 256 for two perfect matchings, plus rack-pair fill-ins
    waves = bulk_waves(chosen, resolve(ScheduleConfig(), ProbePlan(), nodes))
    assert len(waves) <= 6


def test_per_rack_pair_coverage_takes_k_of_each_rack_pair_and_every_node() -> None:
    nodes = racked(48, 4)
    pairs = mesh(nodes)
    chosen = [
        p for p, c in zip(pairs, select(pairs, Coverage.parse("per-rack-pair:3")), strict=True) if c
    ]
    groups = Counter(tuple(sorted((a.rack or "", b.rack or ""))) for a, b in chosen)
    assert len(groups) == 10 and min(groups.values()) >= 3
    assert {n.name for p in chosen for n in p} == {n.name for n in nodes}


@pytest.mark.parametrize("text", ["some", "per-node", "per-node:0", "per-node:x", "all:3"])
def test_bad_coverage_names_the_option(text: str) -> None:
    with pytest.raises(UsageError) as err:
        Coverage.parse(text)
    assert err.value.field == "--bulk-pairs"


def test_coverage_needs_the_aligned_schedule() -> None:
    with pytest.raises(UsageError, match="aligned"):
        ScheduleConfig(Timing.PER_ROUND, bulk_pairs=Coverage("per-node", 1))


def _inventory(tmp_path: Path, extra: str) -> Path:
    nodes = "".join(
        f'[[node]]\nname = "n{i}"\naddress = "10.0.0.{i + 1}"\nrack = "r{i % 2}"\n'
        f'labels = {{ site = "s1" }}\n'
        for i in range(4)
    )
    path = tmp_path / "inv.toml"
    path.write_text(nodes + extra)
    return path


def test_inventory_states_nic_and_uplinks(tmp_path: Path) -> None:
    extra = (
        "[rack.r0]\nuplink_gbps = 800\n[rack.r1]\noversubscription = 2.0\n"
        "[site.s1]\noversubscription = 4\n"
    )
    path = _inventory(tmp_path, extra)
    text = path.read_text().replace('name = "n0"\n', 'name = "n0"\nnic_gbps = 200\n', 1)
    path.write_text(text)
    fab = load_inventory(path).fabric
    assert fab.racks == {"r0": Uplink(uplink_gbps=800.0), "r1": Uplink(oversubscription=2.0)}
    assert fab.sites == {"s1": Uplink(oversubscription=4.0)}
    assert fab.nic_gbps == {"n0": 200.0}
    assert (
        fab.assumption()
        == "from the inventory (2 racks, 1 site, 1 NIC stated); the rest non-blocking"
    )


@pytest.mark.parametrize(
    ("extra", "field", "problem"),
    [
        ("[rack.r9]\nuplink_gbps = 100\n", "rack.r9", "no node has rack = 'r9'"),
        ("[rack.r0]\nuplink_gbps = 100\noversubscription = 2\n", "rack.r0", "exactly one"),
        ("[rack.r0]\noversubscription = 0.5\n", "rack.r0.oversubscription", "must be >= 1"),
        ("[rack.r0]\nuplink_gbps = -3\n", "rack.r0.uplink_gbps", "positive"),
        ("[rack.r0]\nspeed = 3\n", "rack.r0.speed", "unknown key"),
        ("[site.x]\nuplink_gbps = 100\n", "site.x", "labels.site = 'x'"),
        ("rack = 3\n", "rack", "expected tables"),
    ],
)
def test_bad_fabric_entries_name_the_field(
    tmp_path: Path, extra: str, field: str, problem: str
) -> None:
    path = _inventory(tmp_path, "")
    path.write_text(
        extra + path.read_text() if not extra.startswith("[") else path.read_text() + extra
    )
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert err.value.field == field and problem in str(err.value)
