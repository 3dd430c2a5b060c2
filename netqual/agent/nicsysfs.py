"""The one reader of NIC facts in sysfs (docs/evidence.md): per netdev its type, link state,
MTU, speed, driver and RoCE ECN priorities; per RDMA device its firmware and per port its
state, link layer, rate, active MTU and GID table.

The configuration snapshot (``agent/fleet_snapshot``) and the pre-flight NIC report
(``agent/nicreport``) both read through it, so the two answers cannot disagree about the
same host. ``root`` moves sysfs to ``root/sys`` for fixture trees (the PCI reader
``agent/pcisysfs`` takes the same root). What the platform lacks is ``UNKNOWN`` (text) or
``None`` (numbers), never an error: a laptop, a container and a veth lab host all answer.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from netqual.model.fleet import UNKNOWN
from netqual.transports.rdma.gid import GidEntry, GidType, LinkLayer

if TYPE_CHECKING:
    from netqual.transports.rdma.devices import DeviceInfo

ARPHRD_LOOPBACK = "772"
MAX_GIDS = 64  # populated GID slots read per port (rxe lists 1,024 slots, mostly empty)
_GID = re.compile(r"[0-9a-f]{4}(:[0-9a-f]{4}){7}")  # sysfs's form: eight groups of four


def read(path: Path | str) -> str:
    """A sysfs/procfs file's first line, or UNKNOWN (absent, unreadable, EINVAL on a
    down link's ``speed`` or an empty GID slot's type, empty).

    Read through ``os`` (open, read to the end, close), not ``Path.read_text``: the GID
    walk below reads one file per slot, 1,024 a port on rxe, and the text layer's own
    calls (fstat, the terminal query, the decoder) cost more than the read itself."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return UNKNOWN
    try:
        data = b"".join(iter(lambda: os.read(fd, 4096), b""))
    except OSError:
        return UNKNOWN
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace").strip()
    return text.splitlines()[0].strip() if text else UNKNOWN


def children(path: Path) -> list[str]:
    """The entries of a sysfs directory, in name order; none where it is absent."""
    try:
        return sorted(p.name for p in path.iterdir())
    except OSError:
        return []


def _count(text: str) -> int | None:
    """A non-negative count, or None (unknown; ``speed`` is -1 without a link)."""
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class Netdev:
    """One ``/sys/class/net`` interface."""

    name: str
    loopback: bool
    operstate: str  # "up", "down", ... or UNKNOWN
    mtu: int | None
    speed_mbps: int | None  # None: unknown, virtual, or no link
    driver: str  # the PCI/virtio driver bound to it; UNKNOWN for virtual interfaces
    ecn_priorities: str  # "3,4", "none", or UNKNOWN (no mlx5-style ecn/ directory)
    admin_up: bool | None = None  # IFF_UP of ``flags``; None: not readable

    @property
    def up(self) -> bool:
        """Carrying traffic: operstate ``up``, or ``unknown`` while administratively up
        (TUN devices and drivers that never report carrier sit in ``unknown``)."""
        if self.operstate == "up":
            return True
        return self.operstate in ("unknown", UNKNOWN) and self.admin_up is True


def _ecn_priorities(net: Path) -> str:
    """Priorities with RoCE ECN on as reaction and notification point (mlx5:
    ``ecn/roce_rp/enable/N`` and ``ecn/roce_np/enable/N``)."""
    rp, np_ = net / "ecn" / "roce_rp" / "enable", net / "ecn" / "roce_np" / "enable"
    prios = [p for p in children(rp) if p.isdigit()]
    if not prios:
        return UNKNOWN
    on = [p for p in prios if read(rp / p) == "1" and read(np_ / p) == "1"]
    return ",".join(sorted(on, key=int)) or "none"


IFF_UP = 0x1


def _admin_up(text: str) -> bool | None:
    """IFF_UP of a ``flags`` file ("0x1003"); None when it does not read as a number."""
    try:
        return bool(int(text, 16) & IFF_UP)
    except ValueError:
        return None


def netdev(root: Path, name: str) -> Netdev:
    """The facts of interface ``name`` (a name already checked: it becomes a path)."""
    net = root / "sys" / "class" / "net" / name
    driver = UNKNOWN
    with contextlib.suppress(OSError):
        driver = (net / "device" / "driver").resolve(strict=True).name
    return Netdev(
        name,
        read(net / "type") == ARPHRD_LOOPBACK,
        read(net / "operstate"),
        _count(read(net / "mtu")),
        _count(read(net / "speed")),
        driver,
        _ecn_priorities(net),
        _admin_up(read(net / "flags")),
    )


def netdevs(root: Path) -> tuple[Netdev, ...]:
    """Every interface of ``root/sys/class/net``, in name order."""
    return tuple(netdev(root, name) for name in children(root / "sys" / "class" / "net"))


