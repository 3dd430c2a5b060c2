"""Rail links in a lab topology (docs/lab.md "Rails"): addresses, routes and inventory
computed without root."""

from __future__ import annotations

from pathlib import Path

import pytest

from netqual.base.errors import TopologyError
from netqual.lab import default_topology_path
from netqual.lab.inventory import render_inventory
from netqual.lab.layout import build_plan
from netqual.lab.topology import load, parse
from netqual.planning.inventory import load_inventory

TWO_RAILS = Path(default_topology_path()).parent / "two-rails.toml"


def test_two_rails_give_each_host_one_address_per_rail_and_routes_on_its_plane() -> None:
    plan = build_plan(load(TWO_RAILS), "nqlt")
    h3 = plan.node("h3")
    assert [(n.name, n.address, n.rail) for n in h3.nics] == [
        ("to-rail0", "198.18.200.12", 0),
        ("to-rail1", "198.18.201.12", 1),
    ]
    to_h3_rail1 = [r for r in plan.routes if r.dest == "198.18.201.12"]
    # every other host goes through its own rail-1 link, from its rail-1 address; only the
    # rail-1 router forwards; no main router knows rail addresses
    assert sorted((r.node, r.ifname, r.src) for r in to_h3_rail1) == [
        ("h1", "to-rail1", "198.18.201.10"),
        ("h2", "to-rail1", "198.18.201.11"),
        ("h4", "to-rail1", "198.18.201.13"),
        ("rail1", "to-h3", None),
    ]
    # main addresses never route over a rail link
    assert all(
        r.ifname not in ("to-rail0", "to-rail1") for r in plan.routes if r.dest == h3.address
    )
    assert plan.hop_count("h1", "h3") == 2 and plan.injected_rtt_us("h1", "h3") == 0


def test_lab_inventory_lists_the_nics_and_loads(tmp_path: Path) -> None:
    plan = build_plan(load(TWO_RAILS), "nqlt")
    path = tmp_path / "inventory.toml"
    path.write_text(render_inventory(plan, tmp_path / "token"))
    inv = load_inventory(path)
    assert [(n.name, n.address, n.rail) for n in inv.node("h4").nics] == [
        ("to-rail0", "198.18.200.13", 0),
        ("to-rail1", "198.18.201.13", 1),
    ]


def _topo(links: list[dict[str, object]]) -> dict[str, object]:
    return {
        "router": [{"name": "sw"}, {"name": "r0"}],
        "host": [{"name": "a", "rack": "r1"}, {"name": "b", "rack": "r1"}],
        "link": links,
    }


@pytest.mark.parametrize(
    ("links", "field", "words"),
    [
        (
            [{"a": "a", "b": "sw"}, {"a": "b", "b": "sw", "rail": 16}],
            "link[1].rail",
            "0 to 15",
        ),
        ([{"a": "a", "b": "sw", "rail": 0}, {"a": "b", "b": "sw"}], "link", "no main link"),
        (
            [{"a": "a", "b": "sw"}, {"a": "b", "b": "sw"}, {"a": "sw", "b": "r0", "rail": 0}],
            "link[2].rail",
            "joins a host and a router",
        ),
    ],
)
def test_bad_rail_links_name_the_field(
    links: list[dict[str, object]], field: str, words: str
) -> None:
    with pytest.raises(TopologyError) as caught:
        parse(_topo(links), "topo.toml")
    text = str(caught.value)
    assert field in text and words in text, text
