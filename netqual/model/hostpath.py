"""The host path audit as records: GPUs and NICs of one node with their PCIe path, NUMA
node and link, and the affinity class of every GPU-NIC pair (docs/rails.md).

Classes, best first, with the names and rules of ``nvidia-smi topo -m``:

- ``PIX``: the path crosses at most one PCIe switch (both devices below the downstream
  ports of the same switch; a switch is its upstream port and its downstream ports);
- ``PXB``: the path crosses several switches but not the host bridge (the two PCIe
  paths share a bridge below the root complex);
- ``PHB``: the two paths meet only at the PCIe host bridge (same root complex);
- ``NODE``: different host bridges of the same NUMA node;
- ``SYS``: different NUMA nodes (the path crosses the SMP interconnect).

Anything sysfs did not say is ``None`` here and ``"unknown"`` in the results file, never an
error: an audit that cannot read a field still reports the rest. ``netqual.agent.pcisysfs``
reads these records from a sysfs tree; ``netqual.codec.hostpath`` is their JSON form.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.model.node import Nic

AFFINITY_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")  # best first
NEAR_CLASSES = ("PIX", "PXB")  # a NIC the GPU reaches without the root complex
UNKNOWN = "unknown"


@dataclass(frozen=True)
class PcieLink:
    """Negotiated and maximum link of one PCIe function (``*_link_speed``, ``*_link_width``)."""

    speed_gts: float | None = None
    max_speed_gts: float | None = None
    width: int | None = None
    max_width: int | None = None

    @property
    def full(self) -> bool | None:
        """Trained at its maximum speed and width; None when sysfs did not say."""
        if None in (self.speed_gts, self.max_speed_gts, self.width, self.max_width):
            return None
        assert self.speed_gts is not None and self.max_speed_gts is not None
        assert self.width is not None and self.max_width is not None
        return self.speed_gts >= self.max_speed_gts and self.width >= self.max_width

    def text(self) -> str:
        """'16 GT/s x16 of 32 GT/s x16'; 'unknown' when sysfs gave none of it (a virtual
        NIC); a part sysfs did not give is named: '32 GT/s, width unknown (max: speed
        unknown, x16)'."""
        if self == PcieLink():
            return UNKNOWN
        now, top = (self.speed_gts, self.width), (self.max_speed_gts, self.max_width)
        if None not in (*now, *top):
            return f"{_link(*now)} of {_link(*top)}"
        return f"{_link(*now)} (max: {_link(*top)})"


def _link(speed: float | None, width: int | None) -> str:
    if speed is None and width is None:
        return UNKNOWN
    s = "speed unknown" if speed is None else f"{speed:g} GT/s"
    w = "width unknown" if width is None else f"x{width}"
    return f"{s} {w}" if None not in (speed, width) else f"{s}, {w}"


@dataclass(frozen=True)
class Bridge:
    """A bridge above a NIC: ACS P2P redirect (requests or completions sent up to the root
    complex, which breaks GPU-NIC peer-to-peer inside a switch) and relaxed ordering."""

    bdf: str
    acs_redirect: bool | None = None
    relaxed_ordering: bool | None = None


@dataclass(frozen=True)
class HostDevice:
    """One GPU or NIC function. ``host_bridge`` is sysfs's ``pciDDDD:BB`` root and
    ``bridges`` the bridges from it down to the device (root port first)."""

    name: str
    bdf: str
    vendor: str | None = None
    numa_node: int | None = None
    host_bridge: str | None = None
    bridges: tuple[str, ...] = ()
    link: PcieLink = PcieLink()
    netdevs: tuple[str, ...] = ()
    rdma_devices: tuple[str, ...] = ()
    relaxed_ordering: bool | None = None
    upstream: tuple[Bridge, ...] = ()  # NICs: the bridges of ``bridges`` as read


@dataclass(frozen=True)
class Affinity:
    gpu: str
    nic: str
    cls: str  # one of AFFINITY_CLASSES or UNKNOWN


@dataclass(frozen=True)
class Iommu:
    mode: str = UNKNOWN  # off | passthrough | translated | unknown
    units: int | None = None  # entries of /sys/class/iommu
    cmdline: tuple[str, ...] = ()  # the kernel options that set it


