"""What an agent reports of its NICs (docs/rails.md): IP interfaces (addresses, MTU, speed)
and RDMA ports (state, the netdev under them, non-zero GIDs).

The agent answers a ``nics`` request with ``to_wire(collect())`` in the pre-flight check;
``from_peer`` is the coordinator's side: every field a peer sent is read through
``messages.Fields`` (names and addresses checked, counts bounded), so a hostile agent can
neither grow the coordinator's memory nor put control characters on a terminal. Whatever
the platform does not expose is left out, never an error.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from netqual.agent import nicsysfs
from netqual.agent.wire.messages import Fields
from netqual.base.errors import BadRequestError
from netqual.base.names import nic_name_problem
from netqual.model.node import HostNics, IpInterface, RdmaPort

MAX_INTERFACES = 64
MAX_ADDRESSES = 16
MAX_PORTS = 64
MAX_GIDS = 16
IP_TIMEOUT_S = 2.0


def collect(root: Path = Path("/")) -> HostNics:
    """This host's interfaces (``ip -j address``, with MTU and speed from sysfs) and RDMA
    ports, their facts from sysfs through ``agent/nicsysfs`` (the configuration snapshot's
    reader too). ``root`` moves sysfs for tests."""
    return HostNics(_interfaces(root), _rdma(root))


def _interfaces(root: Path) -> tuple[IpInterface, ...]:
    ip = shutil.which("ip")
    if ip is None:
        return ()
    try:
        argv = [ip, "-j", "address", "show"]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
        out = done.stdout
        items = json.loads(out or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    found = []
    for item in items if isinstance(items, list) else []:
        name = item.get("ifname") if isinstance(item, dict) else None
        if not isinstance(name, str) or nic_name_problem(name) is not None:
            continue
        addresses = tuple(
            str(a["local"])
            for a in item.get("addr_info", [])
            if isinstance(a, dict) and isinstance(a.get("local"), str)
        )
        facts = nicsysfs.netdev(root, name)
        found.append(IpInterface(name, addresses[:MAX_ADDRESSES], facts.mtu, facts.speed_mbps))
    return tuple(found[:MAX_INTERFACES])


def _rdma(root: Path) -> tuple[RdmaPort, ...]:
    ports = [p for dev in nicsysfs.rdma_devices(root, _populated(root)) for p in dev.ports]
    return tuple(
        RdmaPort(p.device, p.port, p.state, p.netdev, tuple(g.entry.gid for g in p.gids[:MAX_GIDS]))
        for p in ports[:MAX_PORTS]
    )


def _populated(root: Path) -> nicsysfs.Slots | None:
    """The populated GID slots per port where this process has pyverbs loaded already (an
    agent told its device, or after the pre-flight's snapshot or a probe): one verbs call a
    device instead of one sysfs file a slot. None (walk sysfs) otherwise: this answer
    imports nothing, and a fixture tree is not the running kernel."""
    from netqual.transports.rdma import devices, verbs

    pv = verbs.loaded()
    if pv is None or root != Path("/"):
        return None
    try:
        return nicsysfs.populated_slots(devices.scan(pv))
    except Exception:  # no device, a provider error: walk
        return None


def to_wire(nics: HostNics) -> dict[str, Any]:
    return {
        "interfaces": [
            {
                "name": i.name,
                "addresses": list(i.addresses),
                "mtu": i.mtu,
                "speed_mbps": i.speed_mbps,
            }
            for i in nics.interfaces
        ],
        "rdma": [
            {
                "device": p.device,
                "port": p.port,
                "state": p.state,
                "netdev": p.netdev,
                "gids": list(p.gids),
            }
            for p in nics.rdma
        ],
    }


def from_peer(body: Mapping[str, Any], node: str, peer: str) -> HostNics:
    """The ``nics`` answer of ``node``'s agent, every field checked (BadRequestError names
    the first bad one)."""
    f = Fields(body, "nics", peer)
    interfaces = []
    for i, item in enumerate(_list(f, "interfaces", MAX_INTERFACES)):
        g = Fields(item, f"nics.interfaces[{i}]", peer)
        name = _name(g, "name")
        addresses = tuple(
            _address(g, f"addresses[{k}]", a)
            for k, a in enumerate(_list(g, "addresses", MAX_ADDRESSES))
        )
        interfaces.append(
            IpInterface(
                name, addresses, _opt_int(g, "mtu", 1 << 20), _opt_int(g, "speed_mbps", 1 << 30)
            )
        )
    ports = []
    for i, item in enumerate(_list(f, "rdma", MAX_PORTS)):
        g = Fields(item, f"nics.rdma[{i}]", peer)
        gids = _list(g, "gids", MAX_GIDS)
        for k, gid in enumerate(gids):
            if (
                not isinstance(gid, str)
                or len(gid) != 39
                or not all(c in "0123456789abcdef:" for c in gid)
            ):
                raise BadRequestError(peer, f"nics.rdma[{i}].gids[{k}]", "not a GID")
        netdev = None if g.body.get("netdev") is None else _name(g, "netdev")
        ports.append(
            RdmaPort(
                _name(g, "device", device=True), g.integer("port", 1, 255), g.string("state", 32),
                netdev, tuple(gids),
            )
        )  # fmt: skip
    return HostNics(tuple(interfaces), tuple(ports))


def _list(f: Fields, key: str, most: int) -> list[Any]:
    value = f.body.get(key, [])
    if not isinstance(value, list) or len(value) > most:
        raise BadRequestError(f.peer, f"{f.where}.{key}", f"must be a list of <= {most} items")
    return value


def _name(f: Fields, key: str, device: bool = False) -> str:
    value = f.body.get(key)
    if (problem := nic_name_problem(value, device=device)) is not None:
        raise BadRequestError(f.peer, f"{f.where}.{key}", problem)
    assert isinstance(value, str)
    return value


def _address(f: Fields, where: str, value: Any) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise BadRequestError(f.peer, f"{f.where}.{where}", "not an IP address") from None


def _opt_int(f: Fields, key: str, high: int) -> int | None:
    return None if f.body.get(key) is None else f.integer(key, 0, high)
