"""The inventory file (docs/inventory.md): which nodes, where their agents listen."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from netqual.base.errors import InventoryError
from netqual.base.names import address_problem, name_problem, nic_name_problem
from netqual.files.tomlfile import Fields, read_toml
from netqual.model.node import DEFAULT_PORT, Nic, Node, Role
from netqual.model.plan import ProbePlan
from netqual.model.run import INVENTORY_KINDS, Mode, RunKind
from netqual.planning import options as plan_mod
from netqual.planning.fabric import Fabric, Uplink, group_names

_TOP_KEYS = {"defaults", "node", "probe", "run", "rack", "site"}
_NODE_KEYS = {"name", "address", "port", "role", "rack", "labels", "nic_gbps", "nics"}
_NIC_KEYS = {"name", "address", "device", "rail"}
MAX_RAIL = 1023


@dataclass(frozen=True)
class Inventory:
    source: str
    nodes: tuple[Node, ...]
    token_file: Path | None
    mode: Mode | None  # from an optional [run] table; the CLI may override
    plan: ProbePlan
    fabric: Fabric = field(default_factory=Fabric)
    kind: RunKind = RunKind.CLUSTER  # [run] kind: "lab" where `netqual lab up` wrote it

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


def _error(source: str, problem: str, field: str | None) -> InventoryError:
    return InventoryError(source, problem, field)


def _check_address(value: str, f: Fields, key: str) -> str:
    if (problem := address_problem(value)) is not None:
        raise f.fail(key, problem)
    return value


def load_inventory(path: Path, base_plan: ProbePlan | None = None) -> Inventory:
    source = str(path)
    data = read_toml(path, _error)
    top = Fields(source, data, "", _error)
    top.check_keys(_TOP_KEYS)

    defaults = top.sub("defaults", {"port", "token_file"})
    default_port = defaults.integer("port", DEFAULT_PORT, 1, 65535)
    token_text = defaults.string("token_file")
    token_file = None
    if token_text:
        token_file = Path(token_text).expanduser()
        if not token_file.is_absolute():
            token_file = path.parent / token_file

    if "node" not in data:
        raise top.fail("node", "no [[node]] entries")
    nodes: list[Node] = []
    nic_gbps: dict[str, float] = {}
    seen: dict[str, int] = {}
    endpoints: dict[tuple[str, int], str] = {}
    nic_addresses: dict[str, str] = {}
    for i, f in enumerate(top.tables("node", _NODE_KEYS)):
        name = f.string("name", required=True)
        assert name is not None
        if (problem := name_problem(name)) is not None:
            raise f.fail("name", problem)
        if name in seen:
            raise f.fail("name", f"duplicate node name {name!r} (also node[{seen[name]}])")
        seen[name] = i
        address = f.string("address", required=True)
        assert address is not None
        _check_address(address, f, "address")
        port = f.integer("port", default_port, 1, 65535)
        if (address, port) in endpoints:
            raise f.fail("port", f"{address}:{port} is also node {endpoints[(address, port)]!r}")
        endpoints[(address, port)] = name
        role = f.choice(Role, "role", Role.ANY)
        if "nic_gbps" in f.table:
            nic_gbps[name] = f.number("nic_gbps", 0.0)
        nodes.append(
            Node(
                name=name,
                address=address,
                port=port,
                role=role,
                rack=f.string("rack"),
                labels=f.table_of_strings("labels"),
                nics=_nics(f, name, nic_addresses),
            )
        )

    run = top.sub("run", {"mode", "kind"})
    mode = run.choice(Mode, "mode", Mode.FULL_MESH) if "mode" in run.table else None
    kind = run.choice(RunKind, "kind", RunKind.CLUSTER)
    if kind not in INVENTORY_KINDS:
        allowed = " or ".join(repr(k.value) for k in INVENTORY_KINDS)
        raise run.fail("kind", f"an inventory's run is {allowed}; {kind.value!r} is its command's")
    probe = top.sub("probe").table
    plan = plan_mod.from_table(base_plan or ProbePlan(), probe, source, _error)
    racks, sites = group_names(nodes)
    fabric = Fabric(
        nic_gbps=nic_gbps,
        racks=_uplinks(top, "rack", racks),
        sites=_uplinks(top, "site", sites),
    )
    return Inventory(
        source=source, nodes=tuple(nodes), token_file=token_file, mode=mode, plan=plan,
        fabric=fabric, kind=kind,
    )  # fmt: skip


def _nics(f: Fields, node: str, taken: dict[str, str]) -> tuple[Nic, ...]:
    """``nics = [{ name, address, device, rail }]``: names, addresses and rails unique (an
    address across the whole inventory: it is where a probe connects)."""
    value = f.table.get("nics", [])
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise f.fail("nics", "expected an array of tables ([{ name, address, rail }])")
    out: list[Nic] = []
    for n in f.tables("nics", _NIC_KEYS):
        name = n.string("name", required=True)
        assert name is not None
        if (problem := nic_name_problem(name)) is not None:
            raise n.fail("name", problem)
        address = n.string("address", required=True)
        assert address is not None
        try:
            address = str(ipaddress.ip_address(address))
        except ValueError:
            raise n.fail("address", f"{address[:64]!r} is not an IP address") from None
        if "rail" not in n.table:
            raise n.fail("rail", "missing required field")
        rail = n.integer("rail", 0, 0, MAX_RAIL)
        device = n.string("device")
        if device is not None and (problem := nic_name_problem(device, device=True)):
            raise n.fail("device", problem)
        for other in out:
            if other.name == name:
                raise n.fail("name", f"duplicate NIC name {name!r} on node {node!r}")
            if other.rail == rail:
                raise n.fail("rail", f"rail {rail} is also NIC {other.name!r} of node {node!r}")
        if address in taken:
            raise n.fail("address", f"{address} is also NIC {taken[address]}")
        taken[address] = f"{node}/{name}"
        out.append(Nic(name=name, address=address, rail=rail, device=device))
    return tuple(out)


def _uplinks(top: Fields, kind: str, known: set[str]) -> dict[str, Uplink]:
    """``[rack.NAME]`` / ``[site.NAME]``: uplink_gbps or oversubscription of a named group."""
    raw = top.table.get(kind, {})
    if not isinstance(raw, dict):
        raise top.fail(kind, f"expected tables [{kind}.NAME]")
    group = top.sub(kind)
    out: dict[str, Uplink] = {}
    for name in raw:
        f = group.sub(name, {"uplink_gbps", "oversubscription"})
        table = f.table
        if name not in known:
            where = "rack =" if kind == "rack" else "labels.site ="
            raise top.fail(f"{kind}.{name}", f"no node has {where} {name!r}")
        if len(table) != 1:
            raise top.fail(f"{kind}.{name}", "state exactly one of uplink_gbps or oversubscription")
        if "uplink_gbps" in table:
            out[name] = Uplink(uplink_gbps=f.number("uplink_gbps", 0.0))
        else:
            over = f.number("oversubscription", 0.0)
            if over < 1.0:
                raise f.fail("oversubscription", f"must be >= 1 (1 is non-blocking), got {over:g}")
            out[name] = Uplink(oversubscription=over)
    return out
