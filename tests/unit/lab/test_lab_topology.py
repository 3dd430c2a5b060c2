"""Lab topology loading and build planning: pure computation, no root needed."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from netqual.base.errors import EXIT_USAGE, TopologyError
from netqual.lab.inventory import render_inventory
from netqual.lab.layout import Kind, build_plan, prefix_for
from netqual.lab.topology import load, load_default
from netqual.model.node import Role
from netqual.model.run import RunKind
from netqual.planning.inventory import load_inventory

LAB_NET = ipaddress.ip_network("198.18.0.0/15")


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "topo.toml"
    p.write_text(text)
    return p


SMALL = """
[lab]
name = "small"
[[router]]
name = "leaf"
[[host]]
name = "a"
rack = "r1"
[[host]]
name = "b"
rack = "r1"
[[link]]
a = "a"
b = "leaf"
delay_us = 25
[[link]]
a = "b"
b = "leaf"
"""


def test_default_topology_hops_match_the_design() -> None:
    plan = build_plan(load_default(), "nqltest")
    assert plan.hop_count("r1h1", "r1h2") == 2  # host-leaf-host
    assert plan.hop_count("r1h1", "r2h3") == 4  # leaf-spine-leaf
    assert plan.hop_count("r2h2", "st1") == 5  # leaf-spine-wan1-wan2
    assert plan.hop_count("st1", "st2") == 2
    hosts = [n for n in plan.nodes if n.kind is Kind.HOST]
    assert len(hosts) == 8
    assert {n.role for n in hosts} == {Role.COMPUTE, Role.STORAGE}


def test_injected_rtt_is_the_sum_of_the_delays_along_the_installed_routes() -> None:
    plan = build_plan(load_default(), "nqltest")
    assert plan.route_path("r1h1", "r2h1") == ("r1h1", "leaf1", "spine", "leaf2", "r2h1")
    assert plan.link_delays_us("r1h1", "r2h1") == (0.0, 45.0, 45.0, 0.0)
    assert plan.injected_rtt_us("r1h1", "r1h2") == 0.0
    assert plan.injected_rtt_us("r1h1", "r2h1") == 180.0  # two leaf-spine links each way
    assert plan.injected_rtt_us("st2", "r2h3") == 890.0  # leaf-spine and the WAN
    assert plan.injected_rtt_us("st1", "st2") == 0.0


def test_every_address_is_in_the_benchmark_range() -> None:
    plan = build_plan(load_default(), "nqltest")
    addresses = [i.address for i in plan.interfaces] + [r.dest for r in plan.routes]
    addresses += [r.via for r in plan.routes] + [n.address for n in plan.nodes if n.address]
    assert addresses
    assert all(ipaddress.ip_address(a) in LAB_NET for a in addresses)
    host_addresses = [n.address for n in plan.nodes if n.address]
    assert len(set(host_addresses)) == len(host_addresses)


def test_delays_go_through_the_relay_and_zero_delay_links_are_veth(tmp_path: Path) -> None:
    plan = build_plan(load(write(tmp_path, SMALL)), "nqltest")
    assert [(ln.name, ln.delay_ns) for ln in plan.relay_links] == [("a-leaf", 25_000)]
    # b-leaf has no delay, and the control namespace hangs off the router by veth
    assert len(plan.veth_links) == 2
    assert all(ln.a_ifname.startswith("to-") for ln in plan.relay_links)


def test_a_rate_without_delay_is_a_veth_pair_shaped_by_tbf_on_both_ends(tmp_path: Path) -> None:
    shaped = SMALL + "rate_mbit = 100\nqueue_us = 20000\n"
    plan = build_plan(load(write(tmp_path, shaped)), "nqltest")
    # SMALL ends with the b-leaf link, so the rate and queue apply to it
    (ln,) = plan.shaped_links
    assert (ln.a_netns, ln.a_ifname, ln.b_ifname) == ("nqltest-b", "to-leaf", "to-b")
    # 100 Mbit/s: 1 ms of traffic is 12,500 B, less than two 9000 B frames
    assert ln.tc_args() == ["tbf", "rate", "100mbit", "burst", "18064", "latency", "20000us"]
    assert len(plan.veth_links) == 2 and len(plan.relay_links) == 1  # a-leaf keeps its delay
    fast = SMALL + "rate_mbit = 10000\n"
    (ln,) = build_plan(load(write(tmp_path, fast)), "nqltest").shaped_links
    assert ln.tc_args()[3:6] == ["burst", "1250000", "latency"]


ROUTERS_MTU = '[[router]]\nname = "spine"\n[[link]]\na = "leaf"\nb = "spine"\nmtu = 1400\n'


def test_a_links_mtu_sets_the_hosts_end_only(tmp_path: Path) -> None:
    """A misset NIC (``mtu`` on a host's link): the host's interface takes it, the router's
    end and every other link keep the lab's (star-faults: h4's main interface at 1,400)."""
    plan = build_plan(load(write(tmp_path, SMALL + "mtu = 1400\n")), "nqltest")
    mtus = {(i.node, i.ifname): i.mtu for i in plan.interfaces}
    assert mtus[("b", "to-leaf")] == 1400
    assert mtus[("leaf", "to-b")] is None and mtus[("a", "to-leaf")] is None


def test_routes_reach_every_host_from_every_namespace() -> None:
    plan = build_plan(load_default(), "nqltest")
    hosts = {n.address for n in plan.nodes if n.kind is Kind.HOST}
    for node in plan.nodes:
        dests = {r.dest for r in plan.routes if r.node == node.name}
        assert hosts - {node.address} <= dests, node.name


def test_prefix_depends_on_state_dir(tmp_path: Path) -> None:
    assert prefix_for(tmp_path / "a") != prefix_for(tmp_path / "b")
    assert prefix_for(tmp_path / "a") == prefix_for(tmp_path / "a")


def test_lab_inventory_loads_with_the_run_loader(tmp_path: Path) -> None:
    plan = build_plan(load_default(), "nqltest")
    path = tmp_path / "inventory.toml"
    path.write_text(render_inventory(plan, tmp_path / "token"))
    inv = load_inventory(path)
    assert inv.kind is RunKind.LAB  # its runs say so (results.json run.kind)
    nodes = {n.name: n for n in inv.nodes}
    assert set(nodes) == {"r1h1", "r1h2", "r1h3", "r2h1", "r2h2", "r2h3", "st1", "st2"}
    assert nodes["st1"].role is Role.STORAGE and nodes["st1"].rack == "remote"
    assert nodes["r2h1"].labels == {"leaf": "leaf2", "site": "local"}
    assert nodes["st2"].labels["site"] == "remote"
    assert nodes["r1h1"].address == "198.18.1.10"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[lab]\nmtu = 10\n", "lab.mtu"),
        ("[lab]\ncolour = 1\n", "lab.colour"),
        ('[[host]]\nname = "A"\nrack = "r"\n', "host[0].name"),
        ('[[host]]\nname = "a"\n', "host[0].rack"),
        ('[[host]]\nname = "a"\nrack = "r"\nrole = "gpu"\n', "host[0].role"),
        (SMALL + '[[link]]\na = "a"\nb = "nowhere"\n', "link[2].b"),
        (SMALL + '[[link]]\na = "leaf"\nb = "a"\n', "link[2]"),
        (SMALL.replace("delay_us = 25", "delay_us = -1"), "link[0].delay_us"),
        (SMALL.replace("delay_us = 25", 'delay_us = "fast"'), "link[0].delay_us"),
        (SMALL + '[[link]]\na = "a"\nb = "b"\nrate_mbit = 0\n', "link[2].rate_mbit"),
        (SMALL + "queue_us = 5000\n", "link[1].queue_us"),
        (SMALL + "rate_mbit = 10\nqueue_us = 5\n", "link[1].queue_us"),
        (SMALL.replace('name = "small"', 'name = "small"\ncontrol = "x"'), "lab.control"),
        (SMALL + "mtu = 100\n", "link[1].mtu"),
        (SMALL + ROUTERS_MTU, "link[2].mtu"),
    ],
)
def test_topology_errors_name_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TopologyError) as info:
        load(path)
    assert info.value.field == field
    assert str(path) in str(info.value)
    assert info.value.exit_code == EXIT_USAGE


def test_unreadable_and_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read"):
        load(tmp_path / "missing.toml")
    with pytest.raises(TopologyError, match="TOML syntax error") as err:
        load(write(tmp_path, "[lab\n"))
    assert err.value.field == "line 1"
