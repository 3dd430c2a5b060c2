"""The fabric's capacity as the inventory states it (docs/scheduling.md "The fabric").

Per node ``nic_gbps``; per rack or site (``[rack.NAME]``, ``[site.NAME]``) either
``uplink_gbps`` (what its uplinks carry in total) or ``oversubscription`` (its nodes' line
rate divided by it). Nothing stated means the common modern leaf: 100 Gbit/s NICs and a
non-blocking fabric, where a rack's uplinks carry every one of its nodes at line rate.

The bulk budget (netqual.planning.phases) turns these rates into how many bulk pairs each shared
resource carries at once; this module only holds and checks the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from netqual.model.node import Node

DEFAULT_NIC_GBPS = 100.0


@dataclass(frozen=True)
class Uplink:
    """A rack's or site's stated capacity: one of the two, never both (inventory check)."""

    uplink_gbps: float | None = None
    oversubscription: float | None = None

    def capacity_gbps(self, members_gbps: float) -> float:
        if self.uplink_gbps is not None:
            return self.uplink_gbps
        return members_gbps / (self.oversubscription or 1.0)

    def to_dict(self) -> dict[str, float]:
        if self.uplink_gbps is not None:
            return {"uplink_gbps": self.uplink_gbps}
        return {"oversubscription": self.oversubscription or 1.0}


@dataclass(frozen=True)
class Fabric:
    """Stated rates only; anything absent takes the defaults above."""

    nic_gbps: Mapping[str, float] = field(default_factory=dict)  # node name -> NIC rate
    racks: Mapping[str, Uplink] = field(default_factory=dict)
    sites: Mapping[str, Uplink] = field(default_factory=dict)

    def nic(self, node: Node) -> float:
        """The node's stated line rate; an endpoint below the node (``NODE/NIC``,
        docs/rails.md) has its node's: ``nic_gbps`` is stated per node, for each NIC."""
        return self.nic_gbps.get(node.name, self.nic_gbps.get(node.node_name, DEFAULT_NIC_GBPS))

    def group(self, kind: str, name: str) -> Uplink:
        table = self.racks if kind == "rack" else self.sites
        return table.get(name, Uplink())

    def assumption(self) -> str:
        """One line for ``run.schedule.fabric`` and the dry run."""
        stated = [
            f"{len(t)} {kind}{'s' if len(t) != 1 else ''}"
            for kind, t in (("rack", self.racks), ("site", self.sites), ("NIC", self.nic_gbps))
            if t
        ]
        if not stated:
            return (
                f"non-blocking, {DEFAULT_NIC_GBPS:g} Gbit/s NICs (nothing stated in the inventory)"
            )
        return f"from the inventory ({', '.join(stated)} stated); the rest non-blocking"

    def to_dict(self) -> dict[str, Any]:
        return {
            "assumption": self.assumption(),
            "default_nic_gbps": DEFAULT_NIC_GBPS,
            "racks": {k: v.to_dict() for k, v in sorted(self.racks.items())},
            "sites": {k: v.to_dict() for k, v in sorted(self.sites.items())},
        }


def group_names(nodes: Iterable[Node]) -> tuple[set[str], set[str]]:
    """Racks and sites that nodes name (an inventory may only describe those)."""
    racks = {n.rack for n in nodes if n.rack is not None}
    sites = {s for n in nodes if (s := n.labels.get("site")) is not None}
    return racks, sites
