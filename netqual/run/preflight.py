"""The pre-flight check (``netqual check``, and the first step of ``netqual run``).

Before a single pair is measured, every agent of the inventory must be reachable, accept
the token, answer to the inventory's name for its node, run this netqual version, have a
sane clock, and offer the transport. Anything else is a configuration error: left to the
run, it would appear in a decision-maker's report as an unsafe network path.

All agents are asked at once, so the check takes about one timeout at most.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from netqual import __version__
from netqual.agent import fleet_snapshot, nicreport, reach
from netqual.agent.engine_request import check_engines
from netqual.agent.wire import hostpeer
from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel, connect
from netqual.base.errors import (
    AuthError,
    BadRequestError,
    IdentityError,
    NetqualError,
    PeerUnreachableError,
)
from netqual.model.engine import EngineAvailability, EngineName
from netqual.model.fleet import ConfigSnapshot
from netqual.model.hostpath import HostAudit
from netqual.model.node import HostNics, Node
from netqual.model.plan import ProbePlan
from netqual.model.preflight import AgentCheck, PreflightReport
from netqual.planning.limits import limit_problem, limits_differ, reported_limits

CLOCK_WARN_S = 1.0  # wall clocks further apart than this make timestamps misleading
ENGINE_CHECK_S = 30.0  # an agent imports each engine in a worker to answer ``engines``


def check(
    nodes: Sequence[Node],
    token: bytes | None,
    transport: str = "tcp",
    timeout_s: float = 5.0,
    plan: ProbePlan | None = None,
    for_run: bool = False,
    engines: tuple[EngineName, ...] = (),
) -> PreflightReport:
    """Ask every node's agent in parallel; never raises for a node's failure. With
    ``plan``: an agent whose reported limits refuse it fails the check. ``for_run``: also
    what the run keeps of each agent that passed (host path audit, probes it is running),
    so the coordinator need not ask it again."""
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=min(64, max(1, len(nodes)))) as pool:
        found = tuple(
            pool.map(
                lambda n: check_node(n, token, transport, timeout_s, plan, for_run, engines),
                nodes,
            )
        )
    return PreflightReport(
        transport=transport,
        coordinator_version=__version__,
        nodes=found,
        duration_s=time.monotonic() - t0,
    )


def check_node(
    node: Node,
    token: bytes | None,
    transport: str,
    timeout_s: float,
    plan: ProbePlan | None = None,
    for_run: bool = False,
    engines: tuple[EngineName, ...] = (),
) -> AgentCheck:
    base = AgentCheck(node=node.name, endpoint=node.endpoint, transport=transport)
    t0 = time.monotonic()
    try:
        ch, hello = connect(
            node.address, node.port, token, node.name, timeout_s, expect_name=node.identity
        )
    except PeerUnreachableError as err:
        return _with(base, problems=(_unreachable(err),))
    except IdentityError as err:
        problem = (
            f"the agent there is {err.actual}: wrong address or port (or a relay), or start "
            f"it with --name {node.name}"
        )
        return _with(base, problems=(problem,), agent_name=err.actual)
    except AuthError as err:
        return _with(base, problems=(f"token rejected: {err.problem}",))
    except (NetqualError, OSError) as err:
        return _with(base, problems=(str(err),))
    problems: list[str] = []
    warnings: list[str] = []
    name = hello.agent
    version = hello.version
    if version != __version__:
        problems.append(f"agent runs netqual {version}, this coordinator {__version__}")
    offset_s: float | None = None
    transport_ok: bool | None = None
    snapshot: ConfigSnapshot | None = None
    nics: HostNics | None = None
    max_sessions: int | None = None
    host: HostAudit | None = None
    measuring = 0
    found: tuple[EngineAvailability, ...] = ()
    nic_problems: tuple[tuple[str, str], ...] = ()
    try:
        with ch:
            ch.set_timeout(timeout_s)
            sent_ns = time.time_ns()
            info = ch.request("info", reply="info")
            got_ns = time.time_ns()
            offset_s = _clock_offset_s(info, sent_ns, got_ns)
            if for_run:  # probes it runs now (someone else's, or a killed coordinator's)
                measuring = Fields(info, "info", name).integer("measuring", 0, 1 << 20, 0)
            transport_ok, why = _transport_ok(ch, info, transport)
            if why:
                problems.append(why)
            refused, differ = _limits(info, plan)
            if (reported := reported_limits(info)) is not None:
                max_sessions = reported.max_sessions
            problems += [refused] if refused else []
            warnings += [differ] if differ else []
            snapshot, why = config_snapshot(ch, node.name)
            warnings += [why] if why else []
            nics, why = _nics(ch, node.name)
            warnings += [why] if why else []
            if engines:
                found, why = _engines(ch, engines, timeout_s)
                problems += [why] if why else []
                problems += [f"{e.engine.value}: {e.problem}" for e in found if e.problem]
            nic_problems, why = _reach(ch, node)
            warnings += [why] if why else []
            warnings += [f"NIC {nic} ({problem})" for nic, problem in nic_problems]
            if for_run and not problems:  # a failed agent is not measured: no audit needed
                host = host_audit(ch, node.name)
            if host is None or host.error is None:  # else the agent may have ended the session
                ch.send("bye")
    except (NetqualError, OSError) as err:
        problems.append(f"agent stopped answering: {err}")
    if offset_s is not None and abs(offset_s) > CLOCK_WARN_S:
        warnings.append(f"clock {offset_s:+.1f} s from this host's (timestamps will disagree)")
    return AgentCheck(
        node=node.name,
        endpoint=node.endpoint,
        agent_name=name or None,
        agent_version=version or None,
        clock_offset_s=offset_s,
        answer_s=time.monotonic() - t0,
        transport=transport,
        transport_ok=transport_ok,
        problems=tuple(problems),
        warnings=tuple(warnings),
        snapshot=snapshot,
        nics=nics,
        max_sessions=max_sessions,
        host=host,
        measuring=measuring,
        engines=found,
        nic_problems=nic_problems,
    )


def _reach(ch: Any, node: Node) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """((NIC, why) for each inventory NIC a probe cannot reach the agent at, a warning):
    every endpoint a rails run's paths will use, asked of its own agent (agent/reach.py)."""
    if not node.nics:
        return (), None
    asked = [n.address for n in node.nics]
    try:
        got = reach.from_peer(
            ch.request("reach", {"addresses": asked}, reply="reach"), asked, ch.peer
        )
    except NetqualError as err:
        return (), f"NIC endpoints not checked: {err}"
    failed = tuple(
        (nic.name, f"{nic.address}: {got[nic.address]}")
        for nic in node.nics
        if got.get(nic.address) is not None
    )
    return failed, None


