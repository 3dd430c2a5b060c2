"""One node's configuration snapshot (docs/evidence.md), read from sysfs and procfs.

Every agent answers a ``snapshot`` request with it during the pre-flight check and
``netqual doctor`` shows it locally. Everything the platform does not expose is recorded
as ``unknown``, never an error: a laptop, a container and a veth lab host all answer.
``Roots`` moves sysfs, procfs and /etc so that tests build fixture trees from the kernel's
documented layouts; the ethtool ioctl, the pyverbs port query and ``dcb`` run only on the
live roots (they ask the running kernel, not a tree).

``from_peer`` is the coordinator's side: every key and value a peer sent is read through
``messages.Fields`` and shown through ``names.visible``.
"""

from __future__ import annotations

import array
import fcntl
import json
import re
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netqual import __version__
from netqual.agent import nicsysfs, pcisysfs
from netqual.agent.nicsysfs import read
from netqual.agent.wire.messages import Fields
from netqual.base.errors import BadRequestError
from netqual.base.names import visible
from netqual.model.fleet import (
    KEY_PATTERN,
    MAIN_INTERFACE,
    MAX_KEYS,
    MAX_VALUE_CHARS,
    UNKNOWN,
    ConfigSnapshot,
    KeyScope,
    SnapshotKey,
)
from netqual.transports.rdma.gid import GidSelectionError, GidType, select_gid

if TYPE_CHECKING:
    from netqual.transports.rdma.devices import DeviceInfo

DCB_BUDGET_S = 1.5  # all dcb calls of one snapshot together: the pre-flight waits for it
IP_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Roots:
    """The file system root the trees hang from: ``root/sys``, ``root/proc``, ``root/etc``
    (``/`` on a host; the PCI reader takes the same root)."""

    root: Path = Path("/")

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def live(self) -> bool:
        return self == Roots()


def distinct(values: Iterable[str]) -> str:
    """The known values, each once, numbers in numeric order, comma-separated; UNKNOWN
    when none is known."""
    known = {v for v in values if v != UNKNOWN}
    if not known:
        return UNKNOWN
    return ",".join(sorted(known, key=lambda v: (not v.isdigit(), int(v) if v.isdigit() else 0, v)))


def _os_name(etc: Path) -> str:
    try:
        text = (etc / "os-release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return UNKNOWN
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"') or UNKNOWN
    return UNKNOWN


def _drvinfo(ifname: str) -> tuple[str, str]:
    """(driver, firmware) from the ETHTOOL_GDRVINFO ioctl; UNKNOWN where it says nothing."""
    buf = array.array("B", bytes(196))  # struct ethtool_drvinfo
    struct.pack_into("I", buf, 0, 0x3)  # ETHTOOL_GDRVINFO
    ifreq = struct.pack("16sP", ifname.encode()[:15], buf.buffer_info()[0])
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s.fileno(), 0x8946, ifreq)  # SIOCETHTOOL
    except OSError:
        return UNKNOWN, UNKNOWN
    raw = buf.tobytes()

    def field(offset: int) -> str:
        text = raw[offset : offset + 32].split(b"\0", 1)[0].decode(errors="replace").strip()
        return text if text and text.upper() != "N/A" else UNKNOWN

    return field(4), field(68)


