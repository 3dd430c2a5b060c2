"""Lab topology: hosts, routers and delayed links, read from TOML (format: docs/lab.md).

Every mistake names the file and the field (``TopologyError``). Nothing here touches the
system; ``netqual.lab.layout`` turns a ``Topology`` into namespaces, addresses and routes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from netqual.base.errors import TopologyError
from netqual.files.tomlfile import Fields, read_toml
from netqual.model.node import DEFAULT_PORT, Role

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,11}$")  # interface names are "to-" + peer name
RESERVED = {"ctl"}  # the control namespace
MAX_DELAY_US = 100_000.0
MAX_LOSS_PERCENT = 50.0
DEFAULT_QUEUE_US = 5_000.0  # a shaped link's queue: this long at its rate (tbf latency)
MAX_HOSTS = 200
MAX_RAIL = 15  # rail r's NICs get 198.18.(200 + r).(10 + host index)


@dataclass(frozen=True)
class HostSpec:
    name: str
    rack: str
    role: Role
    site: str  # "local" or any other site name; different site -> remote tier


@dataclass(frozen=True)
class RouterSpec:
    name: str


@dataclass(frozen=True)
class LinkSpec:
    a: str
    b: str
    delay_us: float  # one way, each direction
    rate_mbit: float | None  # None: not rate-limited
    queue_us: float = DEFAULT_QUEUE_US  # shaped links: queue depth in time at the rate
    loss_percent: float = 0.0  # packets the relay drops at random, each direction
    # A host's NIC on this rail (docs/rails.md): the link carries only that rail's traffic,
    # between the hosts' addresses on the rail; None: the host's main link.
    rail: int | None = None
    mtu: int | None = None  # the host's interface on this link (a misset NIC); None: the lab's

    @property
    def relayed(self) -> bool:
        """A link with a delay or a loss goes through the relay (which also applies its
        rate): this kernel has no netem."""
        return self.delay_us > 0 or self.loss_percent > 0

    @property
    def shaped(self) -> bool:
        """A rate without a delay: a veth pair with a kernel tbf qdisc on both ends."""
        return self.delay_us == 0 and self.rate_mbit is not None


@dataclass(frozen=True)
class Topology:
    name: str
    source: str  # file it came from, for messages
    hosts: tuple[HostSpec, ...]
    routers: tuple[RouterSpec, ...]
    links: tuple[LinkSpec, ...]
    control_router: str = ""  # where the coordinator's namespace attaches
    mtu: int = 9000
    port: int = DEFAULT_PORT

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts) + tuple(r.name for r in self.routers)


def default_topology_path() -> Path:
    return Path(str(resources.files("netqual.lab") / "topologies" / "default.toml"))


def load_default() -> Topology:
    return load(default_topology_path())


def load(path: Path) -> Topology:
    # the one TOML reader of input files: bounds, and syntax errors that name the line
    return parse(read_toml(path, TopologyError), str(path))


def _error(source: str, problem: str, field: str | None) -> TopologyError:
    return TopologyError(source, problem, field)


def _name(f: Fields) -> str:
    value = f.text("name")
    if not NAME_RE.match(value):
        raise f.fail("name", "must be 1-12 characters of a-z, 0-9, '-', starting with a letter")
    return value


def parse(raw: Mapping[str, Any], source: str) -> Topology:
    top = Fields(source, raw, "", _error)
    top.check_keys({"lab", "host", "router", "link"})
    lab = top.sub("lab", {"name", "mtu", "port", "control"})
    name = lab.text("name", "lab")
    mtu = lab.number("mtu", 9000, positive=False)
    port = lab.number("port", DEFAULT_PORT, positive=False)
    if not (576 <= mtu <= 65_000) or mtu != int(mtu):
        raise lab.fail("mtu", "must be an integer from 576 to 65000")
    if not (1 <= port <= 65_535) or port != int(port):
        raise lab.fail("port", "must be a port number")

    hosts = [
        HostSpec(
            name=_name(h),
            rack=h.text("rack"),
            role=h.choice(Role, "role", Role.COMPUTE),
            site=h.text("site", "local"),
        )
        for h in top.tables("host", {"name", "rack", "role", "site"})
    ]
    routers = [RouterSpec(_name(r)) for r in top.tables("router", {"name"})]
    if not hosts:
        raise top.fail("host", "a lab needs at least two hosts")
    if len(hosts) > MAX_HOSTS:
        raise top.fail("host", f"at most {MAX_HOSTS} hosts")

    names = [h.name for h in hosts] + [r.name for r in routers]
    seen: set[str] = set()
    for n in names:
        if n in RESERVED:
            raise top.fail("host/router", f"name {n!r} is reserved")
        if n in seen:
            raise top.fail("host/router", f"name {n!r} is used twice")
        seen.add(n)

    links = []
    pairs: set[frozenset[str]] = set()
    keys = {"a", "b", "delay_us", "rate_mbit", "queue_us", "loss_percent", "rail", "mtu"}
    for ln in top.tables("link", keys):
        a, b = ln.text("a"), ln.text("b")
        for key, end in (("a", a), ("b", b)):
            if end not in seen:
                raise ln.fail(key, f"no host or router named {end!r}")
        if a == b or frozenset((a, b)) in pairs:
            raise ln.fail("", "links join two different nodes, once")
        pairs.add(frozenset((a, b)))
        delay = ln.number("delay_us", 0.0, positive=False)
        if not 0.0 <= delay <= MAX_DELAY_US:
            raise ln.fail("delay_us", f"must be 0 to {MAX_DELAY_US:g}")
        rate = ln.maybe_number("rate_mbit")
        queue = ln.maybe_number("queue_us", positive=False)
        if queue is not None and (rate is None or delay > 0):
            raise ln.fail("queue_us", "only for a rate-limited link without delay")
        if queue is not None and not 100.0 <= queue <= 1_000_000.0:
            raise ln.fail("queue_us", "must be 100 to 1000000")
        loss = ln.number("loss_percent", 0.0, positive=False)
        if not 0.0 <= loss <= MAX_LOSS_PERCENT:
            raise ln.fail("loss_percent", f"must be 0 to {MAX_LOSS_PERCENT:g}")
        if loss and rate is not None and delay == 0:
            raise ln.fail("", "a lossy link needs a delay to be rate-limited")
        rail = ln.maybe_number("rail", positive=False)
        if rail is not None and (rail != int(rail) or not 0 <= rail <= MAX_RAIL):
            raise ln.fail("rail", f"must be an integer 0 to {MAX_RAIL}")
        on_rail = None if rail is None else int(rail)
        link_mtu = ln.maybe_number("mtu", positive=False)
        if link_mtu is not None and (not 576 <= link_mtu <= 65_000 or link_mtu != int(link_mtu)):
            raise ln.fail("mtu", "must be an integer from 576 to 65000")
        own_mtu = None if link_mtu is None else int(link_mtu)
        spec = LinkSpec(a, b, delay, rate, queue or DEFAULT_QUEUE_US, loss, on_rail, own_mtu)
        links.append(spec)

    host_names = {h.name for h in hosts}
    _check_rails(source, links, host_names)
    for i, host in enumerate(hosts):
        if not any(host.name in (link.a, link.b) for link in links):
            raise TopologyError(source, "host has no link", f"host[{i}]")
    for i, link in enumerate(links):
        if link.a in host_names and link.b in host_names:
            raise TopologyError(
                source, "hosts do not forward; join hosts through a router", f"link[{i}]"
            )
        if link.mtu is not None and not {link.a, link.b} & host_names:
            raise TopologyError(source, "mtu: only a host's link has one", f"link[{i}].mtu")
    if not routers:
        raise TopologyError(source, "a lab needs at least one router", "router")
    control = lab.text("control", routers[0].name)
    if control not in {r.name for r in routers}:
        raise lab.fail("control", f"no router named {control!r}")
    topo = Topology(
        name, source, tuple(hosts), tuple(routers), tuple(links), control, int(mtu), int(port)
    )
    _check_connected(topo)
    return topo


def _check_rails(source: str, links: list[LinkSpec], hosts: set[str]) -> None:
    """A rail link joins a host and a router (the rail's switch plane); a host has one link
    per rail and a main link besides (the control network reaches its agent there)."""
    seen: set[tuple[str, int]] = set()
    for i, ln in enumerate(links):
        if ln.rail is None:
            continue
        host = ln.a if ln.a in hosts else ln.b if ln.b in hosts else None
        if host is None:
            raise TopologyError(source, "a rail link joins a host and a router", f"link[{i}].rail")
        if (host, ln.rail) in seen:
            raise TopologyError(
                source, f"host {host!r} has two links on rail {ln.rail}", f"link[{i}].rail"
            )
        seen.add((host, ln.rail))
    for host, rail in sorted(seen):
        if not any(ln.rail is None and host in (ln.a, ln.b) for ln in links):
            raise TopologyError(
                source, f"host {host!r} has rail {rail} but no main link (without rail)", "link"
            )


def _check_connected(topo: Topology) -> None:
    reach = {topo.hosts[0].name}
    frontier = [topo.hosts[0].name]
    while frontier:
        n = frontier.pop()
        for ln in topo.links:
            for x, y in ((ln.a, ln.b), (ln.b, ln.a)):
                if x == n and y not in reach:
                    reach.add(y)
                    frontier.append(y)
    for h in topo.hosts:
        if h.name not in reach:
            raise TopologyError(
                topo.source, f"host {h.name!r} cannot reach {topo.hosts[0].name!r}", "link"
            )