def host_audit(ch: Channel, node: str) -> HostAudit:
    """The agent's host path audit; unusable (a bad field, named, or an agent that cannot
    audit) gives one with ``error`` set, and the agent may have ended the session on it."""
    try:
        return hostpeer.from_peer(ch.request("hostpath", reply="hostpath"), node, node)
    except NetqualError as err:
        return HostAudit(node, error=str(err))


def config_snapshot(ch: Any, node: str) -> tuple[ConfigSnapshot | None, str | None]:
    """The agent's configuration snapshot (the pre-flight's, and a retest's at its start);
    a failure is a warning (the fleet check then lacks this node), never a reason to
    refuse the agent."""
    try:
        return fleet_snapshot.from_peer(
            ch.request("snapshot", {}, reply="snapshot"), node, ch.peer
        ), None
    except (NetqualError, OSError) as err:  # a slow or broken answer: the agent is fine
        return None, f"no configuration snapshot: {err}"


def _nics(ch: Any, node: str) -> tuple[HostNics | None, str | None]:
    """The agent's IP interfaces and RDMA ports (docs/rails.md); a failure is a warning."""
    try:
        return nicreport.from_peer(ch.request("nics", {}, reply="nics"), node, ch.peer), None
    except NetqualError as err:
        return None, f"no NIC report: {err}"


