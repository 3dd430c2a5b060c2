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

from netqual.choices import ChoiceError, parse_choice
from netqual.errors import TopologyError
from netqual.models import DEFAULT_PORT, Role
from netqual.tomlfile import read_toml

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


def _keys(source: str, raw: Mapping[str, Any], where: str, allowed: set[str]) -> None:
    for k in raw:
        if k not in allowed:
            field = f"{where}.{k}" if where else k
            problem = f"unknown key (allowed: {', '.join(sorted(allowed))})"
            raise TopologyError(source, problem, field)


def _str(source: str, raw: Mapping[str, Any], key: str, where: str, default: str | None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value:
        raise TopologyError(source, "must be a non-empty string", f"{where}.{key}")
    return value


def _name(source: str, raw: Mapping[str, Any], where: str) -> str:
    value = _str(source, raw, "name", where, None)
    if not NAME_RE.match(value):
        raise TopologyError(
            source,
            "must be 1-12 characters of a-z, 0-9, '-', starting with a letter",
            f"{where}.name",
        )
    return value


def _number(source: str, raw: Mapping[str, Any], key: str, where: str) -> float | None:
    if key not in raw:
        return None
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TopologyError(source, "must be a number", f"{where}.{key}")
    return float(value)


def _list(source: str, raw: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = raw.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise TopologyError(source, "must be an array of tables ([[...]])", key)
    return items


def parse(raw: Mapping[str, Any], source: str) -> Topology:
    _keys(source, raw, "", {"lab", "host", "router", "link"})
    lab = raw.get("lab", {})
    if not isinstance(lab, dict):
        raise TopologyError(source, "must be a table", "lab")
    _keys(source, lab, "lab", {"name", "mtu", "port", "control"})
    name = _str(source, lab, "name", "lab", "lab")
    mtu = _number(source, lab, "mtu", "lab") or 9000.0
    port = _number(source, lab, "port", "lab") or float(DEFAULT_PORT)
    if not (576 <= mtu <= 65_000) or mtu != int(mtu):
        raise TopologyError(source, "must be an integer from 576 to 65000", "lab.mtu")
    if not (1 <= port <= 65_535) or port != int(port):
        raise TopologyError(source, "must be a port number", "lab.port")

    hosts: list[HostSpec] = []
    for i, h in enumerate(_list(source, raw, "host")):
        where = f"host[{i}]"
        _keys(source, h, where, {"name", "rack", "role", "site"})
        role_text = _str(source, h, "role", where, "compute")
        try:
            role = parse_choice(Role, role_text, f"{where}.role")
        except ChoiceError as err:
            raise TopologyError(source, err.problem, err.where) from err
        hosts.append(
            HostSpec(
                name=_name(source, h, where),
                rack=_str(source, h, "rack", where, None),
                role=role,
                site=_str(source, h, "site", where, "local"),
            )
        )
    routers = []
    for i, r in enumerate(_list(source, raw, "router")):
        where = f"router[{i}]"
        _keys(source, r, where, {"name"})
        routers.append(RouterSpec(_name(source, r, where)))
    if not hosts:
        raise TopologyError(source, "a lab needs at least two hosts", "host")
    if len(hosts) > MAX_HOSTS:
        raise TopologyError(source, f"at most {MAX_HOSTS} hosts", "host")

    names = [h.name for h in hosts] + [r.name for r in routers]
    seen: set[str] = set()
    for n in names:
        if n in RESERVED:
            raise TopologyError(source, f"name {n!r} is reserved", "host/router")
        if n in seen:
            raise TopologyError(source, f"name {n!r} is used twice", "host/router")
        seen.add(n)

    links = []
    pairs: set[frozenset[str]] = set()
    for i, ln in enumerate(_list(source, raw, "link")):
        where = f"link[{i}]"
        keys = {"a", "b", "delay_us", "rate_mbit", "queue_us", "loss_percent", "rail"}
        _keys(source, ln, where, keys)
        a = _str(source, ln, "a", where, None)
        b = _str(source, ln, "b", where, None)
        for key, end in (("a", a), ("b", b)):
            if end not in seen:
                raise TopologyError(source, f"no host or router named {end!r}", f"{where}.{key}")
        if a == b or frozenset((a, b)) in pairs:
            raise TopologyError(source, "links join two different nodes, once", where)
        pairs.add(frozenset((a, b)))
        delay = _number(source, ln, "delay_us", where) or 0.0
        if not 0.0 <= delay <= MAX_DELAY_US:
            raise TopologyError(source, f"must be 0 to {MAX_DELAY_US:g}", f"{where}.delay_us")
        rate = _number(source, ln, "rate_mbit", where)
        if rate is not None and rate <= 0:
            raise TopologyError(source, "must be positive", f"{where}.rate_mbit")
        queue = _number(source, ln, "queue_us", where)
        if queue is not None and (rate is None or delay > 0):
            raise TopologyError(
                source, "only for a rate-limited link without delay", f"{where}.queue_us"
            )
        if queue is not None and not 100.0 <= queue <= 1_000_000.0:
            raise TopologyError(source, "must be 100 to 1000000", f"{where}.queue_us")
        loss = _number(source, ln, "loss_percent", where) or 0.0
        if not 0.0 <= loss <= MAX_LOSS_PERCENT:
            raise TopologyError(
                source, f"must be 0 to {MAX_LOSS_PERCENT:g}", f"{where}.loss_percent"
            )
        if loss and rate is not None and delay == 0:
            raise TopologyError(source, "a lossy link needs a delay to be rate-limited", where)
        rail = _number(source, ln, "rail", where)
        if rail is not None and (rail != int(rail) or not 0 <= rail <= MAX_RAIL):
            raise TopologyError(source, f"must be an integer 0 to {MAX_RAIL}", f"{where}.rail")
        on_rail = None if rail is None else int(rail)
        links.append(LinkSpec(a, b, delay, rate, queue or DEFAULT_QUEUE_US, loss, rail=on_rail))

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
    if not routers:
        raise TopologyError(source, "a lab needs at least one router", "router")
    control = _str(source, lab, "control", "lab", routers[0].name)
    if control not in {r.name for r in routers}:
        raise TopologyError(source, f"no router named {control!r}", "lab.control")
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
