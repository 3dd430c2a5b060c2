"""Terminal table of the pre-flight check: one row per node, its problem in plain words."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from netqual.base.names import visible
from netqual.model.preflight import AgentCheck, PreflightReport


def print_check(console: Console, report: PreflightReport) -> None:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for col in ("node", "agent at", "answer", "name", "version", "clock", report.transport):
        table.add_column(col, no_wrap=col in ("node", "agent at"))
    table.add_column("status")
    for n in report.nodes:
        table.add_row(
            n.node,
            n.endpoint,
            "-" if n.answer_s is None else f"{n.answer_s * 1000:.0f} ms",
            _match(n.agent_name, n.node),
            _match(n.agent_version, report.coordinator_version),
            "-" if n.clock_offset_s is None else f"{n.clock_offset_s:+.2f} s",
            "-" if n.transport_ok is None else ("yes" if n.transport_ok else "NO"),
            _status(n),
        )
    console.print(table)
    for line in engines_lines(report):
        console.print(line, soft_wrap=True)
    for n in report.nodes:
        for text, style in [(p, "red") for p in n.problems] + [(w, "yellow") for w in n.warnings]:
            console.print(Text.assemble(f"  {n.node}: ", (text, style)))
    bad = len(report.failed)
    if bad:
        console.print(
            Text(
                f"{bad:,} of {len(report.nodes):,} nodes not ready ({report.duration_s:.1f} s)",
                style="bold red",
            )
        )
    else:
        console.print(
            Text(
                f"all {len(report.nodes)} agents ready for {report.transport} probes "
                f"({report.duration_s:.1f} s)",
                style="bold green",
            )
        )


def engines_lines(report: PreflightReport) -> list[str]:
    """One line per engine checked: its version and the transport it would use, grouped
    by nodes that agree ("mooncake-... 0.3.13.post1 would use tcp (no RDMA device): h1, h2")."""
    groups: dict[tuple[str, str], list[str]] = {}
    for n in report.nodes:
        for e in n.engines:
            if e.problem is not None or not e.installed:
                what = f"{e.engine.value}: {e.problem or 'not installed'}"
            else:
                would = e.would_install
                why = (
                    f"RDMA devices {', '.join(e.rdma_devices)}"
                    if e.rdma_devices
                    else "no RDMA device"
                )
                ucx = f", UCX {e.ucx}" if e.ucx else ""
                what = (
                    f"{e.engine.value}: {e.version}{ucx} would use "
                    f"{would.value if would else '?'} ({why})"
                )
            groups.setdefault((e.engine.value, what), []).append(n.node)
    return [
        f"{what} on {', '.join(visible(x) for x in nodes)}" for (_, what), nodes in groups.items()
    ]


def _match(got: str | None, want: str) -> str:
    if got is None:
        return "-"
    return "ok" if got == want else got


def _status(n: AgentCheck) -> Text:
    if n.problems:
        return Text("FAIL", style="bold red")
    if n.warnings:
        return Text("warn", style="yellow")
    return Text("ok", style="green")


def print_nics(console: Console, report: PreflightReport) -> None:
    """What each agent reported of its NICs (``check --nics``, docs/rails.md)."""
    console.print("NICs the agents report", style="bold")
    for n in report.nodes:
        if n.nics is None:
            console.print(Text.assemble(f"  {n.node}: ", ("no NIC report", "yellow")))
            continue
        for i in n.nics.interfaces:
            mtu = f" mtu {i.mtu}" if i.mtu is not None else ""
            speed = f" {i.speed_mbps:,} Mb/s" if i.speed_mbps is not None else ""
            addrs = ", ".join(i.addresses) or "no address"
            console.print(f"  {n.node} {visible(i.name)}: {addrs}{mtu}{speed}", highlight=False)
        for p in n.nics.rdma:
            on = f" on {visible(p.netdev)}" if p.netdev else ""
            gids = f", {len(p.gids)} GID{'s' if len(p.gids) != 1 else ''}"
            line = f"  {n.node} rdma {visible(p.device)}/{p.port}: {visible(p.state)}{on}{gids}"
            console.print(line, highlight=False)
