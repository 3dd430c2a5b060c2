"""The inventory a lab writes for ``netqual run`` (docs/inventory.md)."""

from __future__ import annotations

from pathlib import Path

from netqual.files.tomlfile import toml_string
from netqual.lab.layout import Kind, LabPlan


def _q(text: str) -> str:
    return toml_string(text)


def render_inventory(plan: LabPlan, token_file: Path) -> str:
    topo = plan.topology
    lines = [
        f"# Written by `netqual lab up` from topology {topo.name!r} ({topo.source}).",
        "# Agents listen inside the lab's network namespaces; run `netqual run` as root.",
        "",
        "[defaults]",
        f"port = {topo.port}",
        f"token_file = {_q(str(token_file))}",
        "",
        "[run]",
        'mode = "full-mesh"',
        'kind = "lab"',
    ]
    for node in plan.nodes:
        if node.kind is not Kind.HOST:
            continue
        assert node.address and node.rack and node.role and node.site
        labels = {"leaf": node.leaf or "", "site": node.site}
        rendered = ", ".join(f"{k} = {_q(v)}" for k, v in labels.items())
        lines += [
            "",
            "[[node]]",
            f"name = {_q(node.name)}",
            f"address = {_q(node.address)}",
            f"role = {_q(node.role.value)}",
            f"rack = {_q(node.rack)}",
            f"labels = {{ {rendered} }}",
        ]
        if node.nics:
            nics = ", ".join(
                f"{{ name = {_q(n.name)}, address = {_q(n.address)}, rail = {n.rail} }}"
                for n in node.nics
            )
            lines.append(f"nics = [{nics}]")
    return "\n".join(lines) + "\n"


def write_inventory(plan: LabPlan, path: Path, token_file: Path) -> None:
    path.write_text(render_inventory(plan, token_file))