@dataclass(frozen=True)
class Gid:
    """One populated GID table slot and the netdev it belongs to (UNKNOWN on InfiniBand)."""

    entry: GidEntry
    netdev: str


@dataclass(frozen=True)
class Port:
    """One RDMA port of ``/sys/class/infiniband/DEV/ports/N``."""

    device: str
    port: int
    state: str  # ACTIVE, DOWN, INIT, ... or UNKNOWN
    link_layer: str  # "Ethernet", "InfiniBand" or UNKNOWN
    rate: str  # "100 Gb/sec (4X EDR)" or UNKNOWN
    active_mtu: int | None  # sysfs shows it on few drivers (verbs knows it everywhere)
    gids: tuple[Gid, ...]  # populated slots in index order, at most MAX_GIDS

    @property
    def link(self) -> LinkLayer:
        return _link(self.link_layer)

    @property
    def netdev(self) -> str | None:
        """The netdev under a RoCE port: that of its first GID (slot 0, the default GID, on
        mlx5 and rxe); None on InfiniBand or without GIDs."""
        return next((g.netdev for g in self.gids if g.netdev != UNKNOWN), None)


@dataclass(frozen=True)
class RdmaDevice:
    name: str
    firmware: str  # fw_ver, or UNKNOWN
    ports: tuple[Port, ...]  # in port number order


def _link(text: str) -> LinkLayer:
    return LinkLayer.ETHERNET if text == "Ethernet" else LinkLayer.INFINIBAND


def _gid_type(text: str, link: LinkLayer) -> GidType:
    if link is LinkLayer.INFINIBAND:
        return GidType.IB
    return GidType.ROCE_V2 if "v2" in text.lower() else GidType.ROCE_V1


# Per (device, port): the GID slots the kernel holds populated, as verbs listed them.
Slots = Mapping[tuple[str, int], Sequence[int]]


def populated_slots(scanned: Iterable[DeviceInfo]) -> dict[tuple[str, int], tuple[int, ...]]:
    """The populated GID slots of each port a verbs scan (``transports.rdma.devices.scan``)
    read: ``ibv_query_gid_table`` answers for a whole device in one call what sysfs answers
    one file a slot (rxe lists 1,024 a port, 2-4 used; mlx5 256). A device verbs could not
    query is absent: its ports are walked slot by slot."""
    return {
        (dev.name, port.num): tuple(g.index for g in port.gids)
        for dev in scanned
        if dev.error is None
        for port in dev.ports
    }


def _port(device: str, path: Path, slots: Sequence[int] | None = None) -> Port:
    state = read(path / "state").split(":")[-1].strip() or UNKNOWN  # "4: ACTIVE"
    link_layer = read(path / "link_layer")
    link = _link(link_layer)
    gids: list[Gid] = []
    # rxe and mlx5 list every slot of the table, populated or not: read in numeric order.
    # Without ``slots`` every slot's file is read (a table may have holes), by plain string
    # paths: under emulation a Path per slot cost more than the kernel's answer. With them
    # only those slots are read, from the same files: the same entries, types and netdevs.
    table, attrs = os.fspath(path / "gids"), os.fspath(path / "gid_attrs")
    indices = (
        [str(i) for i in slots]
        if slots is not None
        else [i for i in children(path / "gids") if i.isdigit()]
    )
    for index in sorted(indices, key=int):
        if len(gids) >= MAX_GIDS:
            break
        text = read(f"{table}/{index}")
        if not _GID.fullmatch(text) or not text.strip("0:"):
            continue  # unreadable, not the kernel's form, or empty (no type to read: EINVAL)
        kind = _gid_type(read(f"{attrs}/types/{index}"), link)
        entry = GidEntry(int(index), text, kind)
        gids.append(Gid(entry, read(f"{attrs}/ndevs/{index}")))
    return Port(
        device,
        int(path.name),
        state,
        link_layer,
        read(path / "rate"),
        _count(read(path / "active_mtu")),
        tuple(gids),
    )


def rdma_devices(root: Path, slots: Slots | None = None) -> tuple[RdmaDevice, ...]:
    """Every device of ``root/sys/class/infiniband``, in name order. ``slots``: the
    populated GID slots per port (``populated_slots``, live sysfs only); a port it does
    not name is walked slot by slot."""
    base = root / "sys" / "class" / "infiniband"
    given = slots or {}
    found = []
    for name in children(base):
        ports = base / name / "ports"
        numbers = sorted((p for p in children(ports) if p.isdigit()), key=int)
        found.append(
            RdmaDevice(
                name,
                read(base / name / "fw_ver"),
                tuple(_port(name, ports / n, given.get((name, int(n)))) for n in numbers),
            )
        )
    return tuple(found)
