"""The fleet ``mtu`` per inventory NIC (docs/evidence.md): with ``nics`` listed, a node's
MTU is compared per rail (``mtu[railR]``), so a management NIC unlike its data NICs is no
outlier and a data NIC unlike the other nodes' is, named with its node and NIC; without
``nics`` the node's ``mtu`` covers every up interface, as before. The outlier's NIC goes
through the results file and into the gate's finding."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

from factories import make_results, write_results

from netqual.analysis import fleet
from netqual.gate import evaluate as gate_evaluate
from netqual.gate.profile import parse_profile_text
from netqual.model.fleet import ConfigSnapshot, FleetPolicy
from netqual.model.node import Nic
from netqual.results import load


def host(node: str, mgmt: int, rail0: int, rail1: int, main: str | None = None) -> ConfigSnapshot:
    """What an agent reports: eno1 (management), ens2 and ens3 (rails 0 and 1), all up;
    ``main``: the interface its address uses, when the agent could tell."""
    values = {"nic.eno1.mtu": str(mgmt), "nic.ens2.mtu": str(rail0), "nic.ens3.mtu": str(rail1)}
    values["mtu"] = ",".join(sorted({str(v) for v in (mgmt, rail0, rail1)}, key=int))
    if main is not None:
        values["main_interface"] = main
    return ConfigSnapshot(node, tuple(sorted(values.items())))


NICS = (Nic("ens2", "198.18.200.1", 0), Nic("ens3", "198.18.201.1", 1))


def test_a_management_nic_unlike_the_data_nics_is_no_outlier() -> None:
    # h3's management NIC is at 1500, the others' at 9000: every node reads a different mtu
    snaps = [
        host("h1", 9000, 9000, 9000),
        host("h2", 9000, 9000, 9000),
        host("h3", 1500, 9000, 9000),
    ]
    without = fleet.evaluate(snaps)  # no inventory nics: today's rule, every up interface
    assert [o.text for o in without.outliers] == ["h3: mtu 1500,9000 (majority 9000 on h1, h2)"]
    nics = {s.node: NICS for s in snaps}
    assert fleet.evaluate(snaps, nics=nics).outliers == ()
    # an expected mtu holds for the listed NICs, not the management one
    assert fleet.evaluate(snaps, policy=FleetPolicy((("mtu", "9000"),)), nics=nics).outliers == ()


def test_a_data_nic_unlike_the_others_is_named_with_node_and_nic() -> None:
    snaps = [
        host("h1", 1500, 9000, 9000),
        host("h2", 1500, 9000, 1500),
        host("h3", 1500, 9000, 9000),
    ]
    nics = {s.node: NICS for s in snaps}
    found = fleet.evaluate(snaps, nics=nics)
    assert [o.text for o in found.outliers] == [
        "h2: mtu[rail1] 1500 on ens3 (majority 9000 on h1, h3)"
    ]
    assert found.outliers[0].nic == "ens3"
    expected = fleet.evaluate(snaps, policy=FleetPolicy((("mtu", "9000"),)), nics=nics)
    assert [o.text for o in expected.outliers] == ["h2: mtu[rail1] 1500 on ens3 (expected 9000)"]
    # a listed NIC the node does not report: unknown, no majority claim, fails an expectation
    gone = {**nics, "h1": (Nic("ens9", "198.18.200.1", 0), NICS[1])}
    assert [o.text for o in fleet.evaluate(snaps, nics=gone).outliers] == [found.outliers[0].text]
    missing = fleet.evaluate(snaps, policy=FleetPolicy((("mtu", "9000"),)), nics=gone)
    assert "h1: mtu[rail0] unknown on ens9 (expected 9000)" in [o.text for o in missing.outliers]


def test_the_outliers_nic_is_kept_in_results_and_named_by_the_gate(tmp_path: Path) -> None:
    results = make_results(3, samples=200, all_safe=True)
    names = [n.name for n in results.nodes]
    snaps = [host(names[0], 1500, 9000, 9000), host(names[1], 9000, 9000, 9000)]
    snaps.append(host(names[2], 1500, 4200, 9000))
    found = fleet.evaluate(snaps, nics={n: NICS for n in names})
    path = write_results(tmp_path / "r.json", dataclasses.replace(results, fleet=found))
    back = load(path).fleet
    assert back is not None and back.outliers == found.outliers
    assert back.outliers[0].text.startswith(f"{names[2]}: mtu[rail0] 4200 on ens2 (majority 9000")
    profile = parse_profile_text("[limits]\nfleet_consistent = true\n", "p.toml")
    report = gate_evaluate(load(path), profile, today=dt.date(2026, 12, 1))
    rule = next(o for o in report.outcomes if o.rule == "fleet_consistent")
    assert rule.failing[0].src == names[2]
    assert rule.failing[0].detail.startswith("mtu[rail0] 4200 on ens2 (majority 9000 on ")


def test_the_main_interface_is_compared_beside_the_nics() -> None:
    """The node's address's interface is what bipartite and fan-in runs measure: with
    ``nics`` listed it is compared as ``mtu[main]`` (gpu05's 1500 once passed unnoticed
    beside its 9000 rails, ``check --fleet`` exiting 0 with ``[fleet] mtu = 9000``)."""
    snaps = [
        host("h1", 9000, 9000, 9000, main="eno1"),
        host("h2", 9000, 9000, 9000, main="eno1"),
        host("h3", 1500, 9000, 9000, main="eno1"),
    ]
    nics = {s.node: NICS for s in snaps}
    found = fleet.evaluate(snaps, nics=nics)
    assert [o.text for o in found.outliers] == [
        "h3: mtu[main] 1500 on eno1 (majority 9000 on h1, h2)"
    ]
    assert found.outliers[0].nic == "eno1"
    expected = fleet.evaluate(snaps, policy=FleetPolicy((("mtu", "9000"),)), nics=nics)
    assert [o.text for o in expected.outliers] == ["h3: mtu[main] 1500 on eno1 (expected 9000)"]
    # a main interface that is one of the listed NICs is compared once, as that NIC
    on_rail = [host(s.node, 9000, 9000, 9000, main="ens2") for s in snaps]
    keys = fleet.compared(on_rail[0], NICS)
    assert "mtu[main]" not in keys and keys["mtu[rail0]"] == ("9000", "ens2")
