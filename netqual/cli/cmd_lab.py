"""``netqual lab up|status|down``: the emulated fabric (docs/lab.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from netqual import lab as lab_core
from netqual.cli.app import app, console
from netqual.errors import LabError

lab_app = typer.Typer(
    help="Emulated fabric in network namespaces (root).\n\nRacks, routers, delayed links.\n\n"
    "\b\nExample:\n  sudo netqual lab up && sudo netqual lab down",
    no_args_is_help=True,
)
app.add_typer(lab_app, name="lab")

StateDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        metavar="DIR",
        help="Where the lab keeps its state.  [default: /run/netqual-lab]",
    ),
]


def _check() -> None:
    reason = lab_core.lab_available()
    if reason:
        raise LabError(reason)


@lab_app.command("up")
def up(
    topology: Annotated[
        Path | None,
        typer.Option(
            "--topology", help="Topology TOML (docs/lab.md).  [default: the embedded one]"
        ),
    ] = None,
    state_dir: StateDirOpt = None,
) -> None:
    """Build the fabric and start an agent in every host namespace.

    Writes the inventory to qualify it with.

    \b
    Example:
      sudo netqual lab up && sudo netqual lab status
    """
    _check()
    info = lab_core.up(lab_core.load(topology) if topology else None, state_dir)
    out = console()
    hosts = [n for n in info.nodes if n.kind is lab_core.Kind.HOST]
    out.print(
        f"lab {info.topology_name!r} is up: {len(hosts)} hosts, "
        f"{len(info.nodes) - len(hosts) - 1} routers, agents on port "
        f"{_port(info)}"
    )
    for n in hosts:
        out.print(
            f"  {n.name:<12} {n.address:<14} rack {n.rack:<8} {n.role.value if n.role else ''}"
            f"  via {n.leaf}"
        )
    out.print(f"inventory: {info.inventory_path}")
    out.print(f"qualify it: ip netns exec {info.control_netns} netqual run {info.inventory_path}")
    out.print("tear down:  netqual lab down" + (f" --state-dir {state_dir}" if state_dir else ""))


def _port(info: lab_core.LabInfo) -> str:
    for line in info.inventory_path.read_text().splitlines():
        if line.startswith("port = "):
            return line.split("=", 1)[1].strip()
    return "?"


@lab_app.command("status")
def status(state_dir: StateDirOpt = None) -> None:
    """Show the lab's namespaces and processes.

    Exit 0 when it is fully up, 1 otherwise.

    \b
    Example:
      sudo netqual lab status
    """
    st = lab_core.status(state_dir)
    out = console()
    if not st.namespaces and not st.processes:
        out.print(f"no lab in {st.state_dir}")
        raise typer.Exit(1)
    out.print(f"lab in {st.state_dir} ({st.topology}): {'up' if st.up else 'DEGRADED'}")
    present = sum(1 for _, e in st.namespaces if e)
    out.print(f"  namespaces: {present}/{len(st.namespaces)} present")
    for p in st.processes:
        out.print(f"  {p.role:<16} pid {p.pid:<8} {'running' if p.alive else 'GONE'}")
    if st.relay_report:
        out.print(f"  {st.relay_report}")
    raise typer.Exit(0 if st.up else 1)


@lab_app.command("down")
def down(state_dir: StateDirOpt = None) -> None:
    """Remove everything the lab made, even after a crash.

    Stops every process and removes every namespace and file.

    \b
    Example:
      sudo netqual lab down
    """
    _check()
    report = lab_core.down(state_dir)
    out = console()
    if report.nothing:
        out.print("no lab to remove")
        return
    out.print(
        f"removed {len(report.namespaces)} namespaces, stopped {len(report.processes)} "
        f"processes, deleted {len(report.files)} files"
    )
