"""Sysfs trees for the host path audit tests, built the way the kernel lays them out:
functions nested below ``sys/devices/pciDDDD:BB`` by their bridges, relative links in
``sys/bus/pci/devices``, ``sys/class/net`` and ``sys/class/infiniband``, a 4 KiB ``config``
file per function with a capability list (power management, PCI Express) and extended
capabilities (AER, then ACS when a bridge has one).

The documented layouts (docs/rails.md, "The affinity table"):

- ``hgx8``: 8 GPUs and 8 NICs on 4 PCIe switches, 2 sockets. Socket 0 (NUMA 0), host
  bridge ``pci0000:00``: switch A below root port 00:01.0 holds GPU0, GPU1, mlx5_0, mlx5_1;
  switch B below root port 00:02.0 is two-tier (a top switch with two leaf switches): one
  leaf holds GPU2 and mlx5_2, the other GPU3 and mlx5_3. Socket 1 (NUMA 1): switch C below
  host bridge ``pci0000:80`` holds GPU4, GPU5, mlx5_4, mlx5_5; switch D below host bridge
  ``pci0000:c0`` holds GPU6, GPU7, mlx5_6, mlx5_7.
- ``far_nic``: GPU0 and GPU1 in a switch on socket 0; the only NIC (mlx5_0) on socket 1.
"""

from __future__ import annotations

import os
from pathlib import Path

GEN5 = "32.0 GT/s PCIe"
GPU_CLASS = "0x030200"  # 3D controller
NIC_CLASS = "0x020000"  # ethernet
BRIDGE_CLASS = "0x060400"  # PCI-to-PCI bridge (root ports, switch ports)


def config_space(relaxed_ordering: bool = True, acs_ctl: int | None = None) -> bytes:
    """A PCIe function's 4 KiB config space: PM cap at 0x40 -> PCIe cap at 0x60 (Device
    Control at 0x68), extended caps AER at 0x100 -> ACS at 0x148 (control at 0x14E)."""
    cfg = bytearray(4096)
    cfg[0x06] = 0x10  # status: capabilities list
    cfg[0x34] = 0x40
    cfg[0x40:0x42] = bytes([0x01, 0x60])  # power management, next 0x60
    cfg[0x60:0x62] = bytes([0x10, 0x00])  # PCI Express, end of list
    devctl = 0x2810 if relaxed_ordering else 0x2800  # bit 4: enable relaxed ordering
    cfg[0x68:0x6A] = devctl.to_bytes(2, "little")
    aer_next = 0x148 if acs_ctl is not None else 0
    cfg[0x100:0x104] = (0x0001 | 1 << 16 | aer_next << 20).to_bytes(4, "little")
    if acs_ctl is not None:
        cfg[0x148:0x14C] = (0x000D | 1 << 16).to_bytes(4, "little")
        cfg[0x14C:0x14E] = (0x007F).to_bytes(2, "little")  # ACS capability: all
        cfg[0x14E:0x150] = acs_ctl.to_bytes(2, "little")
    return bytes(cfg)


class Tree:
    def __init__(self, root: Path, numa_nodes: int = 2) -> None:
        self.root = root
        self.sys = root / "sys"
        for d in ("bus/pci/devices", "class/net", "class/infiniband", "class/iommu"):
            (self.sys / d).mkdir(parents=True, exist_ok=True)
        for n in range(numa_nodes):
            (self.sys / "devices/system/node" / f"node{n}").mkdir(parents=True, exist_ok=True)
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet\n")

    def host_bridge(self, name: str) -> Path:
        where = self.sys / "devices" / name
        where.mkdir(parents=True, exist_ok=True)
        return where

    def function(
        self,
        parent: Path,
        bdf: str,
        cls: str,
        numa: int,
        vendor: str = "0x15b3",
        speed: tuple[str, str] = (GEN5, GEN5),
        width: tuple[int, int] = (16, 16),
        cfg: bytes | None = None,
    ) -> Path:
        where = parent / bdf
        where.mkdir()
        attrs = {
            "class": cls,
            "vendor": vendor,
            "numa_node": str(numa),
            "current_link_speed": speed[0],
            "max_link_speed": speed[1],
            "current_link_width": str(width[0]),
            "max_link_width": str(width[1]),
        }
        for name, value in attrs.items():
            (where / name).write_text(value + "\n")
        (where / "config").write_bytes(cfg if cfg is not None else config_space())
        self._link(self.sys / "bus/pci/devices" / bdf, where)
        return where

    def bridge(self, parent: Path, bdf: str, numa: int, acs_ctl: int | None = None) -> Path:
        cfg = config_space(relaxed_ordering=False, acs_ctl=acs_ctl)
        return self.function(parent, bdf, BRIDGE_CLASS, numa, vendor="0x1000", cfg=cfg)

    def gpu(self, parent: Path, bdf: str, numa: int) -> Path:
        return self.function(parent, bdf, GPU_CLASS, numa, vendor="0x10de")

    def nic(self, parent: Path, bdf: str, numa: int, rdma: str, netdev: str, **kw: object) -> Path:
        where = self.function(parent, bdf, NIC_CLASS, numa, **kw)  # type: ignore[arg-type]
        for cls, name in (("infiniband", rdma), ("net", netdev)):
            (where / cls / name).mkdir(parents=True)
            self._link(where / cls / name / "device", where)
            self._link(self.sys / "class" / cls / name, where / cls / name)
        return where

    def switch(self, parent: Path, upstream: str, downstream: list[str], numa: int) -> list[Path]:
        """A PCIe switch: its upstream port below ``parent``, the downstream ports below it."""
        up = self.bridge(parent, upstream, numa)
        return [self.bridge(up, d, numa) for d in downstream]

    @staticmethod
    def _link(link: Path, target: Path) -> None:
        os.symlink(os.path.relpath(target, link.parent), link)