@dataclass(frozen=True)
class HostAudit:
    node: str
    gpus: tuple[HostDevice, ...] = ()
    nics: tuple[HostDevice, ...] = ()
    affinity: tuple[Affinity, ...] = ()
    iommu: Iommu = Iommu()
    error: str | None = None  # why the node's audit is missing (its agent's answer)

    @functools.cached_property
    def _classes(self) -> dict[tuple[str, str], str]:
        """(gpu, nic) -> class, the first row of a pair winning: built once, so judging a
        host is linear in what its agent sent (a scan per lookup made a 256 x 256 audit
        of 14,400 rows take 40 s)."""
        out: dict[tuple[str, str], str] = {}
        for a in self.affinity:
            out.setdefault((a.gpu, a.nic), a.cls)
        return out

    def cls(self, gpu: str, nic: str) -> str:
        return self._classes.get((gpu, nic), UNKNOWN)

    def best_nic(self, gpu: str) -> tuple[str | None, str]:
        """The NIC of the best class for ``gpu`` (the first in PCI order on a tie)."""
        best: tuple[str | None, str] = (None, UNKNOWN)
        for nic in self.nics:
            c = self.cls(gpu, nic.name)
            if rank(c) < rank(best[1]):
                best = (nic.name, c)
        return best


def rank(cls: str) -> int:
    return AFFINITY_CLASSES.index(cls) if cls in AFFINITY_CLASSES else len(AFFINITY_CLASSES)


def classify(a: HostDevice, b: HostDevice) -> str:
    """The ``nvidia-smi topo -m`` class of the path between two functions."""
    if a.host_bridge is None or b.host_bridge is None:
        return UNKNOWN
    if a.host_bridge != b.host_bridge:
        if a.numa_node is None or b.numa_node is None:
            return UNKNOWN
        return "NODE" if a.numa_node == b.numa_node else "SYS"
    shared = 0
    for x, y in zip(a.bridges, b.bridges, strict=False):
        if x != y:
            break
        shared += 1
    if shared == 0:
        return "PHB"
    # Below the deepest shared bridge (a switch's upstream port), each side may cross one
    # more bridge (its downstream port) and still be inside that one switch.
    if len(a.bridges) - shared <= 1 and len(b.bridges) - shared <= 1:
        return "PIX"
    return "PXB"


def affinity_table(gpus: Sequence[HostDevice], nics: Sequence[HostDevice]) -> tuple[Affinity, ...]:
    return tuple(Affinity(g.name, n.name, classify(g, n)) for g in gpus for n in nics)


# -- rails: which NIC the inventory gives each GPU --------------------------------------


def rail_nic_name(audit: HostAudit, nic: Nic) -> str | None:
    """The audit's name of an inventory NIC (matched by RDMA device, then netdev name)."""
    for n in audit.nics:
        if (nic.device and nic.device in n.rdma_devices) or nic.name in n.netdevs:
            return n.name
        if nic.name == n.name:
            return n.name
    return None


def gpu_rails(audit: HostAudit, nics: Sequence[Nic]) -> dict[str, Nic]:
    """GPU name -> its rail's inventory NIC. Rails are numbered as the GPUs are ordered:
    with R rails and G GPUs, GPU i is on rail i * R // G (8 GPUs on 4 rails: two a rail)."""
    rails = sorted({n.rail for n in nics})
    if not rails or not audit.gpus:
        return {}
    by_rail = {n.rail: n for n in nics}
    return {
        gpu.name: by_rail[rails[i * len(rails) // len(audit.gpus)]]
        for i, gpu in enumerate(audit.gpus)
    }


@dataclass(frozen=True)
class GpuRail:
    """One GPU's best NIC and its rail's NIC (None when the inventory lists no NICs)."""

    gpu: str
    best_nic: str | None
    best_cls: str
    rail_nic: str | None = None  # the audit's name of the rail NIC (None: not found)
    rail_listed: bool = False  # the inventory gives this GPU a rail
    rail_cls: str = UNKNOWN

    @property
    def rail_is_best(self) -> bool | None:
        if not self.rail_listed:
            return None
        return self.rail_nic is not None and rank(self.rail_cls) <= rank(self.best_cls)


def gpu_rail_table(audit: HostAudit, nics: Sequence[Nic] = ()) -> tuple[GpuRail, ...]:
    rails = gpu_rails(audit, nics)
    out = []
    for gpu in audit.gpus:
        best, best_cls = audit.best_nic(gpu.name)
        if gpu.name not in rails:
            out.append(GpuRail(gpu.name, best, best_cls))
            continue
        rail = rail_nic_name(audit, rails[gpu.name])
        cls = UNKNOWN if rail is None else audit.cls(gpu.name, rail)
        out.append(GpuRail(gpu.name, best, best_cls, rail, True, cls))
    return tuple(out)


# -- findings: what the report lists first and the gate rules judge -----------------------
