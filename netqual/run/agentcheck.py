"""The agents at the start of a run: which ones its pairs may use.

``netqual run`` hands the coordinator its pre-flight report (netqual.run.preflight), and
no agent is asked again: one that failed the check is refused (its pairs are not measured,
configuration), and one that dies after it is reported by its probes, per path. Only
--resume asks again, and only the agents the pre-flight saw running probes, until those
end (a killed coordinator's end within a second). A run without a pre-flight (retest,
demo) asks every agent here, once; a retest also asks the nodes it re-measures for their
configuration snapshot (the pre-flight's request), which finalise compares with the
re-tested run's others (analysis.fleet.retest).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import connect
from netqual.base.errors import NetqualError, NoAgentsError
from netqual.model.fleet import ConfigSnapshot
from netqual.model.hostpath import HostAudit
from netqual.model.node import Node
from netqual.model.preflight import PreflightReport
from netqual.model.progress import Stage
from netqual.model.run import RunKind
from netqual.planning.rails import endpoint_name
from netqual.run import fanin as fanin_run
from netqual.run.config import RunConfig
from netqual.run.preflight import config_snapshot, host_audit
from netqual.run.session import RunSession


def check_at_start(s: RunSession) -> None:
    """The pre-flight step: the command's check when it has one (``RunSession.check``:
    ``netqual run``'s table, which stops the run on a configuration error unless
    --keep-going; a fan-in level the storage agents' sessions cannot serve is a usage
    error), then the agents the run may use (``at_start``). Every agent failed: nothing
    can be measured (NoAgentsError)."""
    cfg, state, found = s.config, s.state, s.results
    s.observer.phase(Stage.PREFLIGHT, 0, len(cfg.nodes))
    if s.check is not None:
        state.preflight = report = s.check(cfg)
        found.agents = report.agents()
        if cfg.fanin is not None:
            fanin_run.check_sessions(cfg.nodes, cfg.fanin, cfg.transport, report, s.prior.fanin)
    state.down, state.refused = at_start(
        cfg.nodes, cfg.token, state.preflight, s.resumed, found.busy, found.hosts,
        snapshot_of=retested_nodes(cfg), snapshots=found.snapshots,
    )  # fmt: skip
    for _ in cfg.nodes:  # every agent checked: the phase ends at agents N/N, not 0/N
        s.observer.item()
    down = state.down
    if len(down) == len({n.node_name for n in cfg.nodes}):
        # Each problem already names its node ("gpu01 unreachable: ..."); don't repeat it.
        detail = "; ".join(v if v.startswith(k) else f"{k}: {v}" for k, v in down.items())
        raise NoAgentsError(
            f"every agent failed the pre-flight check, so nothing was measured ({detail}):"
            " fix them (netqual check INVENTORY shows each), then run again"
        )


def retested_nodes(cfg: RunConfig) -> frozenset[str]:
    """The nodes a retest re-measures (those of its pairs): their agents are asked for a
    configuration snapshot at the start, the run it re-tests holds the others'. Any other
    run: none (``netqual run`` takes them in its pre-flight; the demo takes none)."""
    if cfg.kind is not RunKind.RETEST or cfg.pairs is None:
        return frozenset()
    paired = {name for pair in cfg.pairs for name in pair}
    return frozenset(n.node_name for n in cfg.endpoints if n.name in paired)


def at_start(
    nodes: Sequence[Node],
    token: bytes | None,
    preflight: PreflightReport | None,
    resumed: bool,
    busy: dict[str, int],
    hosts: dict[str, HostAudit],
    snapshot_of: Collection[str] = (),
    snapshots: dict[str, ConfigSnapshot] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(down, refused): node -> text, the agents the run cannot use and why; node or
    endpoint (``NODE/NIC``, a NIC its agent cannot be reached at) -> the reason their pairs
    are not measured. ``busy`` gets the agents still running probes,
    ``hosts`` each usable agent's host path audit, ``snapshots`` the configuration
    snapshot of each node of ``snapshot_of`` whose agent sent one (without a pre-flight)."""
    if preflight is None:
        wait_s = RESUME_IDLE_WAIT_S if resumed else 0.0
        down = check_agents(
            nodes, token, idle_wait_s=wait_s, busy=busy, hosts=hosts,
            snapshot_of=snapshot_of, snapshots=snapshots,
        )  # fmt: skip
        return down, {k: f"agent on {k} not answering at the start: {v}" for k, v in down.items()}
    down = {n.node: "; ".join(n.problems) for n in preflight.failed}
    hosts.update({n.node: n.host for n in preflight.nodes if n.host is not None})
    # An endpoint (``NODE/NIC``) its agent cannot be reached at: its paths are not measured.
    unreachable = {
        endpoint_name(n.node, nic): f"NIC {nic} of {n.node} failed the pre-flight check: {why}"
        for n in preflight.nodes
        if n.ok
        for nic, why in n.nic_problems
    }
    running = {n.node: n.measuring for n in preflight.nodes if n.ok and n.measuring}
    if resumed and running:
        # Whatever fails while waiting is left to the probes, like any agent lost after
        # the pre-flight: only the probes still running are noted.
        wait = [n for n in nodes if n.node_name in running]
        check_agents(wait, token, idle_wait_s=RESUME_IDLE_WAIT_S, busy=busy)
    else:
        busy.update(running)
    return down, {k: f"{k} failed the pre-flight check: {v}" for k, v in down.items()} | unreachable


