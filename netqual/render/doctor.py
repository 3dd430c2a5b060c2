"""Terminal view of ``netqual doctor`` results (the dict ``netqual.agent.doctor.run`` returns)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from netqual.base.names import visible
from netqual.codec.hostpath import from_dict
from netqual.model.fleet import ConfigSnapshot
from netqual.render.fleet import device_summary


def _configuration(console: Console, snap: ConfigSnapshot) -> None:
    """This node's snapshot: the fleet keys, then its devices (docs/evidence.md)."""
    console.print("  configuration")
    for key, value in snap.fleet.items():
        console.print(Text(f"    {key:<24}{value}"), soft_wrap=True)
    console.print(Text(f"    {'devices':<24}{device_summary(snap)}"), soft_wrap=True)


_MARK = {"error": ("x", "bold red"), "warning": ("!", "yellow")}


def render(console: Console, result: Mapping[str, Any]) -> None:
    for name, report in result["nodes"].items():
        _node(console, name, report)
    problems = result["problems"]
    if problems:
        console.print(Text("problems", style="bold"))
        for p in problems:
            mark, style = _MARK.get(p.get("severity", "error"), ("x", "bold red"))
            where = f"{p['node']}: " if p.get("node") and len(result["nodes"]) > 1 else ""
            console.print(
                Text.assemble(("  " + mark + " ", style), where + str(p["message"])),
                soft_wrap=False,
            )
    errors = sum(1 for p in problems if p.get("severity", "error") == "error")
    if result["healthy"]:
        verdict = Text("result: ready for RDMA probes", style="bold green")
        if problems:
            verdict.append(f" ({len(problems)} warning(s))", style="yellow")
    else:
        verdict = Text(f"result: NOT ready ({errors} problem(s))", style="bold red")
    console.print(verdict)


def _node(console: Console, name: str, report: Mapping[str, Any]) -> None:
    console.print(Text(f"node {name}", style="bold"))
    if report.get("unreachable"):
        console.print("  agent did not answer")
        return
    if isinstance(config := report.get("configuration"), Mapping):
        _configuration(console, ConfigSnapshot(name, tuple(sorted(config.items()))))
    pv = report.get("pyverbs", {})
    if pv.get("available"):
        line = f"{pv.get('version') or 'unknown version'} from {pv.get('location')}"
        line += f" (via {pv.get('route')})"
    else:
        line = f"not importable: {pv.get('error', 'unknown')}"
    console.print(f"  pyverbs     {line}")
    console.print(f"  libibverbs  {report.get('libibverbs') or 'not found'}")
    if (loop := report.get("pingpong_loop")) is not None:
        console.print(f"  ping-pong   {loop.get('text', 'unknown')}")
    if (audit := report.get("hostpath")) is not None:
        for line in host_lines(name, audit):
            console.print(line, soft_wrap=False, markup=False, highlight=False)
    for line in engine_lines(report.get("engines")):
        console.print(line, soft_wrap=False, markup=False, highlight=False)
    sysfs = report.get("sysfs_devices", [])
    console.print(
        f"  sysfs       {', '.join(sysfs) if sysfs else 'no /sys/class/infiniband devices'}"
    )
    devices = report.get("devices", [])
    if not devices:
        return
    table = Table(show_edge=False, pad_edge=False, box=None)
    for col in ("device", "port", "state", "link layer", "MTU", "LID", "GIDs (index type address)"):
        table.add_column(col)
    for dev in devices:
        if dev.get("error"):
            table.add_row(dev["name"], "-", dev["error"], "", "", "", "")
        for port in dev.get("ports", []):
            gids = "\n".join(f"{g['index']} {g['type']} {g['ip']}" for g in port["gids"]) or "-"
            table.add_row(
                dev["name"],
                str(port["port"]),
                port["state"],
                port["link_layer"],
                str(port["active_mtu_bytes"]),
                str(port["lid"]),
                gids,
            )
    console.print(Padding(table, (0, 0, 0, 2), expand=False))


def engine_lines(engines: object) -> list[str]:
    """``  engines     mooncake-transfer-engine-non-cuda 0.3.13.post1 (would use tcp)``; a
    peer's values shown as printable text whatever they hold."""
    if not isinstance(engines, list):
        return []
    out = []
    for e in engines[:8]:
        if not isinstance(e, Mapping):
            continue
        name = visible(str(e.get("engine", "?")))[:20]
        if e.get("installed"):
            would = visible(str(e.get("would_use")))[:8]
            text = f"{visible(str(e.get('version')))[:80]} (would use {would})"
        else:
            text = visible(str(e.get("problem") or "not installed"))[:200]
        out.append(f"  {name:<11} {text}")
    return out


def host_lines(node: str, doc: Mapping[str, Any]) -> list[str]:
    """GPUs, NICs and IOMMU, then each GPU's best NIC, from a ``hostpath`` mapping."""
    audit = from_dict(node, doc)
    lines = [
        f"  host path   {len(audit.gpus)} GPU(s), {len(audit.nics)} NIC(s), "
        f"IOMMU {audit.iommu.mode} (docs/rails.md)"
    ]
    for gpu in audit.gpus:
        nic, cls = audit.best_nic(gpu.name)
        lines.append(
            f"  {gpu.name:<11} {gpu.bdf} NUMA {'?' if gpu.numa_node is None else gpu.numa_node}"
            f", best NIC {nic or 'none'} {cls}"
        )
    return [visible(line) for line in lines]