def _engines(
    ch: Channel, engines: tuple[EngineName, ...], timeout_s: float
) -> tuple[tuple[EngineAvailability, ...], str | None]:
    """What the agent has of ``engines`` (each imported in a worker there: a second or so);
    an agent that cannot say is a problem: the run would fail every path of it."""
    try:
        ch.set_timeout(timeout_s + ENGINE_CHECK_S)
        return check_engines(ch, engines), None
    except NetqualError as err:
        return (), f"cannot check its engines: {err}"
    finally:
        ch.set_timeout(timeout_s)


def _limits(info: dict[str, Any], plan: ProbePlan | None) -> tuple[str | None, str | None]:
    """(problem, warning): the agent's limits refuse the plan; they differ from this
    coordinator's (the plan fits them, but its checks before the run assumed others)."""
    limits = reported_limits(info)
    if limits is None or plan is None:
        return None, None
    found = limit_problem(plan, limits)
    if found is not None:
        option, problem = found
        return f"agent limits refuse the plan ({option}): {problem}", None
    differ = limits_differ(limits)
    return None, (f"agent limits differ: {', '.join(differ)}" if differ else None)


def _unreachable(err: PeerUnreachableError) -> str:
    cause = err.__cause__
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused: no agent listens there (agent stopped, or wrong port?)"
    if isinstance(cause, (TimeoutError, socket.timeout)) or "no answer" in err.problem:
        return f"{err.problem.split(': ')[-1]}: host down, firewall, or wrong address?"
    if isinstance(cause, OSError) and cause.strerror:
        return f"cannot connect: {cause.strerror}"
    return err.problem


def _clock_offset_s(info: dict[str, Any], sent_ns: int, got_ns: int) -> float | None:
    if info.get("time_ns") is None:
        return None  # an agent too old to say
    agent_ns = Fields(info, "info", "agent").integer("time_ns", 0, 1 << 63)
    return (agent_ns - (sent_ns + got_ns) // 2) / 1e9


def _transport_ok(ch: Any, info: dict[str, Any], transport: str) -> tuple[bool, str | None]:
    offered = Fields(info, "info", ch.peer).strings("transports")
    if transport not in offered:
        return False, f"agent offers no {transport} transport (has {', '.join(offered) or 'none'})"
    if transport != "rdma":
        return True, None
    report = Fields(ch.request("doctor", {}, reply="doctor"), "doctor", ch.peer)
    problems = report.body.get("problems", [])
    if not isinstance(problems, list):
        raise BadRequestError(ch.peer, "doctor.problems", "must be a list")
    errors = []
    for i, item in enumerate(problems[:100]):
        p = Fields(item, f"doctor.problems[{i}]", ch.peer)
        if p.body.get("severity") == "error":
            errors.append(p.text("message"))
    if errors:
        return False, f"RDMA not ready: {errors[0]}" + (
            f" (+{len(errors) - 1} more: netqual doctor --inventory)" if len(errors) > 1 else ""
        )
    return True, None


def _with(base: AgentCheck, problems: tuple[str, ...], agent_name: str | None = None) -> AgentCheck:
    return AgentCheck(
        node=base.node,
        endpoint=base.endpoint,
        transport=base.transport,
        problems=problems,
        agent_name=agent_name,
    )


class PreflightFailed(NetqualError):
    """``run`` stops before measuring: some agents failed the pre-flight check."""

    def __init__(self, report: PreflightReport) -> None:
        self.report = report
        bad = report.failed
        names = ", ".join(n.node for n in bad[:5]) + (" ..." if len(bad) > 5 else "")
        super().__init__(
            f"pre-flight check failed on {len(bad):,} of {len(report.nodes):,} nodes ({names}); "
            "nothing was measured. Fix the inventory or the agents (netqual check), or run "
            "with --keep-going to measure the rest (their pairs: not measured, configuration)"
        )