def check_agents(
    nodes: Sequence[Node],
    token: bytes | None,
    timeout_s: float = 5.0,
    idle_wait_s: float = 0.0,
    busy: dict[str, int] | None = None,
    hosts: dict[str, HostAudit] | None = None,
    snapshot_of: Collection[str] = (),
    snapshots: dict[str, ConfigSnapshot] | None = None,
) -> dict[str, str]:
    """Ask every agent for ``info`` in parallel; returns {node name: problem} for failures
    (a run without a pre-flight, and --resume's wait).

    ``idle_wait_s``: ask again until the agent runs no probe (``measuring`` 0) for at
    most that long (``--resume`` after a killed coordinator: its probes end within a
    second). Agents still measuring then are noted in ``busy`` (node -> probes).
    ``hosts``: each agent's host path audit goes there (node -> audit); an agent whose
    audit is unusable gets one with ``error`` set, and is not counted as failed.
    ``snapshots``: the configuration snapshot of each node of ``snapshot_of`` (a retest's
    re-tested nodes), asked before the audit; one that fails is left out, never a failed
    agent (as in the pre-flight)."""

    # A node's endpoints (docs/rails.md, a re-test of a --rails run) share its one agent.
    nodes = list({n.node_name: n for n in nodes}.values())

    def one(node: Node) -> str | None:
        name = node.node_name
        try:
            ch, _ = connect(
                node.control_address, node.port, token, name, timeout_s, expect_name=node.identity
            )
            with ch:
                ch.set_timeout(timeout_s)
                end = time.monotonic() + idle_wait_s
                while True:
                    info = ch.request("info", reply="info")
                    running = Fields(info, "info", name).integer("measuring", 0, 1 << 20, 0)
                    if not running or time.monotonic() >= end:
                        break
                    time.sleep(IDLE_POLL_S)
                if running and busy is not None:
                    busy[name] = running
                if snapshots is not None and name in snapshot_of:
                    snap, _why = config_snapshot(ch, name)
                    if snap is not None:
                        snapshots[name] = snap
                if hosts is not None:
                    hosts[name] = host_audit(ch, name)
                    if hosts[name].error is not None:
                        return None  # the agent may have ended the session on it: no bye
                ch.send("bye")
        except (NetqualError, OSError) as err:
            return str(err)
        return None

    with ThreadPoolExecutor(max_workers=min(32, max(1, len(nodes)))) as pool:
        results = dict(zip((n.node_name for n in nodes), pool.map(one, nodes), strict=True))
    return {name: problem for name, problem in results.items() if problem is not None}


IDLE_POLL_S = 0.1
RESUME_IDLE_WAIT_S = 10.0  # a killed coordinator's probes end within 1 s (CoordinatorWatch)
