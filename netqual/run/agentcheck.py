"""The agents asked at the start of a run that had no pre-flight (retest, demo), and the
--resume wait for agents still running a killed coordinator's probes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from netqual.agent.wire import hostpeer
from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel, connect
from netqual.errors import NetqualError
from netqual.hostpath import HostAudit
from netqual.models import Node


def check_agents(
    nodes: Sequence[Node],
    token: bytes | None,
    timeout_s: float = 5.0,
    idle_wait_s: float = 0.0,
    busy: dict[str, int] | None = None,
    hosts: dict[str, HostAudit] | None = None,
) -> dict[str, str]:
    """Ask every agent for ``info`` in parallel; returns {node name: problem} for failures.

    ``idle_wait_s``: ask again until the agent runs no probe (``measuring`` 0) for at
    most that long (``--resume`` after a killed coordinator: its probes end within a
    second). Agents still measuring then are noted in ``busy`` (node -> probes).
    ``hosts``: each agent's host path audit goes there (node -> audit); an agent whose
    audit is unusable gets one with ``error`` set, and is not counted as failed."""

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
                if hosts is not None:
                    hosts[name] = _host_audit(ch, name)
                    if hosts[name].error is not None:
                        return None  # the agent may have ended the session on it: no bye
                ch.send("bye")
        except (NetqualError, OSError) as err:
            return str(err)
        return None

    with ThreadPoolExecutor(max_workers=min(32, max(1, len(nodes)))) as pool:
        results = dict(zip((n.node_name for n in nodes), pool.map(one, nodes), strict=True))
    return {name: problem for name, problem in results.items() if problem is not None}


def _host_audit(ch: Channel, node: str) -> HostAudit:
    try:
        return hostpeer.from_peer(ch.request("hostpath", reply="hostpath"), node, node)
    except NetqualError as err:  # a bad field (named), or an agent that cannot audit
        return HostAudit(node, error=str(err))


IDLE_POLL_S = 0.1
RESUME_IDLE_WAIT_S = 10.0  # a killed coordinator's probes end within 1 s (CoordinatorWatch)
