"""What the pre-flight check found: one ``AgentCheck`` per node, in a ``PreflightReport``.

``netqual check`` prints it; ``netqual run`` hands it to the coordinator, which measures
with the agents it passed and asks none of them again (netqual.run.preflight)."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.model.engine import EngineAvailability
from netqual.model.fleet import ConfigSnapshot
from netqual.model.hostpath import HostAudit
from netqual.model.node import HostNics


@dataclass(frozen=True)
class AgentCheck:
    """The pre-flight answer for one node: can a run use its agent?

    ``problems`` are configuration errors (unreachable, wrong token, another node's agent,
    another netqual version, transport missing): a run would publish them as unsafe network
    paths. ``warnings`` (a skewed clock) do not stop a run."""

    node: str
    endpoint: str
    agent_name: str | None = None
    agent_version: str | None = None
    clock_offset_s: float | None = None
    answer_s: float | None = None
    transport: str = "tcp"
    transport_ok: bool | None = None
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    snapshot: ConfigSnapshot | None = None  # its configuration (docs/evidence.md)
    nics: HostNics | None = None  # its IP interfaces and RDMA ports (docs/rails.md)
    max_sessions: int | None = None  # its --max-sessions as it reports it (run --fanin)
    # Asked for ``run`` only (``netqual check`` leaves them out): its host path audit, and
    # the probes it was running (--resume waits for a killed coordinator's to end).
    host: HostAudit | None = None
    measuring: int = 0
    # the fetch engines the run asks for (--engine): installed, version, what they would use
    engines: tuple[EngineAvailability, ...] = ()
    # Its inventory NICs a probe cannot reach it at (agent/reach.py): (NIC name, why). The
    # agent itself is fine; a rails run does not measure the paths through these NICs.
    nic_problems: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class PreflightReport:
    transport: str
    coordinator_version: str
    nodes: tuple[AgentCheck, ...]
    duration_s: float

    def agents(self) -> dict[str, dict[str, object]]:
        """Per node, the agent's version and clock offset as checked (results run.agents)."""
        return {
            n.node: {"version": n.agent_version, "clock_offset_s": n.clock_offset_s}
            for n in self.nodes
        }

    @property
    def ok(self) -> bool:
        return all(n.ok for n in self.nodes)

    @property
    def failed(self) -> tuple[AgentCheck, ...]:
        return tuple(n for n in self.nodes if not n.ok)