def _pfc(ifname: str, deadline: float) -> str:
    """PFC-enabled priorities from ``dcb pfc show`` (iproute2); UNKNOWN without it, where
    the driver has no DCB, or once the snapshot's dcb budget is spent (a host with many
    interfaces)."""
    dcb = shutil.which("dcb")
    left_s = deadline - time.monotonic()
    if dcb is None or left_s <= 0.05:
        return UNKNOWN
    try:
        out = subprocess.run(
            [dcb, "pfc", "show", "dev", ifname, "prio-pfc"],
            capture_output=True,
            text=True,
            timeout=left_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return UNKNOWN
    found = re.findall(r"\b([0-7]):(on|off)\b", out.stdout)
    if out.returncode != 0 or not found:
        return UNKNOWN
    return ",".join(p for p, state in found if state == "on") or "none"


def _netdevs(roots: Roots, out: dict[str, str]) -> list[str]:
    """Per-interface keys; the names of the up, non-loopback interfaces (``Netdev.up``:
    operstate up, or unknown while administratively up, as TUN devices are)."""
    up: list[str] = []
    dcb_deadline = time.monotonic() + DCB_BUDGET_S
    for dev in nicsysfs.netdevs(roots.root):

        def key(field: str, name: str = dev.name) -> str:
            return SnapshotKey.nic(name, field).text

        if dev.loopback or not KEY_PATTERN.fullmatch(key("mtu")):
            continue  # a name no key can carry (kernel names are 15 safe characters)
        driver, firmware = dev.driver, UNKNOWN
        if roots.live:
            ioctl_driver, firmware = _drvinfo(dev.name)
            driver = driver if driver != UNKNOWN else ioctl_driver
        out[key("driver")] = driver
        out[key("firmware")] = firmware
        out[key("operstate")] = dev.operstate
        out[key("speed_mbps")] = _text(dev.speed_mbps)
        out[key("mtu")] = _text(dev.mtu)
        # dcb only where it matters: an up interface of the live host
        live_up = roots.live and dev.up
        out[key("pfc_priorities")] = _pfc(dev.name, dcb_deadline) if live_up else UNKNOWN
        out[key("ecn_priorities")] = dev.ecn_priorities
        if dev.up:
            up.append(dev.name)
    return up


def main_interface(local: str, peer: str) -> str | None:
    """The interface traffic from ``local`` (the node's address, where the coordinator
    reached this agent) to ``peer`` leaves by: ``ip route get PEER from LOCAL`` (the
    interface holding the address, or, for an address on loopback, the route's). None
    without iproute2, for a loopback route (coordinator and agent on one host), or when
    the kernel has no route."""
    ip = shutil.which("ip")
    if ip is None or not local or not peer:
        return None
    try:
        done = subprocess.run(
            [ip, "-j", "route", "get", peer, "from", local],
            capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False,
        )  # fmt: skip
        routes = json.loads(done.stdout or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    dev = routes[0].get("dev") if isinstance(routes, list) and routes else None
    if not isinstance(dev, str) or not KEY_PATTERN.fullmatch(SnapshotKey.nic(dev, "mtu").text):
        return None
    return None if dev == "lo" else dev


def _text(count: int | None) -> str:
    return UNKNOWN if count is None else str(count)


GID_TYPE_TEXT = {GidType.IB: "IB", GidType.ROCE_V1: "RoCE v1", GidType.ROCE_V2: "RoCE v2"}


def _port(port: nicsysfs.Port, out: dict[str, str], verbs_mtu: int | None) -> None:
    """One RDMA port's keys."""

    def key(field: str) -> str:
        return SnapshotKey.rdma(f"{port.device}/{port.port}", field).text

    out[key("state")] = port.state
    out[key("link_layer")] = port.link_layer
    out[key("rate")] = port.rate
    width = re.search(r"\((\d+X)", port.rate)  # "100 Gb/sec (4X EDR)"
    out[key("width")] = width.group(1) if width else UNKNOWN
    out[key("active_mtu")] = _text(port.active_mtu or verbs_mtu)
    for gid in port.gids:
        entry = gid.entry
        text = f"{GID_TYPE_TEXT[entry.gid_type]} {entry.family.value} {gid.netdev}"
        out[key(f"gid.{entry.index}")] = text
    try:
        where = f"{port.device} port {port.port}"
        chosen = select_gid([g.entry for g in port.gids], port.link, where=where).entry
        out[key("gid_index")] = str(chosen.index)
        out[key("gid_type")] = GID_TYPE_TEXT[chosen.gid_type]
    except GidSelectionError:
        out[key("gid_index")] = out[key("gid_type")] = UNKNOWN  # none, or ambiguous


def _verbs_scan() -> tuple[DeviceInfo, ...]:
    """Every device's ports through pyverbs (ibv_query_port, ibv_query_gid_table): the
    active MTU sysfs does not show, and which GID slots are populated; none where pyverbs,
    a device or a provider fails (then the MTU stays unknown and sysfs is walked)."""
    try:
        from netqual.transports.rdma import devices, verbs

        return devices.scan(verbs.load())
    except Exception:  # no pyverbs, no device, a provider error
        return ()


def _rdma(roots: Roots, out: dict[str, str]) -> list[str]:
    """Per-port keys; the ``DEV/PORT`` names of the ACTIVE ports."""
    live = roots.live and bool(nicsysfs.children(roots.sys / "class" / "infiniband"))
    scanned = _verbs_scan() if live else ()
    mtus = {(d.name, p.num): p.mtu_bytes for d in scanned for p in d.ports}
    devices = nicsysfs.rdma_devices(roots.root, nicsysfs.populated_slots(scanned))
    active: list[str] = []
    for dev in devices:
        if not KEY_PATTERN.fullmatch(SnapshotKey.rdma(f"{dev.name}/1", "gid.255").text):
            continue
        out[SnapshotKey.rdma(dev.name, "firmware").text] = dev.firmware
        for port in dev.ports:
            _port(port, out, mtus.get((dev.name, port.port)))
            if port.state == "ACTIVE":
                active.append(f"{dev.name}/{port.port}")
    return active


def _pyverbs_version() -> str:
    """Without importing it (slow, and it may load a provider): the package metadata, or
    dpkg's record of python3-pyverbs where netqual would load it from (doctor's route)."""
    from importlib.metadata import PackageNotFoundError, version

    from netqual.transports.rdma.verbs import DEBIAN_DIST_PACKAGES, _dpkg_version

    try:
        return version("pyverbs")
    except PackageNotFoundError:
        pass
    if Path(DEBIAN_DIST_PACKAGES, "pyverbs").is_dir():
        return _dpkg_version("python3-pyverbs") or UNKNOWN
    return UNKNOWN


def _flag(value: bool | None) -> str:
    return UNKNOWN if value is None else ("true" if value else "false")


def _pci(roots: Roots, out: dict[str, str]) -> None:
    """IOMMU mode, and per NIC its PCIe link, relaxed ordering and the ACS P2P redirect of
    the bridges above it, from the host path audit's PCI reader (``agent/pcisysfs``; the
    config-space fields need root, else they stay unknown)."""
    audit = pcisysfs.audit(roots.root, "snapshot")
    out["iommu"] = audit.iommu.mode
    acs: list[str] = []
    ordering: list[str] = []
    for nic in audit.nics:

        def key(field: str, name: str = nic.name) -> str:
            return SnapshotKey.pci(name, field).text

        if not KEY_PATTERN.fullmatch(key("relaxed_ordering")):
            continue
        out[key("bdf")] = nic.bdf
        known_link = nic.link.speed_gts is not None or nic.link.width is not None
        out[key("link")] = nic.link.text() if known_link else UNKNOWN
        out[key("relaxed_ordering")] = _flag(nic.relaxed_ordering)
        ordering.append(out[key("relaxed_ordering")])
        redirect = [b.acs_redirect for b in nic.upstream]
        known = [r for r in redirect if r is not None]
        above = UNKNOWN if len(known) < len(redirect) or not redirect else _flag(any(known))
        out[key("acs_redirect")] = above
        acs.append(above)
    out["relaxed_ordering"] = distinct(ordering)
    out["acs"] = distinct(acs)


def collect(roots: Roots | None = None, main: str | None = None) -> dict[str, str]:
    """This node's snapshot: every fleet key and per-device key, as text. ``main``: the
    interface the node's address uses (``main_interface``), when known."""
    roots = roots or Roots()
    out: dict[str, str] = {}
    up = _netdevs(roots, out)
    ports = _rdma(roots, out)
    if main is not None and SnapshotKey.nic(main, "mtu").text in out:
        out[MAIN_INTERFACE] = main

    def nic(name: str, field: str) -> str:
        return out[SnapshotKey.nic(name, field).text]

    def port(name: str, field: str) -> str:
        return out[SnapshotKey.rdma(name, field).text]

    sysctl = roots.proc / "sys" / "net" / "ipv4"
    if roots.live:
        from netqual.transports.rdma.verbs import libibverbs_version

        out["rdma_core"] = libibverbs_version() or UNKNOWN
        out["pyverbs"] = _pyverbs_version()
    out |= {
        "kernel": read(roots.proc / "sys" / "kernel" / "osrelease"),
        "os": _os_name(roots.etc),
        "netqual": __version__,
        "tcp_congestion_control": read(sysctl / "tcp_congestion_control"),
        "tcp_ecn": read(sysctl / "tcp_ecn"),
        "mtu": distinct(nic(n, "mtu") for n in up),
        "link_speed_mbps": distinct(nic(n, "speed_mbps") for n in up),
        "driver": distinct(nic(n, "driver") for n in up),
        "firmware": distinct(
            [nic(n, "firmware") for n in up]
            + [
                v
                for k, v in out.items()
                if (sk := SnapshotKey.parse(k)).scope is KeyScope.RDMA and sk.field == "firmware"
            ]
        ),
        "roce_mtu": distinct(port(p, "active_mtu") for p in ports),
        "roce_gid_type": distinct(port(p, "gid_type") for p in ports),
        "gid_index": distinct(port(p, "gid_index") for p in ports),
        "pfc_priorities": distinct(nic(n, "pfc_priorities") for n in up),
        "ecn_priorities": distinct(nic(n, "ecn_priorities") for n in up),
    }
    _pci(roots, out)
    ecn = out["ecn_priorities"]
    out["ecn"] = UNKNOWN if ecn == UNKNOWN else ("false" if ecn == "none" else "true")
    return {k: v[:MAX_VALUE_CHARS] for k, v in sorted(out.items())}


def to_wire(values: dict[str, str]) -> dict[str, Any]:
    return {"values": values}


def from_peer(body: object, node: str, peer: str) -> ConfigSnapshot:
    """A peer's ``snapshot`` answer, checked: at most MAX_KEYS keys of the key pattern,
    each value a bounded string, shown literally."""
    values = Fields(body, "snapshot", peer).obj("values")
    assert values is not None  # required: obj() raises when missing
    if len(values.body) > MAX_KEYS:
        raise BadRequestError(peer, "snapshot.values", f"more than {MAX_KEYS} keys")
    pairs: list[tuple[str, str]] = []
    for key in values.body:
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise BadRequestError(peer, "snapshot.values", f"bad key {str(key)[:40]!r}")
        pairs.append((key, visible(values.string(key, MAX_VALUE_CHARS))))
    return ConfigSnapshot(node, tuple(sorted(pairs)))
