"""``netqual lab up|status|down``: the emulated fabric (docs/lab.md)."""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from netqual import lab as lab_core
from netqual.base.errors import GuestError, LabError
from netqual.cli.app import app, console, err_console

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


@lab_app.command("rdma-shell")
def rdma_shell(
    command: Annotated[
        str | None,
        typer.Option("--command", "-c", help="Run this shell command instead of a shell."),
    ] = None,
    prepare: Annotated[
        bool, typer.Option("--prepare", help="Only download and unpack the guest kernel.")
    ] = False,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Directory shared read-write with the guest [a new temp dir].",
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache-dir",
            metavar="DIR",
            help="Directory of the guest kernel cache.  [default: $NETQUAL_VM_CACHE, else "
            "~/.cache/netqual/vm]",
        ),
    ] = None,
    cpus: Annotated[int, typer.Option("--cpus", help="Guest vCPUs.")] = 2,
    memory_mib: Annotated[int, typer.Option("--memory-mib", help="Guest memory.")] = 3072,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Power the guest off after this many seconds.")
    ] = 3600.0,
) -> None:
    """A qemu guest with two Soft-RoCE devices: real RDMA verbs on a host without any.

    rxe0 (198.18.0.1) and rxe1 (198.18.0.2) sit on a veth pair; the guest sees this
    host's files read-only (writes go to memory) and --out read-write. No KVM needed.

    \b
    Example:
      netqual lab rdma-shell
      netqual lab rdma-shell -c 'netqual doctor'
    """
    from netqual import vm

    if prepare:
        kernel = vm.fetch_kernel(cache_dir)
        console().print(f"guest kernel {kernel.release}: {kernel.vmlinuz}")
        return
    if reason := vm.qemu_unavailable():
        raise GuestError(reason)
    out = out_dir or Path(tempfile.mkdtemp(prefix="netqual-rdma-shell."))
    interactive = command is None
    # This venv's netqual first on PATH; agents may take minutes to start under emulation.
    env = f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH\n"
    env += "export NETQUAL_AGENT_START_S=${NETQUAL_AGENT_START_S:-300}\n"
    script = env + (command + "\n" if command else "exec /bin/bash -i\n")
    spec = vm.GuestSpec(cpus=cpus, memory_mib=memory_mib)
    err_console().print(f"booting the guest (TCG, {cpus} vCPUs); shared directory {out}")
    run = vm.run_in_guest(
        script, out, timeout, cache_dir=cache_dir, spec=spec, interactive=interactive
    )
    if not interactive:
        print(run.console_tail(10_000))
    if run.timed_out:
        raise GuestError(f"the guest ran past --timeout {timeout:g} s and was stopped")
    raise typer.Exit(run.exit_code if run.exit_code is not None else 3)
