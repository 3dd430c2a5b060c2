"""Gate rules ``nic_affinity`` and ``pcie_link_full`` over results whose ``hosts`` come from
sysfs trees of the documented layouts (tests/support/sysfs_trees.py), through ``netqual gate``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from cli_helpers import netqual
from factories import make_results, write_results
from sysfs_trees import far_nic, hgx8

from netqual.agent import pcisysfs
from netqual.files import schema
from netqual.model.hostpath import HostAudit
from netqual.model.node import Nic
from netqual.table.run import Results

PROFILE = """
[profile]
name = "hosts"
[limits]
nic_affinity = true
pcie_link_full = true
"""


def _results(tmp_path: Path, trees: dict[str, Path], rails: bool = True) -> Results:
    """Four nodes (gpu01..03, stor01); ``trees``: node -> sysfs root its audit reads.
    With ``rails``, GPU nodes list mlx5_0..7 on rails 0..7."""
    base = make_results(4, all_safe=True)
    nics = tuple(Nic(f"ens{i}np0", f"10.{i}.0.1", i, f"mlx5_{i}") for i in range(8))
    nodes = tuple(
        dataclasses.replace(n, nics=nics) if rails and n.name.startswith("gpu") else n
        for n in base.nodes
    )
    hosts = tuple(pcisysfs.audit(root, node) for node, root in trees.items())
    return dataclasses.replace(base, nodes=nodes, hosts=hosts)


def _gate(tmp_path: Path, results: Results, profile: str = PROFILE) -> tuple[int, str]:
    write_results(tmp_path / "r.json", results)
    (tmp_path / "p.toml").write_text(profile)
    r = netqual("gate", "r.json", "--profile", "p.toml", cwd=tmp_path)
    return r.returncode, r.stdout + r.stderr


def test_far_nic_and_x8_nic_fail_their_rules(tmp_path: Path) -> None:
    trees = {
        "gpu01": hgx8(tmp_path / "a", x8_nic="mlx5_3").root,
        "gpu02": far_nic(tmp_path / "b").root,
        "gpu03": hgx8(tmp_path / "c").root,
        "stor01": tmp_path / "empty",
    }
    code, out = _gate(tmp_path, _results(tmp_path, trees, rails=False))
    assert code == 1, out
    assert "nic_affinity" in out and "pcie_link_full" in out
    assert "  gpu02  GPU0: no NIC below a PCIe switch it shares (best mlx5_0 SYS)" in out
    assert "  gpu02  GPU1: no NIC below a PCIe switch it shares" in out
    assert (
        "gpu01 mlx5_3: 0000:19:00.0: trained below its maximum: 32 GT/s x8 of "
        "32 GT/s x16" in " ".join(out.split())
    )
    assert "GATE FAILED" in out


def test_rails_on_switch_local_nics_pass(tmp_path: Path) -> None:
    trees = {n: hgx8(tmp_path / n).root for n in ("gpu01", "gpu02", "gpu03")}
    trees["stor01"] = tmp_path / "empty"  # no GPU, no NIC: nothing to fail
    code, out = _gate(tmp_path, _results(tmp_path, trees))
    assert code == 0, out
    assert "24 GPU(s) on 4 node(s) judged" in out
    assert "48 PCIe link(s) on 4 node(s) judged" in out


def test_a_rail_on_the_other_socket_fails(tmp_path: Path) -> None:
    trees = {n: hgx8(tmp_path / n).root for n in ("gpu01", "gpu02", "gpu03")}
    results = _results(tmp_path, trees)
    swapped = tuple(Nic(f"ens{i}np0", f"10.{i}.0.1", (i + 4) % 8, f"mlx5_{i}") for i in range(8))
    nodes = tuple(
        dataclasses.replace(n, nics=swapped) if n.name == "gpu03" else n for n in results.nodes
    )
    code, out = _gate(tmp_path, dataclasses.replace(results, nodes=nodes))
    assert code == 1, out
    assert "  gpu03  GPU0: its rail NIC mlx5_4 is SYS (best mlx5_0 PIX)" in out
    assert "9 findings: first gpu03 GPU0" in " ".join(out.split())
    # the results file says it per GPU, for readers other than the gate
    doc = json.loads((tmp_path / "r.json").read_text())
    schema.validate(doc, "r.json")
    gpu0 = doc["hosts"]["gpu03"]["gpus"][0]
    assert {k: gpu0[k] for k in ("best_nic", "best_class", "rail_nic", "rail_class")} == {
        "best_nic": "mlx5_0",
        "best_class": "PIX",
        "rail_nic": "mlx5_4",
        "rail_class": "SYS",
    }
    assert gpu0["rail_is_best"] is False
    assert doc["hosts"]["gpu01"]["gpus"][2]["rail_is_best"] is True


def test_without_audits_or_with_a_bad_one_the_rules_fail(tmp_path: Path) -> None:
    code, out = _gate(tmp_path, make_results(4, all_safe=True))
    assert code == 1
    assert "the results have no host path audit" in " ".join(out.split())
    trees = {n: hgx8(tmp_path / n).root for n in ("gpu01", "gpu02")}
    results = _results(tmp_path, trees)
    broken = HostAudit("gpu03", error="gpu03: hostpath.gpus[0].name: holds a control character")
    code, out = _gate(tmp_path, dataclasses.replace(results, hosts=(*results.hosts, broken)))
    assert code == 1
    flat = " ".join(out.split())
    assert "gpu03 no host path audit: gpu03: hostpath.gpus[0].name" in flat
    assert "stor01 no host path audit" in flat


def test_a_scope_judges_its_nodes_only(tmp_path: Path) -> None:
    trees = {"gpu01": hgx8(tmp_path / "a").root, "gpu02": far_nic(tmp_path / "b").root}
    profile = """
[profile]
name = "hosts"
[[scope]]
name = "gpu01 only"
nodes = ["gpu01"]
nic_affinity = true
"""
    code, out = _gate(tmp_path, _results(tmp_path, trees, rails=False), profile)
    assert code == 0, out
    assert "gpu01 only: nic_affinity" in out
    assert "8 GPU(s) on 1 node(s) judged" in out