def _switch_slots(t: Tree, parent: Path, bus: int, numa: int, domain: str = "0000") -> list[Path]:
    """Root port's switch with four downstream ports on bus ``bus + 1``."""
    return t.switch(
        parent,
        f"{domain}:{bus:02x}:00.0",
        [f"{domain}:{bus + 1:02x}:{i:02x}.0" for i in range(4)],
        numa,
    )


def hgx8(root: Path, x8_nic: str | None = None, acs_on_switch_b: bool = False) -> Tree:
    """The 8-GPU / 8-NIC layout above; ``x8_nic``: that NIC trained at x8 of x16."""
    t = Tree(root)
    n = iter(range(8))

    def nic(parent: Path, bdf: str, numa: int) -> None:
        i = next(n)
        width = (8, 16) if x8_nic == f"mlx5_{i}" else (16, 16)
        t.nic(parent, bdf, numa, f"mlx5_{i}", f"ens{i}np0", width=width)

    # socket 0: switch A
    hb0 = t.host_bridge("pci0000:00")
    a = _switch_slots(t, t.bridge(hb0, "0000:00:01.0", 0), 0x01, 0)
    t.gpu(a[0], "0000:03:00.0", 0)
    t.gpu(a[1], "0000:04:00.0", 0)
    nic(a[2], "0000:05:00.0", 0)
    nic(a[3], "0000:06:00.0", 0)
    # socket 0: switch B, two tiers
    acs = 0x001D if acs_on_switch_b else None  # SV, RR, CR, UF: what a VM host enables
    top_up = t.bridge(t.bridge(hb0, "0000:00:02.0", 0), "0000:10:00.0", 0)
    tops = [t.bridge(top_up, f"0000:11:{i:02x}.0", 0, acs_ctl=acs) for i in range(2)]
    leaf1 = t.switch(tops[0], "0000:12:00.0", ["0000:13:00.0", "0000:13:01.0"], 0)
    leaf2 = t.switch(tops[1], "0000:16:00.0", ["0000:17:00.0", "0000:17:01.0"], 0)
    t.gpu(leaf1[0], "0000:14:00.0", 0)
    t.gpu(leaf2[0], "0000:18:00.0", 0)
    nic(leaf1[1], "0000:15:00.0", 0)
    nic(leaf2[1], "0000:19:00.0", 0)
    # socket 1: switches C and D, each below its own host bridge
    for hb, bus in (("pci0000:80", 0x80), ("pci0000:c0", 0xC0)):
        root_port = t.bridge(t.host_bridge(hb), f"0000:{bus:02x}:01.0", 1)
        s = _switch_slots(t, root_port, bus + 1, 1)
        t.gpu(s[0], f"0000:{bus + 3:02x}:00.0", 1)
        t.gpu(s[1], f"0000:{bus + 4:02x}:00.0", 1)
        nic(s[2], f"0000:{bus + 5:02x}:00.0", 1)
        nic(s[3], f"0000:{bus + 6:02x}:00.0", 1)
    return t


# What ``nvidia-smi topo -m`` prints for hgx8 (its GPU rows, NIC columns).
HGX8_TOPO = """
        NIC0  NIC1  NIC2  NIC3  NIC4  NIC5  NIC6  NIC7
GPU0    PIX   PIX   PHB   PHB   SYS   SYS   SYS   SYS
GPU1    PIX   PIX   PHB   PHB   SYS   SYS   SYS   SYS
GPU2    PHB   PHB   PIX   PXB   SYS   SYS   SYS   SYS
GPU3    PHB   PHB   PXB   PIX   SYS   SYS   SYS   SYS
GPU4    SYS   SYS   SYS   SYS   PIX   PIX   NODE  NODE
GPU5    SYS   SYS   SYS   SYS   PIX   PIX   NODE  NODE
GPU6    SYS   SYS   SYS   SYS   NODE  NODE  PIX   PIX
GPU7    SYS   SYS   SYS   SYS   NODE  NODE  PIX   PIX
"""


# What ``nvidia-smi topo -m`` prints for far_nic (its GPU rows, NIC columns).
FAR_NIC_TOPO = """
        NIC0
GPU0    SYS
GPU1    SYS
"""


def far_nic(root: Path) -> Tree:
    """Two GPUs in a switch on socket 0, the only NIC below socket 1's host bridge."""
    t = Tree(root)
    s = _switch_slots(t, t.bridge(t.host_bridge("pci0000:00"), "0000:00:01.0", 0), 0x01, 0)
    t.gpu(s[0], "0000:03:00.0", 0)
    t.gpu(s[1], "0000:04:00.0", 0)
    root_port = t.bridge(t.host_bridge("pci0000:80"), "0000:80:01.0", 1)
    t.nic(root_port, "0000:81:00.0", 1, "mlx5_0", "ens1np0")
    return t
