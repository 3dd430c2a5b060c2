"""Turn a ``Topology`` into a concrete build plan: namespaces, addresses, routes, relay links.

Pure computation, no system calls, so it is unit-tested without root. Addresses come only
from 198.18.0.0/15 (RFC 2544 benchmarking space): hosts get 198.18.<rack>.<10+i> on their
loopback, link ends get 198.19.<n>.<4k+1|2> point-to-point. Routes are per-host /32,
along shortest paths that transit routers only (hosts never forward).
"""

from __future__ import annotations

import enum
import hashlib
import itertools
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from netqual.lab.relay import RelayLink
from netqual.lab.topology import LinkSpec, Topology
from netqual.model.node import Role


class Kind(str, enum.Enum):
    HOST = "host"
    ROUTER = "router"
    CONTROL = "control"  # where the coordinator runs; not a measured host


CONTROL = "ctl"
CONTROL_ADDRESS = "198.18.0.2"


@dataclass(frozen=True)
class LabNic:
    """A host's NIC on a rail: the interface of its rail link and its address there."""

    name: str
    address: str
    rail: int


@dataclass(frozen=True)
class LabNode:
    """One namespace of the lab. ``address``/``rack``/``role``/``site``/``leaf`` are host-only."""

    name: str
    kind: Kind
    netns: str
    address: str | None = None
    rack: str | None = None
    role: Role | None = None
    site: str | None = None
    leaf: str | None = None  # the router the host hangs off
    nics: tuple[LabNic, ...] = ()  # one per rail link (docs/rails.md)


@dataclass(frozen=True)
class Interface:
    node: str
    ifname: str
    address: str
    peer: str
    peer_address: str
    mtu: int | None = None  # this end's own MTU (a host's ``mtu`` link); None: the lab's


@dataclass(frozen=True)
class Route:
    node: str
    dest: str  # host address, /32
    via: str
    ifname: str
    src: str | None  # hosts pin their own address as source


@dataclass(frozen=True)
class VethLink:
    a_netns: str
    a_ifname: str
    b_netns: str
    b_ifname: str


@dataclass(frozen=True)
class ShapedLink:
    """A rate-limited veth link: a tbf qdisc on each end's egress (both directions)."""

    a_netns: str
    a_ifname: str
    b_netns: str
    b_ifname: str
    rate_mbit: float
    queue_us: float
    mtu: int

    def tc_args(self) -> list[str]:
        """``tc qdisc add dev IF root`` arguments: the token bucket holds 1 ms of traffic
        (at least two frames) and the queue ``queue_us`` at the rate."""
        rate_bytes_per_s = self.rate_mbit * 1e6 / 8
        burst = max(2 * self.mtu + 64, round(rate_bytes_per_s / 1000))
        return [
            "tbf", "rate", f"{self.rate_mbit:g}mbit", "burst", str(burst),
            "latency", f"{self.queue_us:g}us",
        ]  # fmt: skip


@dataclass(frozen=True)
class LabPlan:
    topology: Topology
    prefix: str
    nodes: tuple[LabNode, ...]
    interfaces: tuple[Interface, ...]
    routes: tuple[Route, ...]
    relay_links: tuple[RelayLink, ...]
    veth_links: tuple[VethLink, ...]
    shaped_links: tuple[ShapedLink, ...]
    hops: tuple[tuple[str, str, int], ...]  # (src host, dst host, routers traversed + 1)

    @property
    def control(self) -> LabNode:
        return self.node(CONTROL)

    def node(self, name: str) -> LabNode:
        return next(n for n in self.nodes if n.name == name)

    def hop_count(self, src: str, dst: str) -> int:
        return next(h for s, d, h in self.hops if (s, d) in ((src, dst), (dst, src)))

    def route_path(self, src: str, dst: str) -> tuple[str, ...]:
        """The nodes a packet from ``src`` to ``dst`` visits, following the routes the lab
        installs (not a recomputed shortest path)."""
        dest = self.node(dst).address
        path = [src]
        while path[-1] != dst:
            node = path[-1]
            route = next(r for r in self.routes if r.node == node and r.dest == dest)
            path.append(
                next(i.peer for i in self.interfaces if i.node == node and i.ifname == route.ifname)
            )
            if path[-1] in path[:-1]:
                raise ValueError(f"routing loop from {src} to {dst} at {path[-1]}")
        return tuple(path)

    def link_delays_us(self, src: str, dst: str) -> tuple[float, ...]:
        """The one-way delay of each link from ``src`` to ``dst`` (0 for plain veths)."""
        delays = {frozenset((ln.a, ln.b)): ln.delay_us for ln in self.topology.links}
        path = self.route_path(src, dst)
        return tuple(delays.get(frozenset(hop), 0.0) for hop in itertools.pairwise(path))

    def one_way_delay_us(self, src: str, dst: str) -> float:
        return sum(self.link_delays_us(src, dst))

    def injected_rtt_us(self, a: str, b: str) -> float:
        """The round trip the topology injects between two hosts: both one-way sums."""
        return self.one_way_delay_us(a, b) + self.one_way_delay_us(b, a)


