"""Build, inspect and tear down the emulated fabric (``netqual lab up|status|down``)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from netqual.base.auth import write_token
from netqual.base.errors import LabError
from netqual.lab import state as lab_state
from netqual.lab import system
from netqual.lab.inventory import write_inventory
from netqual.lab.layout import Kind, LabNode, LabPlan, build_plan, prefix_for
from netqual.lab.state import LabState, Process
from netqual.lab.topology import Topology, load_default

READY_TIMEOUT_S = 20.0
# Agents run as real-time tasks (below the relay's priority 10): they time the round
# trips, and an ordinary process on a machine shared with other work waits milliseconds
# for a CPU now and then, which put every path's p99 (the demo's verdicts) in the
# milliseconds whatever the topology. They sleep between messages; the kernel's RT
# throttling (95% of a CPU) bounds a bulk transfer (docs/lab.md, "Precision").
AGENT_PREFIX = ["chrt", "--fifo", "5"]


@dataclass(frozen=True)
class LabInfo:
    state_dir: Path
    inventory_path: Path
    token_file: Path
    nodes: tuple[LabNode, ...]
    hops: tuple[tuple[str, str, int], ...]  # (host, host, expected hop count)
    topology_name: str
    control_netns: str  # run the coordinator here: `ip netns exec <it> netqual run ...`
    rtts_us: tuple[tuple[str, str, float], ...] = ()  # (host, host, injected round trip)

    def expected_hops(self, a: str, b: str) -> int:
        return next(h for s, d, h in self.hops if {s, d} == {a, b})

    def injected_rtt_us(self, a: str, b: str) -> float:
        """The sum of the one-way delays along the path, both ways."""
        return next(r for s, d, r in self.rtts_us if {s, d} == {a, b})


@dataclass(frozen=True)
class DownReport:
    namespaces: tuple[str, ...]
    processes: tuple[int, ...]
    files: tuple[str, ...]

    @property
    def nothing(self) -> bool:
        return not (self.namespaces or self.processes or self.files)


@dataclass(frozen=True)
class ProcessStatus:
    role: str
    pid: int
    alive: bool


@dataclass(frozen=True)
class LabStatus:
    state_dir: Path
    topology: str | None
    namespaces: tuple[tuple[str, bool], ...]  # (name, exists)
    processes: tuple[ProcessStatus, ...]
    complete: bool
    relay_report: str | None = None  # the relay's counters, when it runs

    @property
    def up(self) -> bool:
        return (
            self.complete
            and all(e for _, e in self.namespaces)
            and all(p.alive for p in self.processes)
        )

    @property
    def anything(self) -> bool:
        return any(e for _, e in self.namespaces) or any(p.alive for p in self.processes)


def lab_available() -> str | None:
    return system.unavailable_reason()


def _require_root() -> None:
    reason = system.unavailable_reason()
    if reason:
        raise LabError(reason)


def up(
    topology: Topology | None = None,
    state_dir: Path | None = None,
    agents: bool = True,
    relay_options: Mapping[str, int] | None = None,
    realtime_agents: bool = True,
) -> LabInfo:
    """Build the lab; on any failure, everything made so far is removed again.
    ``realtime_agents``: the agents as real-time tasks (docs/lab.md, "Precision"); False
    for a comparison with ordinary processes (bench/engine_vs_probe: engines, iperf3)."""
    _require_root()
    topo = topology or load_default()
    state_dir = (state_dir or lab_state.default_state_dir()).resolve()
    if status(state_dir).anything:
        raise LabError(
            f"a lab is already up in {state_dir}, perhaps someone else's: give this one its "
            f"own --state-dir DIR (labs side by side are fine); if that lab is yours and "
            f"done, `netqual lab down --state-dir {state_dir}` removes it"
        )
    down(state_dir)  # sweep leftovers of a crashed lab with this state dir
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    plan = build_plan(topo, prefix_for(state_dir))
    files = {
        k: state_dir / n
        for k, n in (
            ("token", "token"),
            ("inventory", "inventory.toml"),
            ("relay", "relay.json"),
            ("relay_log", "relay.log"),
        )
    }
    agent_logs = [state_dir / f"agent-{n.name}.log" for n in plan.nodes if n.kind is Kind.HOST]
    st = LabState(
        prefix=plan.prefix,
        topology=topo.source,
        namespaces=tuple(n.netns for n in plan.nodes),
        files=tuple(str(f) for f in [*files.values(), *agent_logs]),
    )
    lab_state.save(state_dir, st)
    try:
        _build_namespaces(plan)
        st = _start_relay(
            plan, state_dir, st, files["relay"], files["relay_log"], dict(relay_options or {})
        )
        _configure(plan)
        _shape(plan)
        write_token(files["token"])
        write_inventory(plan, files["inventory"], files["token"])
        if agents:
            st = _start_agents(plan, state_dir, st, files["token"], realtime_agents)
        lab_state.save(state_dir, replace(st, complete=True))
    except BaseException:
        down(state_dir)
        raise
    return LabInfo(
        state_dir,
        files["inventory"],
        files["token"],
        plan.nodes,
        plan.hops,
        topo.name,
        plan.control.netns,
        tuple((s, d, plan.injected_rtt_us(s, d)) for s, d, _ in plan.hops),
    )


@contextlib.contextmanager
def running(topology: Topology | None = None, state_dir: Path | None = None) -> Iterator[LabInfo]:
    """``up``, then the block runs inside the control namespace (threads it starts too),
    then ``down`` whatever happened. For ``netqual demo``."""
    info = up(topology, state_dir)
    try:
        with system.inside(info.control_netns):
            yield info
    finally:
        down(info.state_dir)


def _build_namespaces(plan: LabPlan) -> None:
    for node in plan.nodes:
        system.netns_add(node.netns)
        if node.kind is Kind.ROUTER:
            system.sysctl(node.netns, "net.ipv4.ip_forward", "1")
    for v in plan.veth_links:
        system.ip(
            "link",
            "add",
            "name",
            v.a_ifname,
            "netns",
            v.a_netns,
            "type",
            "veth",
            "peer",
            "name",
            v.b_ifname,
            "netns",
            v.b_netns,
        )


def _start_relay(
    plan: LabPlan, state_dir: Path, st: LabState, config: Path, log: Path, options: dict[str, int]
) -> LabState:
    if not plan.relay_links:
        return st
    options["links"] = [ln.to_json() for ln in plan.relay_links]  # type: ignore[assignment]
    config.write_text(json.dumps(options))
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "netqual.lab.relayd", str(config)],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )
    st = st.with_process(Process("relay", proc.pid, system.start_time(proc.pid)))
    lab_state.save(state_dir, st)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    proc.stdout.close()
    if line.strip() != "ready":
        raise LabError(f"the link relay did not start: {_tail(log)}")
    return st


def _configure(plan: LabPlan) -> None:
    mtu = str(plan.topology.mtu)
    for node in plan.nodes:
        on_link = _on_link(plan, node)
        placed = {a for addresses in on_link.values() for a in addresses}
        lines = []
        if node.address and node.address not in placed:
            lines.append(f"address add {node.address}/32 dev lo")
        lines += [
            f"address add {nic.address}/32 dev lo" for nic in node.nics if nic.address not in placed
        ]
        for i in plan.interfaces:
            if i.node == node.name:
                lines += [f"address add {a}/32 dev {i.ifname}" for a in on_link.get(i.ifname, ())]
                lines.append(f"address add {i.address}/32 peer {i.peer_address}/32 dev {i.ifname}")
                lines.append(f"link set dev {i.ifname} mtu {i.mtu or mtu} up")
        system.ip_batch(node.netns, lines)
    for node in plan.nodes:
        lines = [
            f"route add {r.dest}/32 via {r.via} dev {r.ifname}" + (f" src {r.src}" if r.src else "")
            for r in plan.routes
            if r.node == node.name
        ]
        system.ip_batch(node.netns, lines)


def _on_link(plan: LabPlan, node: LabNode) -> dict[str, tuple[str, ...]]:
    """The host addresses that sit on a link's interface, first (so that the interface's
    primary address is the host's): each rail NIC's on its rail link, the main address on
    the host's one other link. Software that advertises an interface's address (UCX, so
    NIXL) then offers an address the fabric routes; a host with several main links keeps
    its main address on the loopback. Routers and the control namespace: none."""
    if node.kind is not Kind.HOST:
        return {}
    out: dict[str, tuple[str, ...]] = {nic.name: (nic.address,) for nic in node.nics}
    main = [i.ifname for i in plan.interfaces if i.node == node.name and i.ifname not in out]
    if node.address and len(main) == 1:
        out[main[0]] = (node.address,)
    return out


def _shape(plan: LabPlan) -> None:
    """Rate-limited links without delay: the kernel's token bucket on each end's egress,
    so both directions are shaped and the queue builds where a switch's would."""
    for ln in plan.shaped_links:
        for netns, ifname in ((ln.a_netns, ln.a_ifname), (ln.b_netns, ln.b_ifname)):
            system.tc(netns, "qdisc", "add", "dev", ifname, "root", *ln.tc_args())


