"""The host path audit on sysfs trees built for documented layouts (tests/support/sysfs_trees.py):
affinity classes equal the ``nvidia-smi topo -m`` matrix written in docs/rails.md, a NIC on
the other socket and a x8-trained NIC are flagged, and every missing field is "unknown"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from paths import REPO
from sysfs_trees import FAR_NIC_TOPO, HGX8_TOPO, config_space, far_nic, hgx8

from netqual.agent import pcisysfs
from netqual.analysis import hostpath
from netqual.codec.hostpath import from_dict, to_dict
from netqual.model.hostpath import HostAudit, gpu_rail_table
from netqual.model.node import Nic

DOCS = REPO / "docs"


def topo_matrix(audit: HostAudit) -> str:
    """The audit as ``nvidia-smi topo -m`` prints its GPU rows and NIC columns."""
    cols = [f"NIC{i}" for i in range(len(audit.nics))]
    lines = ["        " + "  ".join(f"{c:<4}" for c in cols).rstrip()]
    for gpu in audit.gpus:
        cells = [f"{audit.cls(gpu.name, n.name):<4}" for n in audit.nics]
        lines.append(f"{gpu.name:<8}" + "  ".join(cells).rstrip())
    return "\n".join(lines)


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_hgx8_classes_equal_the_nvidia_smi_matrix(tmp_path: Path) -> None:
    audit = pcisysfs.audit(hgx8(tmp_path).root, node="gpu01")
    assert [g.name for g in audit.gpus] == [f"GPU{i}" for i in range(8)]
    assert [n.name for n in audit.nics] == [f"mlx5_{i}" for i in range(8)]
    assert _rows(topo_matrix(audit)) == _rows(HGX8_TOPO)


def test_the_docs_show_the_same_matrices() -> None:
    text = (DOCS / "rails.md").read_text()
    assert HGX8_TOPO.strip() in text
    assert FAR_NIC_TOPO.strip() in text


def test_hgx8_paths_numa_and_links(tmp_path: Path) -> None:
    audit = pcisysfs.audit(hgx8(tmp_path).root, node="gpu01")
    gpu2 = audit.gpus[2]
    assert gpu2.bdf == "0000:14:00.0"
    assert gpu2.host_bridge == "pci0000:00"
    assert gpu2.bridges == (
        "0000:00:02.0",
        "0000:10:00.0",
        "0000:11:00.0",
        "0000:12:00.0",
        "0000:13:00.0",
    )
    assert [d.numa_node for d in audit.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpu2.vendor == "nvidia"
    assert audit.nics[0].netdevs == ("ens0np0",) and audit.nics[0].rdma_devices == ("mlx5_0",)
    assert all(d.link.full for d in (*audit.gpus, *audit.nics))
    assert audit.nics[0].link.speed_gts == 32.0 and audit.nics[0].link.width == 16
    # every GPU's best NIC is the one in its own (leaf) switch
    assert [audit.best_nic(g.name) for g in audit.gpus] == [
        (f"mlx5_{i - i % 2}", "PIX") if i not in (2, 3) else (f"mlx5_{i}", "PIX") for i in range(8)
    ]
    assert hostpath.findings(audit) == []


def test_nic_on_the_other_socket_is_sys_and_flagged(tmp_path: Path) -> None:
    audit = pcisysfs.audit(far_nic(tmp_path).root, node="gpu02")
    assert _rows(topo_matrix(audit)) == _rows(FAR_NIC_TOPO)
    assert [(a.gpu, a.nic, a.cls) for a in audit.affinity] == [
        ("GPU0", "mlx5_0", "SYS"),
        ("GPU1", "mlx5_0", "SYS"),
    ]
    found = hostpath.affinity_findings(audit)
    assert [(f.rule, f.subject) for f in found] == [
        ("nic_affinity", "GPU0"),
        ("nic_affinity", "GPU1"),
    ]
    assert "best mlx5_0 SYS" in found[0].text


def test_x8_trained_nic_is_flagged(tmp_path: Path) -> None:
    audit = pcisysfs.audit(hgx8(tmp_path, x8_nic="mlx5_3").root, node="gpu01")
    found = hostpath.link_findings(audit)
    assert [(f.rule, f.subject) for f in found] == [("pcie_link_full", "mlx5_3")]
    assert found[0].text == ("0000:19:00.0: trained below its maximum: 32 GT/s x8 of 32 GT/s x16")


def test_rails_compared_with_the_best_nic(tmp_path: Path) -> None:
    audit = pcisysfs.audit(hgx8(tmp_path).root, node="gpu01")
    rails = [Nic(f"ens{i}np0", "10.0.0.1", i, None) for i in range(8)]
    table = gpu_rail_table(audit, rails)
    assert all(r.rail_is_best for r in table)
    assert hostpath.affinity_findings(audit, rails) == []
    # rails 2 and 3 wired to the wrong leaf switch: PXB is allowed, not the best
    rails[2], rails[3] = (
        Nic("x", "10.0.0.1", 2, "mlx5_3"),
        Nic("y", "10.0.0.1", 3, "mlx5_2"),
    )
    found = hostpath.affinity_findings(audit, rails)
    assert [(f.rule, f.subject) for f in found] == [
        ("rail_not_best", "GPU2"),
        ("rail_not_best", "GPU3"),
    ]
    assert found[0].text == "its rail NIC mlx5_3 is PXB; mlx5_2 is PIX"
    # a rail on the other socket fails nic_affinity; a NIC the host lacks too
    rails[0] = Nic("ens4np0", "10.0.0.1", 0, None)
    rails[1] = Nic("gone0", "10.0.0.1", 1, None)
    found = hostpath.affinity_findings(audit, rails)
    assert [(f.rule, f.subject, f.text) for f in found[:2]] == [
        ("nic_affinity", "GPU0", "its rail NIC mlx5_4 is SYS (best mlx5_0 PIX)"),
        ("nic_affinity", "GPU1", "its rail's NIC is not on this host (best mlx5_0 PIX)"),
    ]


def test_four_rails_for_eight_gpus_pair_them(tmp_path: Path) -> None:
    audit = pcisysfs.audit(hgx8(tmp_path).root, node="gpu01")
    rails = [Nic(f"ens{i}np0", "10.0.0.1", i // 2, None) for i in (0, 2, 4, 6)]
    table = gpu_rail_table(audit, rails)
    assert [r.rail_nic for r in table] == [f"mlx5_{i}" for i in (0, 0, 2, 2, 4, 4, 6, 6)]
    assert [r.rail_cls for r in table] == ["PIX", "PIX", "PIX", "PXB", "PIX", "PIX", "PIX", "PIX"]


def test_acs_redirect_and_relaxed_ordering_from_config_space(tmp_path: Path) -> None:
    root = hgx8(tmp_path, acs_on_switch_b=True).root
    audit = pcisysfs.audit(root, node="gpu01")
    nic2 = audit.nics[2]
    assert nic2.relaxed_ordering is True
    assert [(b.bdf, b.acs_redirect, b.relaxed_ordering) for b in nic2.upstream] == [
        ("0000:00:02.0", False, False),
        ("0000:10:00.0", False, False),
        ("0000:11:00.0", True, False),
        ("0000:12:00.0", False, False),
        ("0000:13:01.0", False, False),
    ]
    found = hostpath.other_findings(audit)
    assert [(f.rule, f.subject) for f in found] == [
        ("acs_redirect", "mlx5_2"),
        ("acs_redirect", "mlx5_3"),
    ]
    # only the redirect bits count: source validation and upstream forwarding alone do not
    assert pcisysfs.acs_redirect(config_space(acs_ctl=0x0011)) is False
    assert pcisysfs.acs_redirect(config_space(acs_ctl=0x0008)) is True
    assert pcisysfs.relaxed_ordering(config_space(relaxed_ordering=False)) is False


def test_unreadable_fields_are_unknown_never_an_error(tmp_path: Path) -> None:
    root = hgx8(tmp_path).root
    nic = root / "sys/bus/pci/devices/0000:05:00.0"
    for name in ("current_link_width", "numa_node", "max_link_speed"):
        (nic / name).unlink()
    cfg = (nic / "config").read_bytes()
    (nic / "config").write_bytes(cfg[:64])  # what an unprivileged reader gets
    (root / "sys/bus/pci/devices/0000:06:00.0/current_link_speed").write_text("Unknown\n")
    bridge = root / "sys/bus/pci/devices/0000:02:02.0/config"
    bridge.write_bytes(bytes(4096))  # no capability list at all
    os.symlink("/nonexistent", root / "sys/class/net/dangling")
    audit = pcisysfs.audit(root, node="gpu01")
    nic0 = audit.nics[0]
    assert nic0.numa_node is None and nic0.link.width is None and nic0.link.full is None
    assert nic0.relaxed_ordering is None
    assert nic0.upstream[-1].relaxed_ordering is None and nic0.upstream[-1].acs_redirect is False
    assert audit.nics[1].link.speed_gts is None
    assert audit.cls("GPU0", "mlx5_0") == "PIX"  # the path needs no NUMA node
    doc = to_dict(audit)
    assert doc["nics"][0]["numa_node"] == "unknown"
    assert doc["nics"][0]["link"] == {
        "speed_gts": 32.0,
        "max_speed_gts": "unknown",
        "width": "unknown",
        "max_width": 16,
        "full": "unknown",
    }
    assert from_dict("gpu01", doc) == audit
    assert [f.text for f in hostpath.link_findings(audit)][:1] == [
        "0000:05:00.0: link unknown: 32 GT/s, width unknown (max: speed unknown, x16)"
    ]


def test_unknown_numa_across_host_bridges_is_unknown(tmp_path: Path) -> None:
    root = hgx8(tmp_path).root
    (root / "sys/bus/pci/devices/0000:85:00.0/numa_node").write_text("-1\n")
    audit = pcisysfs.audit(root, node="gpu01")
    assert audit.cls("GPU0", "mlx5_4") == "unknown"
    assert audit.cls("GPU6", "mlx5_4") == "unknown"
    assert audit.cls("GPU4", "mlx5_4") == "PIX"


def test_single_node_host_reads_minus_one_as_node_0(tmp_path: Path) -> None:
    root = far_nic(tmp_path).root
    (root / "sys/devices/system/node/node1").rmdir()
    (root / "sys/bus/pci/devices/0000:81:00.0/numa_node").write_text("-1\n")
    (root / "sys/bus/pci/devices/0000:03:00.0/numa_node").write_text("-1\n")
    audit = pcisysfs.audit(root, node="one")
    assert audit.gpus[0].numa_node == 0
    assert [a.cls for a in audit.affinity] == ["NODE", "NODE"]


def test_empty_or_missing_tree_gives_an_empty_audit(tmp_path: Path) -> None:
    audit = pcisysfs.audit(tmp_path / "nothing", node="n")
    assert (audit.gpus, audit.nics, audit.affinity) == ((), (), ())
    assert audit.iommu.mode == "unknown" and audit.iommu.units is None
    assert to_dict(audit)["iommu"] == {"mode": "unknown", "units": "unknown", "cmdline": []}


@pytest.mark.parametrize(
    ("types", "units", "mode"),
    [({"7": "identity"}, 2, "passthrough"), ({"7": "DMA-FQ", "8": "identity"}, 2, "translated")],
)
def test_iommu_mode_from_group_types(
    tmp_path: Path, types: dict[str, str], units: int, mode: str
) -> None:
    t = hgx8(tmp_path)
    for n in range(units):
        (t.sys / "class/iommu" / f"dmar{n}").mkdir()
    for group, kind in types.items():
        (t.sys / "kernel/iommu_groups" / group).mkdir(parents=True)
        (t.sys / "kernel/iommu_groups" / group / "type").write_text(kind + "\n")
    (t.root / "proc/cmdline").write_text("ro intel_iommu=on iommu=pt quiet\n")
    got = pcisysfs.iommu(t.root)
    assert (got.mode, got.units, got.cmdline) == (mode, units, ("intel_iommu=on", "iommu=pt"))
    assert pcisysfs.iommu(far_nic(tmp_path / "b").root).mode == "off"


def test_a_netdev_below_the_function_makes_it_a_nic(tmp_path: Path) -> None:
    """virtio: class 0x020000 is not promised, the netdev hangs below ``virtioN``."""
    t = far_nic(tmp_path)
    hb = t.host_bridge("pci0000:00")
    fn = t.function(hb, "0000:00:03.0", "0x018000", 0, vendor="0x1af4")
    (fn / "virtio2/net/eth0").mkdir(parents=True)
    os.symlink("../../../virtio2", fn / "virtio2/net/eth0/device")
    os.symlink(
        os.path.relpath(fn / "virtio2/net/eth0", t.sys / "class/net"), t.sys / "class/net/eth0"
    )
    audit = pcisysfs.audit(t.root, node="vm")
    assert [(n.name, n.bdf, n.netdevs) for n in audit.nics] == [
        ("eth0", "0000:00:03.0", ("eth0",)),
        ("mlx5_0", "0000:81:00.0", ("ens1np0",)),
    ]
    assert audit.cls("GPU0", "eth0") == "PHB"


def test_a_link_out_of_the_tree_is_not_followed(tmp_path: Path) -> None:
    t = far_nic(tmp_path)
    os.symlink("/sys/devices", t.sys / "bus/pci/devices/0000:ff:00.0")
    assert pcisysfs.function_dir(t.root, "0000:ff:00.0") is None
    assert pcisysfs.pcie_path(t.root, "0000:ff:00.0") == (None, ())
    assert len(pcisysfs.audit(t.root, node="n").nics) == 1


def test_this_host_audits_without_error() -> None:
    audit = pcisysfs.audit(Path("/"), node="here")
    assert to_dict(audit)["iommu"]["mode"] in ("off", "passthrough", "translated", "unknown")
