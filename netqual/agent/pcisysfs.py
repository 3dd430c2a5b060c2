"""The PCI/sysfs reader: GPUs, NICs, PCIe paths, links, ACS, relaxed ordering and IOMMU
of this host, from sysfs alone (no vendor tool, no root needed for most of it).

Every read takes ``root``, the file system root the tree hangs from (``/`` on a host; a
directory a test built): ``root/sys/...`` and ``root/proc/cmdline``. A field sysfs does not
have, or that cannot be read, is None: never an error. Without root, the kernel gives only
the first 64 bytes of a function's ``config`` file, so the capability fields read from it
(relaxed ordering, ACS) are None for an unprivileged reader.

The small API the rest of netqual uses:

- ``audit(root, node)``: the ``HostAudit`` of ``netqual.model.hostpath`` (GPUs, NICs, affinity);
- ``functions(root)``: every PCI function's address (``0000:03:00.0``);
- ``function_dir``, ``attr``, ``pcie_path``, ``numa_node``, ``link``: one function's sysfs;
- ``config(root, bdf)`` then ``relaxed_ordering(cfg)`` / ``acs_redirect(cfg)``;
- ``bridge(root, bdf)``: a bridge's ACS and relaxed ordering; ``iommu(root)``.
"""

from __future__ import annotations

import os
import re
import socket
from contextvars import ContextVar
from pathlib import Path

from netqual.model.hostpath import Bridge, HostAudit, HostDevice, Iommu, PcieLink, affinity_table

VENDORS = {"0x10de": "nvidia", "0x1002": "amd"}  # GPU vendors (PCI vendor ids)
DISPLAY_CLASS = 0x03  # base class: VGA 0x0300, 3D controller 0x0302, display 0x0380
NIC_CLASSES = (0x0200, 0x0207)  # ethernet, infiniband (base class + subclass)
BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
HOST_BRIDGE = re.compile(r"pci[0-9a-f]{4}:[0-9a-f]{2}")
_NUMBER = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)")

CAP_PCIE = 0x10  # PCI Express capability
DEVCTL_OFFSET = 0x08  # Device Control, from the PCIe capability
DEVCTL_RELAXED_ORDERING = 1 << 4
EXT_CAP_ACS = 0x000D
ACS_CTL_OFFSET = 0x06  # ACS Control, from the ACS extended capability
ACS_REDIRECT = (1 << 2) | (1 << 3)  # P2P Request Redirect, P2P Completion Redirect
_CMDLINE_IOMMU = re.compile(r"(intel_iommu|amd_iommu|iommu|iommu\.passthrough)=\S+")


def sys_dir(root: Path) -> Path:
    return root / "sys"


def functions(root: Path) -> list[str]:
    """Every PCI function's address, in PCI order."""
    try:
        names = os.listdir(sys_dir(root) / "bus" / "pci" / "devices")
    except OSError:
        return []
    return sorted(n for n in names if BDF.fullmatch(n))


# Within one ``audit`` each function's link is resolved once (resolving is most of the
# audit's time: a dozen reads per function). Per thread, and only for the audit's duration:
# a call outside an audit always reads sysfs as it is now (devices come and go).
_DIRS: ContextVar[dict[tuple[Path, str], Path | None] | None] = ContextVar("dirs", default=None)


def function_dir(root: Path, bdf: str) -> Path | None:
    """The function's real directory below ``sys/devices`` (the bus link resolved)."""
    memo = _DIRS.get()
    if memo is not None and (root, bdf) in memo:
        return memo[(root, bdf)]
    found = _inside(root, sys_dir(root) / "bus" / "pci" / "devices" / bdf)
    if memo is not None:
        memo[(root, bdf)] = found
    return found


def _inside(root: Path, link: Path) -> Path | None:
    try:
        real = link.resolve(strict=True)
        real.relative_to((sys_dir(root) / "devices").resolve())
    except (OSError, ValueError, RuntimeError):
        return None  # gone, a loop, or a link out of the tree
    return real


def attr(root: Path, bdf: str, name: str) -> str | None:
    where = function_dir(root, bdf)
    return None if where is None else _read(where / name)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip() or None
    except OSError:
        return None


