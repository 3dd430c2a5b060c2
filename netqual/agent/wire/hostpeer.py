"""An agent's host path audit (its ``hostpath`` reply) read through ``messages.Fields``:
every name must be a plain name (``names.NAME_PATTERN``), every number bounded, every list
bounded; a bad field is one ``bad-request`` naming it. What passes is a ``HostAudit``."""

from __future__ import annotations

from typing import Any

from netqual.agent.wire.messages import Fields
from netqual.base.errors import BadRequestError
from netqual.model.hostpath import (
    AFFINITY_CLASSES,
    UNKNOWN,
    Affinity,
    Bridge,
    HostAudit,
    HostDevice,
    Iommu,
    PcieLink,
)

MAX_DEVICES = 256  # GPUs, and NICs (functions), a host may report
MAX_BRIDGES = 16  # PCIe nesting below a host bridge
IOMMU_MODES = ("off", "passthrough", "translated", UNKNOWN)


def _list(f: Fields, key: str, most: int) -> list[Any]:
    value = f.body.get(key, [])
    if not isinstance(value, list) or len(value) > most:
        raise BadRequestError(f.peer, f"{f.where}.{key}", f"must be a list of at most {most}")
    return value


def _names(f: Fields, key: str, most: int) -> tuple[str, ...]:
    items = _list(f, key, most)
    holder = Fields({f"{key}[{i}]": v for i, v in enumerate(items)}, f.where, f.peer)
    return tuple(holder.name(f"{key}[{i}]") for i in range(len(items)))


def _unknown(f: Fields, key: str) -> bool:
    return f.body.get(key, UNKNOWN) in (UNKNOWN, None)


def _int(f: Fields, key: str, low: int, high: int) -> int | None:
    return None if _unknown(f, key) else f.integer(key, low, high)


def _flag(f: Fields, key: str) -> bool | None:
    return None if _unknown(f, key) else f.flag(key)


def _link(f: Fields) -> PcieLink:
    return PcieLink(
        speed_gts=None if _unknown(f, "speed_gts") else f.number("speed_gts", 0, 1000),
        max_speed_gts=None if _unknown(f, "max_speed_gts") else f.number("max_speed_gts", 0, 1000),
        width=_int(f, "width", 1, 64),
        max_width=_int(f, "max_width", 1, 64),
    )


def _device(f: Fields) -> HostDevice:
    link = f.obj("link", None)
    upstream = []
    for i, item in enumerate(_list(f, "upstream", MAX_BRIDGES)):
        b = Fields(item, f"{f.where}.upstream[{i}]", f.peer)
        upstream.append(
            Bridge(b.name("bdf"), _flag(b, "acs_redirect"), _flag(b, "relaxed_ordering"))
        )
    return HostDevice(
        name=f.name("name"),
        bdf=f.name("bdf"),
        vendor=None if _unknown(f, "vendor") else f.name("vendor"),
        numa_node=_int(f, "numa_node", 0, 4095),
        host_bridge=None if _unknown(f, "host_bridge") else f.name("host_bridge"),
        bridges=_names(f, "pcie_path", MAX_BRIDGES),
        link=PcieLink() if link is None else _link(link),
        netdevs=_names(f, "netdevs", 64),
        rdma_devices=_names(f, "rdma_devices", 64),
        relaxed_ordering=_flag(f, "relaxed_ordering"),
        upstream=tuple(upstream),
    )


def from_peer(body: object, peer: str, node: str) -> HostAudit:
    """The audit ``peer`` sent for ``node``; ``BadRequestError`` names a bad field."""
    f = Fields(body, "hostpath", peer)
    gpus = tuple(
        _device(Fields(x, f"hostpath.gpus[{i}]", peer))
        for i, x in enumerate(_list(f, "gpus", MAX_DEVICES))
    )
    nics = tuple(
        _device(Fields(x, f"hostpath.nics[{i}]", peer))
        for i, x in enumerate(_list(f, "nics", MAX_DEVICES))
    )
    known = {d.name for d in gpus} | {d.name for d in nics}
    affinity = []
    for i, x in enumerate(_list(f, "affinity", MAX_DEVICES * MAX_DEVICES)):
        a = Fields(x, f"hostpath.affinity[{i}]", peer)
        gpu, nic = a.name("gpu"), a.name("nic")
        if gpu not in known or nic not in known:
            raise BadRequestError(peer, a.where, "names a GPU or NIC the audit does not list")
        affinity.append(Affinity(gpu, nic, a.choice("class", (*AFFINITY_CLASSES, UNKNOWN))))
    iommu = f.obj("iommu", None)
    return HostAudit(
        node=node,
        gpus=gpus,
        nics=nics,
        affinity=tuple(affinity),
        iommu=Iommu()
        if iommu is None
        else Iommu(
            mode=iommu.choice("mode", IOMMU_MODES, UNKNOWN),
            units=_int(iommu, "units", 0, 4096),
            cmdline=iommu.strings("cmdline"),
        ),
    )