def prefix_for(state_dir: Path) -> str:
    """Namespace prefix derived from the state directory, so two labs never collide and a
    lost state file can still be swept by name."""
    digest = hashlib.sha1(str(state_dir.resolve()).encode()).hexdigest()[:4]
    return f"nql{digest}"


def ifname_to(peer: str) -> str:
    return f"to-{peer}"


def _link_addresses(index: int) -> tuple[str, str]:
    third, slot = divmod(index, 64)
    return f"198.19.{third}.{4 * slot + 1}", f"198.19.{third}.{4 * slot + 2}"


def rail_address(rail: int, host_index: int) -> str:
    """A host's address on a rail: one /24 per rail, 198.18.(200 + rail).(10 + index)."""
    return f"198.18.{200 + rail}.{10 + host_index}"


def build_plan(topo: Topology, prefix: str) -> LabPlan:
    racks: dict[str, list[str]] = {}
    for h in topo.hosts:
        racks.setdefault(h.rack, []).append(h.name)
    rack_index = {rack: i + 1 for i, rack in enumerate(racks)}
    routers = {r.name for r in topo.routers}
    # The control namespace hangs off a router by a plain veth, like a management port.
    links = [*topo.links, LinkSpec(CONTROL, topo.control_router, 0.0, None)]
    # Rail links carry only their rail's addresses: main routes never cross them.
    neighbours: dict[str, list[str]] = {n: [] for n in (*topo.node_names, CONTROL)}
    for ln in links:
        if ln.rail is None:
            neighbours[ln.a].append(ln.b)
            neighbours[ln.b].append(ln.a)

    nodes: list[LabNode] = []
    host_addr: dict[str, str] = {}
    for i, h in enumerate(topo.hosts):
        address = f"198.18.{rack_index[h.rack]}.{10 + racks[h.rack].index(h.name)}"
        host_addr[h.name] = address
        leaf = next((n for n in neighbours[h.name] if n in routers), None)
        nics = tuple(
            LabNic(ifname_to(ln.b if ln.a == h.name else ln.a), rail_address(ln.rail, i), ln.rail)
            for ln in sorted(topo.links, key=lambda x: x.rail or 0)
            if ln.rail is not None and h.name in (ln.a, ln.b)
        )
        nodes.append(
            LabNode(
                h.name, Kind.HOST, f"{prefix}-{h.name}", address, h.rack, h.role, h.site, leaf,
                nics,
            )
        )  # fmt: skip
    nodes += [LabNode(r.name, Kind.ROUTER, f"{prefix}-{r.name}") for r in topo.routers]
    nodes.append(LabNode(CONTROL, Kind.CONTROL, f"{prefix}-{CONTROL}", CONTROL_ADDRESS))
    ends = {**host_addr, CONTROL: CONTROL_ADDRESS}
    netns = {n.name: n.netns for n in nodes}

    interfaces: list[Interface] = []
    relay_links: list[RelayLink] = []
    veth_links: list[VethLink] = []
    shaped_links: list[ShapedLink] = []
    addr_on: dict[tuple[str, str], str] = {}  # (node, peer) -> node's address on that link
    for i, ln in enumerate(links):
        addr_a, addr_b = _link_addresses(i)
        addr_on[(ln.a, ln.b)] = addr_a
        addr_on[(ln.b, ln.a)] = addr_b
        mtu_a = ln.mtu if ln.a in host_addr else None
        mtu_b = ln.mtu if ln.b in host_addr else None
        interfaces.append(Interface(ln.a, ifname_to(ln.b), addr_a, ln.b, addr_b, mtu_a))
        interfaces.append(Interface(ln.b, ifname_to(ln.a), addr_b, ln.a, addr_a, mtu_b))
        if ln.relayed:
            relay_links.append(
                RelayLink(
                    name=f"{ln.a}-{ln.b}",
                    a_netns=f"/run/netns/{netns[ln.a]}",
                    a_ifname=ifname_to(ln.b),
                    b_netns=f"/run/netns/{netns[ln.b]}",
                    b_ifname=ifname_to(ln.a),
                    delay_ns=round(ln.delay_us * 1000),
                    rate_bps=None if ln.rate_mbit is None else round(ln.rate_mbit * 1e6),
                    loss_ppm=round(ln.loss_percent * 10_000),
                )
            )
        else:
            veth_links.append(VethLink(netns[ln.a], ifname_to(ln.b), netns[ln.b], ifname_to(ln.a)))
        if ln.shaped and ln.rate_mbit is not None:
            shaped_links.append(
                ShapedLink(
                    netns[ln.a],
                    ifname_to(ln.b),
                    netns[ln.b],
                    ifname_to(ln.a),
                    ln.rate_mbit,
                    ln.queue_us,
                    topo.mtu,
                )
            )

    routes: list[Route] = []
    hops: list[tuple[str, str, int]] = []
    host_names = list(host_addr)
    for dest, dest_address in ends.items():
        dist = _distances_to(dest, neighbours, routers)
        for node, near in neighbours.items():
            if node == dest or node not in dist:
                continue
            nxt = min((n for n in near if dist.get(n) == dist[node] - 1), key=near.index)
            routes.append(
                Route(node, dest_address, addr_on[(nxt, node)], ifname_to(nxt), ends.get(node))
            )
        if dest != CONTROL:
            hops += [(s, dest, dist[s]) for s in host_names if s < dest and s in dist]
    routes += _rail_routes(topo, nodes, addr_on, routers)
    return LabPlan(
        topo,
        prefix,
        tuple(nodes),
        tuple(interfaces),
        tuple(routes),
        tuple(relay_links),
        tuple(veth_links),
        tuple(shaped_links),
        tuple(hops),
    )


