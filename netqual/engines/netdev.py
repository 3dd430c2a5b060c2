"""Where an engine's bytes should go and where they went, in this network namespace.

``holder``: the interface that holds an address (UCX advertises an interface's address, so
pinning NIXL means naming that interface). ``route_dev``: the interface the kernel sends
to a peer by (the path's NIC when the address sits on the loopback, as in the lab's
multi-homed hosts). ``rdma_on``: the RDMA ports over a netdev (a UCX device list that
keeps RDMA on the path's NIC). ``counters``: bytes per interface and per RDMA port, the
independent proof of which NIC carried an operation (RoCE bypasses netdev counters; the
port counters count 4-byte words).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from netqual.agent.counters import WORDS_BYTES, interfaces

SYS_INFINIBAND = Path("/sys/class/infiniband")
# outside any timing: a loaded or emulated node may take seconds to start `ip` (2 s
# was too short in CI's qemu guest: the engine's own address read as no interface's)
IP_TIMEOUT_S = 10.0


def _ip_json(*args: str) -> list[dict[str, object]]:
    ip = shutil.which("ip")
    if ip is None:
        return []
    try:
        done = subprocess.run(
            [ip, "-j", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
        items = json.loads(done.stdout or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []


def readable() -> bool:
    """Whether ``ip -j address`` answers here at all (asked only after a lookup failed:
    an unreadable list is not an address no interface holds)."""
    return bool(_ip_json("address", "show"))


def holder(address: str) -> str | None:
    """The interface that holds ``address`` (``ip -j address``); None when none does."""
    try:
        want = ipaddress.ip_address(address)
    except ValueError:
        return None
    for item in _ip_json("address", "show"):
        for a in item.get("addr_info") or []:  # type: ignore[attr-defined]
            with contextlib.suppress(ValueError, TypeError):
                if isinstance(a, dict) and ipaddress.ip_address(str(a.get("local"))) == want:
                    name = item.get("ifname")
                    return name if isinstance(name, str) else None
    return None


def route_dev(peer: str, source: str | None = None) -> str | None:
    """The interface this namespace sends to ``peer`` by (from ``source``)."""
    args = ["route", "get", peer] + (["from", source] if source else [])
    for item in _ip_json(*args):
        dev = item.get("dev")
        if isinstance(dev, str):
            return dev
    return None


def rdma_on(netdev: str, root: Path = SYS_INFINIBAND) -> tuple[str, ...]:
    """``DEV:PORT`` of each RDMA port whose netdev is ``netdev`` (UCX device names)."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        for port in sorted(root.glob("*/ports/*")):
            dev = port.parent.parent
            ndevs = set()
            with contextlib.suppress(OSError):
                ndevs = {p.read_text().strip() for p in (port / "gid_attrs" / "ndevs").iterdir()}
            with contextlib.suppress(OSError):
                ndevs.add((dev / "parent").read_text().strip())  # rxe, siw
            if netdev in ndevs:
                found.append(f"{dev.name}:{port.name}")
    return tuple(found)


def counters(root: Path = SYS_INFINIBAND) -> dict[str, int]:
    """Bytes (rx + tx) of every interface, and of every RDMA port as ``rdma:DEV/PORT``."""
    out = {name: c.get("rx_bytes", 0) + c.get("tx_bytes", 0) for name, c in interfaces().items()}
    with contextlib.suppress(OSError):
        for port in sorted(root.glob("*/ports/*")):
            words = 0
            with contextlib.suppress(OSError, ValueError):
                for name in ("port_xmit_data", "port_rcv_data"):
                    words += int((port / "counters" / name).read_text().split()[0])
            if words:
                out[f"rdma:{port.parent.parent.name}/{port.name}"] = words * WORDS_BYTES
    return out


def moved(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What moved between two ``counters``, largest first; unmoved entries left out."""
    delta = {k: after[k] - before[k] for k in after if k in before and after[k] > before[k]}
    return dict(sorted(delta.items(), key=lambda kv: -kv[1])[:16])
