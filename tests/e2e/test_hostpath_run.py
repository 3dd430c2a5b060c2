"""The host path audit through real agents: each agent reads its (built) sysfs tree and
answers the run's pre-flight; results.json carries ``hosts``, valid against the schema and
read back the same. What a peer sends is checked field by field (``hostpeer``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool, cli_env
from e2e_cli import netqual_here, write_inventory
from sysfs_trees import far_nic, hgx8

from netqual.agent import pcisysfs
from netqual.agent.wire import hostpeer
from netqual.base.auth import write_token
from netqual.base.errors import BadRequestError
from netqual.codec import hostpath as hostpath_codec
from netqual.files import schema
from netqual.model import hostpath
from netqual.results import load

PLAN = [
    *("--iterations", "300", "--warmup", "0", "--chunk", "64KiB", "--depth", "1"),
    "--allow-short-plan",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run for the tests below: gpu01 on the 8-GPU layout with a x8 NIC, gpu02 with its
    only NIC on the other socket."""
    tmp = tmp_path_factory.mktemp("hostrun")
    trees = {"gpu01": hgx8(tmp / "gpu01", x8_nic="mlx5_3"), "gpu02": far_nic(tmp / "gpu02")}
    write_token(tmp / "token")
    pool = AgentPool(tmp, tmp / "token")
    try:
        started = pool.start_many(
            [(name, "--sysfs-root", str(tree.root)) for name, tree in trees.items()]
        )
        inventory = tmp / "inventory.toml"
        write_inventory(inventory, started, tmp / "token")
        out = tmp / "out"
        done = netqual_here("run", str(inventory), "--out", str(out), *PLAN)
        assert done.returncode == 0, done.stderr  # a completed run, whatever its verdicts
        (out / "stdout.txt").write_text(done.stdout)
    finally:
        pool.close()
    return out


def test_results_carry_each_agents_audit(run_dir: Path) -> None:
    doc = json.loads((run_dir / "results.json").read_text())
    schema.validate(doc, "results.json")
    hosts = doc["hosts"]
    assert sorted(hosts) == ["gpu01", "gpu02"]
    classes = {(a["gpu"], a["nic"]): a["class"] for a in hosts["gpu01"]["affinity"]}
    assert classes[("GPU0", "mlx5_0")] == "PIX" and classes[("GPU2", "mlx5_3")] == "PXB"
    assert classes[("GPU0", "mlx5_2")] == "PHB" and classes[("GPU4", "mlx5_6")] == "NODE"
    assert classes[("GPU0", "mlx5_7")] == "SYS"
    mlx5_3 = next(n for n in hosts["gpu01"]["nics"] if n["name"] == "mlx5_3")
    assert mlx5_3["link"] == {
        "speed_gts": 32.0,
        "max_speed_gts": 32.0,
        "width": 8,
        "max_width": 16,
        "full": False,
    }
    assert [a["class"] for a in hosts["gpu02"]["affinity"]] == ["SYS", "SYS"]


def test_the_run_and_the_gate_say_what_is_wrong(run_dir: Path) -> None:
    flat = " ".join((run_dir / "stdout.txt").read_text().split())
    assert (
        "host path: 3 findings: gpu01 mlx5_3: 0000:19:00.0: trained below its maximum: 32 GT/s "
        "x8 of 32 GT/s x16 (pcie_link_full); gpu02 GPU0: no NIC below a PCIe switch it shares "
        "(best mlx5_0 SYS) (nic_affinity) (+1 more: netqual report --html)" in flat
    )
    profile = run_dir / "hosts.toml"
    profile.write_text(
        "[profile]\nname = 'hosts'\n[limits]\nnic_affinity = true\npcie_link_full = true\n"
    )
    gate = netqual_here("gate", str(run_dir / "results.json"), "--profile", str(profile))
    assert gate.returncode == 1, gate.stderr
    assert "GATE FAILED" in gate.stdout and "(nic_affinity, pcie_link_full)" in gate.stdout
    assert "gpu02  GPU1: no NIC below a PCIe switch it shares (best mlx5_0 SYS)" in gate.stdout


def test_results_file_reads_back_the_same_audit(run_dir: Path, tmp_path: Path) -> None:
    results = load(run_dir / "results.json")
    by_node = {h.node: h for h in results.hosts}
    expected = pcisysfs.audit(hgx8(tmp_path, x8_nic="mlx5_3").root, node="gpu01")
    assert by_node["gpu01"] == expected


def _audit_doc(tmp_path: Path) -> dict[str, Any]:
    return hostpath_codec.to_dict(pcisysfs.audit(far_nic(tmp_path).root, node="gpu02"))


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["gpus"][0].update(name="GPU0\x1b[31m"), "hostpath.gpus[0].name"),
        (lambda d: d["nics"][0]["link"].update(width=10**9), "hostpath.nics[0].link.width"),
        (lambda d: d["nics"][0].update(netdevs=["a b"]), "hostpath.nics[0].netdevs[0]"),
        (lambda d: d["affinity"][0].update({"class": "NEAR"}), "hostpath.affinity[0].class"),
        (lambda d: d["affinity"][1].update(nic="mlx5_9"), "hostpath.affinity[1]"),
        (lambda d: d.update(gpus=[{}] * 300), "hostpath.gpus"),
        (lambda d: d["iommu"].update(mode="maybe"), "hostpath.iommu.mode"),
        (
            lambda d: d["nics"][0].update(relaxed_ordering="yes"),
            "hostpath.nics[0].relaxed_ordering",
        ),
    ],
)
def test_a_bad_field_from_a_peer_is_named(tmp_path: Path, mutate: Any, field: str) -> None:
    doc = _audit_doc(tmp_path)
    mutate(doc)
    with pytest.raises(BadRequestError) as caught:
        hostpeer.from_peer(doc, "gpu02", "gpu02")
    assert caught.value.field == field


def test_what_a_peer_sends_reads_back_as_sent(tmp_path: Path) -> None:
    doc = _audit_doc(tmp_path)
    assert hostpeer.from_peer(doc, "gpu02", "gpu02") == hostpath_codec.from_dict("gpu02", doc)
    assert hostpeer.from_peer({}, "p", "n") == hostpath.HostAudit("n")


def test_doctor_shows_this_hosts_audit_and_findings(tmp_path: Path) -> None:
    root = hgx8(tmp_path, x8_nic="mlx5_3").root
    cmd = [sys.executable, "-m", "netqual", "doctor", "--sysfs-root", str(root)]
    done = subprocess.run(
        cmd, env=cli_env(), capture_output=True, text=True, timeout=60, check=False
    )
    lines = done.stdout.splitlines()
    at = lines.index("  host path   8 GPU(s), 8 NIC(s), IOMMU off (docs/rails.md)")
    assert lines[at + 1 : at + 4] == [
        "  GPU0        0000:03:00.0 NUMA 0, best NIC mlx5_0 PIX",
        "  GPU1        0000:04:00.0 NUMA 0, best NIC mlx5_0 PIX",
        "  GPU2        0000:14:00.0 NUMA 0, best NIC mlx5_2 PIX",
    ]
    assert (
        "! host path: mlx5_3: pcie_link_full: 0000:19:00.0: trained below its maximum: "
        "32 GT/s x8 of 32 GT/s x16" in " ".join(done.stdout.split())
    )
    done = subprocess.run(
        [*cmd, "--json"], env=cli_env(), capture_output=True, text=True, check=False
    )
    report = json.loads(done.stdout)["nodes"]
    (only,) = report.values()
    assert len(only["hostpath"]["affinity"]) == 64
