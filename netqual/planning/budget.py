"""The bulk budget: how many bulk pairs each shared resource (host NIC, rack uplink, site
link) carries at once, from the probe plan and the stated fabric (netqual.planning.fabric).

How the caps are derived: docs/scheduling.md "The bulk budget" and "The fabric". The
phases (netqual.planning.phases) pack bulk pairs into waves under these caps
(netqual.planning.packing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.planning.fabric import Fabric
from netqual.planning.packing import Caps

# The reference fabric the default caps protect: 100 GbE host NICs and rack uplinks,
# a 10 us base round trip, and 10% headroom so that a wave never drives a link to line rate
# with more than one stream.
REFERENCE_LINK_GBPS = 100.0
REFERENCE_RTT_US = 10.0
HEADROOM = 0.9


@dataclass(frozen=True)
class BulkBudget:
    per_node: int  # a host at the default NIC rate (or --bulk-per-node)
    per_rack: int  # a rack uplink or site link when the fabric does not say (or --bulk-per-rack)
    incast: int | None
    stream_gbps: float  # estimated demand of one bulk pair at the plan's largest cell
    caps: Caps | None = None  # per host, rack and site, from the fabric (``resolve``)
    fabric: Fabric = field(default_factory=Fabric)

    def packing_caps(self) -> Caps:
        return self.caps or Caps(self.per_node, self.per_rack)

    def to_dict(self) -> dict[str, Any]:
        caps = self.packing_caps()
        out: dict[str, Any] = {
            "bulk_per_node": self.per_node,
            "bulk_per_rack": self.per_rack,
            "incast": self.incast,
            "stream_gbps_estimate": round(self.stream_gbps, 3),
            "reference_link_gbps": REFERENCE_LINK_GBPS,
            "fabric": self.fabric.to_dict(),
        }
        if caps.racks:
            out["rack_caps"] = {"min": min(caps.racks.values()), "max": max(caps.racks.values())}
        if caps.sites:
            out["site_caps"] = {"min": min(caps.sites.values()), "max": max(caps.sites.values())}
        return out


def stream_gbps(chunk_bytes: int, depth: int, link_gbps: float, rtt_us: float) -> float:
    """Rate one bulk pair can drive: ``depth`` reads of ``chunk_bytes`` in flight, each
    taking a round trip plus its serialisation (Little's law), at most the line rate."""
    read_us = rtt_us + chunk_bytes * 8 / (link_gbps * 1e3)
    return min(link_gbps, depth * chunk_bytes * 8 / (read_us * 1e3))


def link_cap(plan: ProbePlan, link_gbps: float) -> tuple[int, float]:
    """(bulk pairs a link of ``link_gbps`` carries below saturation, one pair's demand).

    The demand is that of the plan's most demanding cell; a cap is never below 1 (one
    stream alone may fill a link: that is the bulk measurement itself)."""
    if not plan.bulk:
        return 1, 0.0
    demand = max(
        stream_gbps(c, d, link_gbps, REFERENCE_RTT_US)
        for c in plan.chunks_bytes
        for d in plan.depths
    )
    return max(1, math.floor(HEADROOM * link_gbps / demand)), demand


def default_cap(plan: ProbePlan) -> tuple[int, float]:
    """``link_cap`` of the reference 100 GbE link."""
    return link_cap(plan, REFERENCE_LINK_GBPS)


def budget_for(
    plan: ProbePlan,
    nodes: Sequence[Node],
    fabric: Fabric,
    forced_node: int | None,
    forced_rack: int | None,
    incast: int | None,
) -> BulkBudget:
    """Caps per host from its NIC, per rack and site from what its uplink carries of its
    hosts' streams (docs/scheduling.md "The fabric"); a forced cap (--bulk-per-node,
    --bulk-per-rack) wins."""
    cap, demand = default_cap(plan)
    per_node, per_rack = forced_node or cap, forced_rack or cap
    hosts: dict[str, tuple[float, int]] = {}  # address -> (NIC Gbit/s, its cap)
    for n in nodes:
        if n.address not in hosts:
            nic = fabric.nic(n)
            hosts[n.address] = (nic, forced_node or link_cap(plan, nic)[0])
    groups: dict[tuple[str, str], dict[str, tuple[float, int]]] = {}
    for n in nodes:
        for kind, name in (("rack", n.rack), ("site", n.labels.get("site"))):
            if name is not None:
                groups.setdefault((kind, name), {})[n.address] = hosts[n.address]
    group_caps: dict[str, dict[str, int]] = {"rack": {}, "site": {}}
    for (kind, name), members in groups.items():
        if forced_rack is not None:
            group_caps[kind][name] = forced_rack
            continue
        line = sum(nic for nic, _ in members.values())
        slots = sum(c for _, c in members.values())
        carried = fabric.group(kind, name).capacity_gbps(line) / line
        group_caps[kind][name] = max(1, math.floor(carried * slots + 1e-9))
    caps = Caps(
        per_node,
        per_rack,
        hosts={a: c for a, (_, c) in hosts.items()},
        racks=group_caps["rack"],
        sites=group_caps["site"],
    )
    return BulkBudget(per_node, per_rack, incast, demand, caps, fabric)


__all__ = [
    "HEADROOM",
    "REFERENCE_LINK_GBPS",
    "REFERENCE_RTT_US",
    "BulkBudget",
    "budget_for",
    "default_cap",
    "link_cap",
    "stream_gbps",
]