def _start_agents(
    plan: LabPlan, state_dir: Path, st: LabState, token: Path, realtime: bool = True
) -> LabState:
    port = plan.topology.port
    started: list[tuple[LabNode, int, Path]] = []
    for node in plan.nodes:
        if node.kind is not Kind.HOST:
            continue
        log = state_dir / f"agent-{node.name}.log"
        cmd = [
            "ip",
            "netns",
            "exec",
            node.netns,
            *(AGENT_PREFIX if realtime else []),
            sys.executable,
            "-m",
            "netqual",
            "agent",
            "--listen",
            # with rail NICs the agent also answers on their addresses (docs/rails.md);
            # 0.0.0.0 inside the host's own namespace holds only the lab's addresses
            f"{'0.0.0.0' if node.nics else node.address}:{port}",
            "--name",
            node.name,
            "--token-file",
            str(token),
        ]
        with log.open("w") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        st = st.with_process(Process(f"agent:{node.name}", proc.pid, system.start_time(proc.pid)))
        lab_state.save(state_dir, st)
        started.append((node, proc.pid, log))
    deadline = time.monotonic() + READY_TIMEOUT_S
    for node, pid, log in started:
        while not system.listening(pid, port):
            if not system.alive(pid, None) or time.monotonic() > deadline:
                raise LabError(f"agent on {node.name} did not start: {_tail(log)}")
            time.sleep(0.05)
    return st


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(lines[-3:]) or "(empty log)"


