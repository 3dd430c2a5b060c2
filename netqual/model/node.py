"""Nodes and their NICs as the inventory and the agents describe them."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_PORT = 18515


class Role(str, enum.Enum):
    COMPUTE = "compute"
    STORAGE = "storage"
    ANY = "any"


@dataclass(frozen=True)
class Nic:
    """One NIC of a node (inventory ``nics``, docs/rails.md): the interface name, its
    address (what a probe binds to and connects to), its rail, and the RDMA device on it."""

    name: str
    address: str
    rail: int
    device: str | None = None


@dataclass(frozen=True)
class IpInterface:
    """An IP interface an agent found on its node (``netqual check --nics``)."""

    name: str
    addresses: tuple[str, ...]  # IP literals, without prefix length
    mtu: int | None = None
    speed_mbps: int | None = None  # None: not reported (virtual, down, unreadable)


@dataclass(frozen=True)
class RdmaPort:
    """An RDMA device port an agent found: the netdev under it and its non-zero GIDs."""

    device: str
    port: int
    state: str
    netdev: str | None = None
    gids: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostNics:
    """What an agent reports of its NICs in the pre-flight check (docs/rails.md)."""

    interfaces: tuple[IpInterface, ...] = ()
    rdma: tuple[RdmaPort, ...] = ()


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    port: int = DEFAULT_PORT
    role: Role = Role.ANY
    rack: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # The agent must prove it is ``name`` (its --name); False for ``probe HOST:PORT``.
    verify_name: bool = True
    nics: tuple[Nic, ...] = ()
    # An endpoint below a node (netqual.planning.rails): ``name`` is "NODE/NIC" and ``address`` the
    # NIC's (what probes connect to and bind, what the bulk budget counts per host);
    # ``agent`` / ``agent_address`` are the node whose agent serves it and where that
    # agent takes requests; ``nic`` is the NIC.
    agent: str | None = None
    agent_address: str | None = None
    nic: Nic | None = None

    @property
    def identity(self) -> str | None:
        """The name the agent at this address must authenticate as, if known."""
        if not self.verify_name:
            return None
        return self.agent or self.name

    @property
    def node_name(self) -> str:
        """The node this is, or the node this endpoint belongs to."""
        return self.agent or self.name

    @property
    def control_address(self) -> str:
        """Where the coordinator asks this node's agent for a probe."""
        return self.agent_address or self.address

    @property
    def endpoint(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"


def node_nics(nodes: Sequence[Node]) -> dict[str, tuple[Nic, ...]]:
    """Each node's NICs, from a node list or from a run's endpoints (``NODE/NIC``)."""
    out: dict[str, tuple[Nic, ...]] = {}
    for n in nodes:
        if n.nic is not None and n.agent is not None:
            out[n.agent] = (*out.get(n.agent, ()), n.nic)
        else:
            out[n.name] = n.nics
    return out