def pcie_path(root: Path, bdf: str) -> tuple[str | None, tuple[str, ...]]:
    """(host bridge, bridges from the root port down) from the function's sysfs location:
    ``sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/...``."""
    where = function_dir(root, bdf)
    if where is None:
        return None, ()
    parts = where.relative_to((sys_dir(root) / "devices").resolve()).parts
    if not parts or not HOST_BRIDGE.fullmatch(parts[0]):
        return None, ()  # a device outside the PCI hierarchy (a platform device)
    chain = [p for p in parts[1:] if BDF.fullmatch(p)]
    if not chain or chain[-1] != bdf:
        return parts[0], ()
    return parts[0], tuple(chain[:-1])


def numa_node(root: Path, bdf: str) -> int | None:
    """The function's NUMA node; -1 (firmware says nothing) counts as node 0 when the host
    has a single node, else unknown."""
    value = _int(attr(root, bdf, "numa_node"))
    if value is not None and value >= 0:
        return value
    try:
        nodes = [n for n in os.listdir(sys_dir(root) / "devices/system/node") if n[4:].isdigit()]
    except OSError:
        return None
    return 0 if len(nodes) == 1 and nodes[0] == "node0" else None


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text, 0)
    except ValueError:
        return None


def _number(text: str | None) -> float | None:
    """``16.0 GT/s PCIe``, ``8 GT/s``, ``2.5 GT/s`` -> GT/s; ``Unknown`` -> None."""
    match = _NUMBER.match(text or "")
    return None if match is None else float(match.group(1))


def link(root: Path, bdf: str) -> PcieLink:
    width = _int(attr(root, bdf, "current_link_width"))
    max_width = _int(attr(root, bdf, "max_link_width"))
    return PcieLink(
        speed_gts=_number(attr(root, bdf, "current_link_speed")),
        max_speed_gts=_number(attr(root, bdf, "max_link_speed")),
        width=width or None,  # 0: the link is down or sysfs does not know
        max_width=max_width or None,
    )


def config(root: Path, bdf: str) -> bytes | None:
    where = function_dir(root, bdf)
    if where is None:
        return None
    try:
        with open(where / "config", "rb") as f:
            return f.read(4096)
    except OSError:
        return None


def _u16(cfg: bytes, offset: int) -> int | None:
    if offset + 2 > len(cfg):
        return None
    return int.from_bytes(cfg[offset : offset + 2], "little")


def _capability(cfg: bytes, cap_id: int) -> int | None:
    """Offset of a standard capability, walking the list from 0x34 (bounded: 48 hops)."""
    status = _u16(cfg, 0x06)
    if status is None or not status & 0x10 or len(cfg) <= 0x34:
        return None
    offset = cfg[0x34] & 0xFC
    for _ in range(48):
        if offset < 0x40 or offset + 2 > len(cfg):
            return None  # end of list, or beyond what we may read
        if cfg[offset] == cap_id:
            return offset
        offset = cfg[offset + 1] & 0xFC
    return None


