"""A node read from a results file meets the inventory's rules (base.names): its name, an
endpoint's NODE/NIC, its NICs and addresses; a file that breaks one stops with the results
file's wording (file, field, the rule's own words), as a hand-edited inventory would."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from factories import make_results, write_results
from railsdata import rail_results

from netqual.base.errors import ResultsFileError
from netqual.base.names import name_problem, nic_name_problem
from netqual.results import load


def _edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None], rails: bool = False) -> Path:
    path = write_results(tmp_path / "results.json", rail_results() if rails else make_results(3))
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def _fails(path: Path, field: str, problem: str) -> None:
    with pytest.raises(ResultsFileError) as err:
        load(path)
    assert (err.value.field, err.value.problem) == (field, problem)
    assert str(err.value) == f"{path}: {field}: {problem}"


def test_a_valid_file_with_endpoints_loads(tmp_path: Path) -> None:
    nodes = load(_edited(tmp_path, lambda d: None, rails=True)).nodes
    assert nodes[0].name == "h1/eth0" and nodes[0].agent == "h1"


def test_a_node_name_outside_the_rules_is_refused(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["nodes"][1]["name"] = "gpu 02<script>"

    _fails(_edited(tmp_path, edit), "nodes[1].name", str(name_problem("gpu 02<script>")))


def test_a_duplicate_node_is_refused(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["nodes"][2]["name"] = d["nodes"][0]["name"]

    name = make_results(3).nodes[0].name
    _fails(
        _edited(tmp_path, edit), "nodes[2].name", f"duplicate node name {name!r} (also nodes[0])"
    )


def test_an_endpoint_is_named_after_its_node_and_nic(tmp_path: Path) -> None:
    def other_node(d: dict[str, Any]) -> None:
        d["nodes"][0]["name"] = "h2/eth0"

    _fails(_edited(tmp_path, other_node, rails=True), "nodes[0].name",
           "'h2/eth0' is not an endpoint of node 'h1' (NODE/NIC)")  # fmt: skip

    def bad_nic(d: dict[str, Any]) -> None:
        d["nodes"][0]["name"] = "h1/eth:0"

    _fails(_edited(tmp_path, bad_nic, rails=True), "nodes[0].name", str(nic_name_problem("eth:0")))


def test_nic_names_and_addresses_follow_the_rules(tmp_path: Path) -> None:
    def nic(d: dict[str, Any]) -> None:
        d["nodes"][0]["nic"]["name"] = "eth0;rm"

    _fails(
        _edited(tmp_path, nic, rails=True), "nodes[0].nic.name", str(nic_name_problem("eth0;rm"))
    )

    def address(d: dict[str, Any]) -> None:
        d["nodes"][1]["address"] = "not an address"

    _fails(_edited(tmp_path, address), "nodes[1].address",
           "'not an address' is not an IP address or host name")  # fmt: skip


def test_a_path_to_an_unlisted_node_is_named_by_the_same_rules(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["paths"][2]["dst"] = "@SUM(1+1)"

    _fails(_edited(tmp_path, edit), "paths[2].dst", str(name_problem("@SUM(1+1)")))
