"""The host path audit as JSON (the results file's ``hosts``, what an agent sends):
``netqual.model.hostpath``'s records with ``"unknown"`` for whatever sysfs did not say."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from netqual.model.hostpath import (
    UNKNOWN,
    Affinity,
    Bridge,
    GpuRail,
    HostAudit,
    HostDevice,
    Iommu,
    PcieLink,
    gpu_rail_table,
)
from netqual.model.node import Nic


def _u(value: object) -> object:
    return UNKNOWN if value is None else value


def link_to_dict(link: PcieLink) -> dict[str, Any]:
    return {
        "speed_gts": _u(link.speed_gts),
        "max_speed_gts": _u(link.max_speed_gts),
        "width": _u(link.width),
        "max_width": _u(link.max_width),
        "full": _u(link.full),
    }


def device_to_dict(d: HostDevice, nic: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": d.name,
        "bdf": d.bdf,
        "vendor": _u(d.vendor),
        "numa_node": _u(d.numa_node),
        "host_bridge": _u(d.host_bridge),
        "pcie_path": list(d.bridges),
        "link": link_to_dict(d.link),
    }
    if nic:
        out["netdevs"] = list(d.netdevs)
        out["rdma_devices"] = list(d.rdma_devices)
        out["relaxed_ordering"] = _u(d.relaxed_ordering)
        out["upstream"] = [
            {
                "bdf": b.bdf,
                "acs_redirect": _u(b.acs_redirect),
                "relaxed_ordering": _u(b.relaxed_ordering),
            }
            for b in d.upstream
        ]
    return out


def _gpu_to_dict(d: HostDevice, rail: GpuRail, rails: bool) -> dict[str, Any]:
    """A GPU with its best NIC and, in a results file of a node with inventory rails, its
    rail's NIC: derived from the rest (a reader recomputes them), written for readers."""
    out = device_to_dict(d, nic=False) | {
        "best_nic": _u(rail.best_nic),
        "best_class": rail.best_cls,
    }
    if rails:
        out |= {
            "rail_nic": _u(rail.rail_nic),
            "rail_class": rail.rail_cls,
            "rail_is_best": rail.rail_is_best,
        }
    return out


def to_dict(audit: HostAudit, nics: Sequence[Nic] = ()) -> dict[str, Any]:
    """``nics``: the node's inventory NICs (the results file), for each GPU's rail."""
    extra = {} if audit.error is None else {"error": audit.error}
    rails = gpu_rail_table(audit, nics)
    return extra | {
        "gpus": [_gpu_to_dict(g, r, bool(nics)) for g, r in zip(audit.gpus, rails, strict=True)],
        "nics": [device_to_dict(n, nic=True) for n in audit.nics],
        "affinity": [{"gpu": a.gpu, "nic": a.nic, "class": a.cls} for a in audit.affinity],
        "iommu": {
            "mode": audit.iommu.mode,
            "units": _u(audit.iommu.units),
            "cmdline": list(audit.iommu.cmdline),
        },
    }


def hosts_to_dict(
    hosts: Iterable[HostAudit], nics: Mapping[str, Sequence[Nic]] | None = None
) -> dict[str, Any]:
    return {h.node: to_dict(h, (nics or {}).get(h.node, ())) for h in hosts}


def known(value: object) -> Any:
    """``"unknown"`` (or a missing field) back to None."""
    return None if value == UNKNOWN else value


def from_dict(node: str, d: Mapping[str, Any]) -> HostAudit:
    """Inverse of ``to_dict`` for a document whose shape was already checked (the results
    schema, or ``netqual.agent.wire.hostpeer`` for what an agent sent)."""

    def link(x: Mapping[str, Any]) -> PcieLink:
        return PcieLink(
            known(x.get("speed_gts")),
            known(x.get("max_speed_gts")),
            known(x.get("width")),
            known(x.get("max_width")),
        )

    def device(x: Mapping[str, Any]) -> HostDevice:
        return HostDevice(
            name=x["name"],
            bdf=x["bdf"],
            vendor=known(x.get("vendor")),
            numa_node=known(x.get("numa_node")),
            host_bridge=known(x.get("host_bridge")),
            bridges=tuple(x.get("pcie_path", ())),
            link=link(x.get("link", {})),
            netdevs=tuple(x.get("netdevs", ())),
            rdma_devices=tuple(x.get("rdma_devices", ())),
            relaxed_ordering=known(x.get("relaxed_ordering")),
            upstream=tuple(
                Bridge(b["bdf"], known(b.get("acs_redirect")), known(b.get("relaxed_ordering")))
                for b in x.get("upstream", ())
            ),
        )

    iommu = d.get("iommu", {})
    return HostAudit(
        node=node,
        gpus=tuple(device(g) for g in d.get("gpus", ())),
        nics=tuple(device(n) for n in d.get("nics", ())),
        affinity=tuple(Affinity(a["gpu"], a["nic"], a["class"]) for a in d.get("affinity", ())),
        iommu=Iommu(
            mode=iommu.get("mode", UNKNOWN),
            units=known(iommu.get("units")),
            cmdline=tuple(iommu.get("cmdline", ())),
        ),
        error=d.get("error"),
    )