def _ext_capability(cfg: bytes, cap_id: int) -> int | None:
    """Offset of an extended capability (list from 0x100; bounded: 512 hops)."""
    offset = 0x100
    for _ in range(512):
        if offset < 0x100 or offset + 4 > len(cfg):
            return None
        header = int.from_bytes(cfg[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def relaxed_ordering(cfg: bytes | None) -> bool | None:
    """Device Control's Enable Relaxed Ordering bit (PCIe capability); None: not readable."""
    at = None if cfg is None else _capability(cfg, CAP_PCIE)
    ctl = None if at is None or cfg is None else _u16(cfg, at + DEVCTL_OFFSET)
    return None if ctl is None else bool(ctl & DEVCTL_RELAXED_ORDERING)


def acs_redirect(cfg: bytes | None) -> bool | None:
    """ACS P2P Request or Completion Redirect enabled. A function without an ACS capability
    redirects nothing (False) once the extended space was readable; None when it was not."""
    if cfg is None or len(cfg) < 0x104:
        return None
    at = _ext_capability(cfg, EXT_CAP_ACS)
    if at is None:
        return False
    ctl = _u16(cfg, at + ACS_CTL_OFFSET)
    return None if ctl is None else bool(ctl & ACS_REDIRECT)


def bridge(root: Path, bdf: str) -> Bridge:
    cfg = config(root, bdf)
    return Bridge(bdf, acs_redirect(cfg), relaxed_ordering(cfg))


def iommu(root: Path) -> Iommu:
    """Mode from the IOMMU groups' ``type`` (identity = passthrough, DMA = translated) and
    the units in ``/sys/class/iommu``; the kernel options that set it, as given."""
    cmdline = _read(root / "proc" / "cmdline") or ""
    options = tuple(m.group(0) for m in _CMDLINE_IOMMU.finditer(cmdline))
    try:
        units: int | None = len(os.listdir(sys_dir(root) / "class" / "iommu"))
    except OSError:
        units = None
    types = set()
    groups = sys_dir(root) / "kernel" / "iommu_groups"
    try:
        for group in sorted(os.listdir(groups))[:4096]:
            if (kind := _read(groups / group / "type")) is not None:
                types.add(kind)
    except OSError:
        pass
    if types:
        mode = "passthrough" if types == {"identity"} else "translated"
    elif units == 0:
        mode = "off"
    else:
        mode = "unknown"
    return Iommu(mode=mode, units=units, cmdline=options)


def _class(root: Path, bdf: str) -> int | None:
    return _int(attr(root, bdf, "class"))


def linked_names(root: Path, cls: str) -> dict[str, tuple[str, ...]]:
    """Function address -> the ``/sys/class/net`` or ``/sys/class/infiniband`` names whose
    ``device`` link leads to it (also a virtio or other NIC whose class code is neither
    ethernet nor infiniband)."""
    found: dict[str, list[str]] = {}
    base = sys_dir(root) / "class" / cls
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return {}
    for entry in entries:
        real = _inside(root, base / entry / "device")
        # the link may point below the function (virtio: .../0000:00:03.0/virtio2)
        parts = [p for p in (real.parts if real is not None else ()) if BDF.fullmatch(p)]
        if parts:
            found.setdefault(parts[-1], []).append(entry)
    return {bdf: tuple(names) for bdf, names in found.items()}


def _device(
    root: Path,
    bdf: str,
    name: str,
    nic: bool,
    netdevs: tuple[str, ...] = (),
    rdma: tuple[str, ...] = (),
) -> HostDevice:
    host_bridge, bridges = pcie_path(root, bdf)
    return HostDevice(
        name=name,
        bdf=bdf,
        vendor=VENDORS.get(attr(root, bdf, "vendor") or "", attr(root, bdf, "vendor")),
        numa_node=numa_node(root, bdf),
        host_bridge=host_bridge,
        bridges=bridges,
        link=link(root, bdf),
        netdevs=netdevs,
        rdma_devices=rdma,
        relaxed_ordering=relaxed_ordering(config(root, bdf)) if nic else None,
        upstream=tuple(bridge(root, b) for b in bridges) if nic else (),
    )


def audit(root: Path = Path("/"), node: str | None = None) -> HostAudit:
    """GPUs (NVIDIA or AMD, display class) as GPU0.. in PCI order, as ``nvidia-smi`` numbers
    them; NICs named by their RDMA device, else their first netdev, else their address."""
    token = _DIRS.set({})
    try:
        return _audit(root, node)
    finally:
        _DIRS.reset(token)


def _audit(root: Path, node: str | None) -> HostAudit:
    bdfs = functions(root)
    netdevs, rdma = linked_names(root, "net"), linked_names(root, "infiniband")
    gpus: list[HostDevice] = []
    nics: list[HostDevice] = []
    for bdf in bdfs:
        cls = _class(root, bdf)
        vendor = attr(root, bdf, "vendor")
        if cls is not None and cls >> 16 == DISPLAY_CLASS and vendor in VENDORS:
            gpus.append(_device(root, bdf, f"GPU{len(gpus)}", nic=False))
        elif (cls is not None and cls >> 8 in NIC_CLASSES) or bdf in netdevs or bdf in rdma:
            net, ib = netdevs.get(bdf, ()), rdma.get(bdf, ())
            nics.append(_device(root, bdf, (ib + net + (bdf,))[0], True, net, ib))
    return HostAudit(
        node=node or socket.gethostname(),
        gpus=tuple(gpus),
        nics=tuple(nics),
        affinity=affinity_table(gpus, nics),
        iommu=iommu(root),
    )