def down(state_dir: Path | None = None) -> DownReport:
    """Remove every namespace, process and file of the lab; safe to repeat."""
    _require_root()
    state_dir = (state_dir or lab_state.default_state_dir()).resolve()
    st = lab_state.load(state_dir)
    prefix = st.prefix if st else prefix_for(state_dir)
    stopped = system.stop([(p.pid, p.start) for p in st.processes]) if st else []
    present = system.netns_list()
    names = sorted(
        {n for n in (st.namespaces if st else ()) if n in present}
        | {n for n in present if n.startswith(f"{prefix}-")}
    )
    for name in names:
        stopped += system.stop([(pid, None) for pid in system.netns_pids(name)])
        system.netns_delete(name)
    removed = []
    for f in st.files if st else ():
        p = Path(f)
        if p.exists():
            p.unlink()
            removed.append(f)
    lab_state.remove(state_dir)
    if state_dir.is_dir() and not any(state_dir.iterdir()):
        state_dir.rmdir()
    return DownReport(tuple(names), tuple(sorted(set(stopped))), tuple(removed))


def status(state_dir: Path | None = None) -> LabStatus:
    state_dir = (state_dir or lab_state.default_state_dir()).resolve()
    st = lab_state.load(state_dir)
    present = system.netns_list()
    prefix = st.prefix if st else prefix_for(state_dir)
    names = sorted(
        set(st.namespaces if st else ()) | {n for n in present if n.startswith(f"{prefix}-")}
    )
    procs = tuple(
        ProcessStatus(p.role, p.pid, system.alive(p.pid, p.start))
        for p in (st.processes if st else ())
    )
    relay = next((p for p in procs if p.role == "relay" and p.alive), None)
    return LabStatus(
        state_dir,
        st.topology if st else None,
        tuple((n, n in present) for n in names),
        procs,
        st.complete if st else False,
        _relay_report(relay.pid, state_dir / "relay.log") if relay else None,
    )


def _relay_report(pid: int, log: Path) -> str | None:
    """Ask the relay for its counters (SIGUSR1) and read the line it logs."""
    try:
        before = log.stat().st_size
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return None
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        with log.open("rb") as f:
            f.seek(before)
            for line in f.read().decode(errors="replace").splitlines():
                if line.startswith("relay:"):
                    return line
        time.sleep(0.02)
    return None