def _rail_routes(
    topo: Topology,
    nodes: list[LabNode],
    addr_on: dict[tuple[str, str], str],
    routers: set[str],
) -> list[Route]:
    """Per rail, routes to each host's rail address over that rail's links only (a rail
    plane is the router its hosts' rail links join), the hosts' own rail address as the
    source: a rail's traffic stays on its plane."""
    out: list[Route] = []
    for rail in sorted({ln.rail for ln in topo.links if ln.rail is not None}):
        near: dict[str, list[str]] = {}
        for ln in topo.links:
            if ln.rail == rail:
                near.setdefault(ln.a, []).append(ln.b)
                near.setdefault(ln.b, []).append(ln.a)
        own = {n.name: nic.address for n in nodes for nic in n.nics if nic.rail == rail}
        for dest, dest_address in own.items():
            dist = _distances_to(dest, near, routers)
            for node, hops in near.items():
                if node == dest or node not in dist or (node not in routers and node not in own):
                    continue
                nxt = min((n for n in hops if dist.get(n) == dist[node] - 1), key=hops.index)
                out.append(
                    Route(node, dest_address, addr_on[(nxt, node)], ifname_to(nxt), own.get(node))
                )
    return out


def _distances_to(dest: str, neighbours: dict[str, list[str]], routers: set[str]) -> dict[str, int]:
    """Links from every node to ``dest`` on paths whose intermediate nodes are routers."""
    dist = {dest: 0}
    queue = deque([dest])
    while queue:
        n = queue.popleft()
        if n != dest and n not in routers:
            continue  # a host is an end, never a transit
        for m in neighbours[n]:
            if m not in dist:
                dist[m] = dist[n] + 1
                queue.append(m)
    return dist
