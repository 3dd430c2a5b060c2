"""A generated inventory before it is written: checked names, rendered as inventory TOML."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from netqual.base.errors import InputError
from netqual.base.names import address_problem, name_problem, visible
from netqual.files.tomlfile import toml_string
from netqual.model.node import DEFAULT_PORT, Node, Role


@dataclass(frozen=True)
class Draft:
    """Nodes for an inventory plus the ``[defaults]`` it is written with."""

    nodes: tuple[Node, ...]
    origin: str  # one line saying where the nodes came from, written as a comment
    default_port: int = DEFAULT_PORT
    token_file: str | None = None

    @property
    def storage_count(self) -> int:
        return sum(1 for n in self.nodes if n.role is Role.STORAGE)


def check_name(name: str, source: str, field: str) -> str:
    if problem := name_problem(name):
        raise InputError(source, problem, field)
    return name


def check_unique(nodes: Sequence[Node], source: str, where: Sequence[str]) -> None:
    """Usable addresses; unique names and address:port pairs. ``where[i]``: node i's origin."""
    names: dict[str, int] = {}
    endpoints: dict[tuple[str, int], int] = {}
    for i, node in enumerate(nodes):
        if problem := address_problem(node.address):
            raise InputError(source, f"node {node.name!r}: address {problem}", where[i])
        if node.name in names:
            raise InputError(
                source,
                f"node {node.name!r} appears twice (also {where[names[node.name]]})",
                where[i],
            )
        names[node.name] = i
        key = (node.address, node.port)
        if key in endpoints:
            other = nodes[endpoints[key]].name
            raise InputError(
                source,
                f"{node.address}:{node.port} is also node {other!r}; agents on one host need "
                "distinct ports (--tasks-per-node steps the port)",
                where[i],
            )
        endpoints[key] = i


# Beyond this many nodes a generator stops, unless told more (--max-nodes): a typo in a
# hostlist range or a hostile listing would otherwise write millions of [[node]] tables.
DEFAULT_MAX_NODES = 10_000


def check_node_count(count: int, max_nodes: int, source: str, field: str | None) -> None:
    if count > max_nodes:
        raise InputError(
            source, f"more than {max_nodes:,} nodes; pass --max-nodes N to allow more", field
        )


def _q(text: str) -> str:
    return toml_string(text)


def render_inventory(draft: Draft) -> str:
    # The origin quotes user input (a hostfile path, --rack-from): shown literally, a
    # newline in it cannot end the comment and inject a [[node]].
    lines = [f"# Written by netqual inventory: {visible(draft.origin)}", "", "[defaults]"]
    lines.append(f"port = {draft.default_port}")
    if draft.token_file:
        lines.append(f"token_file = {_q(draft.token_file)}")
    for node in draft.nodes:
        lines += ["", "[[node]]", f"name = {_q(node.name)}", f"address = {_q(node.address)}"]
        if node.port != draft.default_port:
            lines.append(f"port = {node.port}")
        lines.append(f"role = {_q(node.role.value)}")
        if node.rack is not None:
            lines.append(f"rack = {_q(node.rack)}")
        if node.labels:
            body = ", ".join(f"{_q(k)} = {_q(v)}" for k, v in sorted(node.labels.items()))
            lines.append(f"labels = {{ {body} }}")
        if node.nics:  # docs/rails.md
            lines.append("nics = [")
            for n in node.nics:
                device = f", device = {_q(n.device)}" if n.device else ""
                lines.append(
                    f"  {{ name = {_q(n.name)}, address = {_q(n.address)}{device}, "
                    f"rail = {n.rail} }},"
                )
            lines.append("]")
    return "\n".join(lines) + "\n"
