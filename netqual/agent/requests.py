"""Every request kind an agent serves, in one registry: kind -> how it is served, the body
fields it reads, whether it is a measurement, and what it is for.

The session (``agent.server``) dispatches through ``REQUESTS``: a kind not listed is a
``bad-request`` naming it. A measurement holds the agent's ``measuring`` count (``run
--resume`` waits for a killed coordinator's to end) and is what host counters count.
Adding a kind (a fetch engine's, a transport's) is one entry here and its handler; the
fuzz tests send every kind listed (tests/security/test_fuzz.py). Every field of a body is
still read through ``wire.messages.Fields`` by the handler; ``fields`` names them for
readers and tests (a field a newer coordinator adds is ignored, as before).

A handler imports what serves its kind when first asked (``doctor`` always did): an agent
starts on every node, and one that is only asked ``info`` or ``reach`` loads no transport
samples (numpy), fetch engine, sysfs reader or fleet record (tests/cli/
test_start_imports.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from netqual.agent import counters
from netqual.agent.wire.protocol import Channel

if TYPE_CHECKING:
    from netqual.model.engine import EngineName
    from netqual.model.limits import AgentLimits
    from netqual.transports import Transport, TransportOptions
    from netqual.transports.interface import BufferBudget


class Served(Protocol):
    """What a handler may use of the agent serving it."""

    name: str
    host: str  # the address it listens on
    port: int
    token: bytes | None
    limits: AgentLimits
    buffers: BufferBudget
    sysfs_root: Path
    transport_options: TransportOptions | None
    engines: tuple[EngineName, ...] | None  # the fetch engines it offers; None: every one

    def info(self) -> dict[str, Any]: ...
    def transport(self, name: str, run: TransportOptions | None = None) -> Transport: ...


Handler = Callable[[Served, Channel, str, dict[str, Any], counters.Counting], None]


@dataclass(frozen=True)
class Request:
    kind: str
    serve: Handler
    fields: tuple[str, ...]  # the body's fields (read by the handler through Fields)
    measures: bool  # a measurement: counted in ``info.measuring``
    meaning: str


def _info(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    ch.send("info", agent.info())


def _doctor(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    ch.send("doctor", doctor_report())


def _snapshot(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent import fleet_snapshot

    roots = fleet_snapshot.Roots(agent.sysfs_root)
    main = None
    if roots.live:  # the interface the address the coordinator reached uses
        with contextlib.suppress(OSError):
            local, peer = ch.sock.getsockname()[0], ch.sock.getpeername()[0]
            main = fleet_snapshot.main_interface(local, peer)
    ch.send("snapshot", fleet_snapshot.to_wire(fleet_snapshot.collect(roots, main)))


def _hostpath(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent import pcisysfs
    from netqual.codec import hostpath as hostpath_codec

    ch.send("hostpath", hostpath_codec.to_dict(pcisysfs.audit(agent.sysfs_root, agent.name)))


def _reach(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent import reach

    ch.send("reach", reach.serve(body, agent.port, agent.host, ch.peer))


def _nics(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent import nicreport

    ch.send("nics", nicreport.to_wire(nicreport.collect(agent.sysfs_root)))


def _probe(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent.probe_request import serve_probe

    serve_probe(ch, body, agent.name, agent.token, agent.limits, agent.transport, counting)


def _engines(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent import engine_serve

    engine_serve.serve_engines(ch, body, agent.engines)


def _engine_target(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent import engine_serve

    engine_serve.serve_target(ch, body, agent.name, agent.limits, _own_device(agent), agent.engines)


def _engine_initiate(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    from netqual.agent import engine_serve

    engine_serve.serve_initiate(
        ch, body, agent.name, agent.limits, _own_device(agent), agent.engines
    )


def _own_device(agent: Served) -> str | None:
    return agent.transport_options.rdma.device if agent.transport_options else None


def _counters(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    counters.serve(ch, kind, body, counting)


def _transport(
    agent: Served, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
) -> None:
    """A transport's own request ("tcp.bulk"): the transport named before the dot."""
    agent.transport(kind.split(".", 1)[0]).respond(ch, kind, body, agent.limits, agent.buffers)


def doctor_report() -> dict[str, Any]:
    """This node's doctor checks, as the ``doctor`` reply carries them."""
    try:
        from netqual.agent.doctor import local_report
    except ImportError as err:  # doctor is optional in minimal builds
        return {"problems": [{"severity": "error", "message": f"doctor unavailable: {err}"}]}
    report: dict[str, Any] = local_report()
    return report


_PROBE_FIELDS = ("peer", "transport", "plan", "hops", "options", "nics")
_ENGINE_FIELDS = (
    "engine",
    "address",
    "peer_address",
    "chunk_bytes",
    "depths",
    "timeout_s",
    "want",
    "pin",
    "rdma_device",
)

REQUESTS: Mapping[str, Request] = {
    r.kind: r
    for r in (
        Request("info", _info, (), False, "name, version, transports, limits, clock"),
        Request("doctor", _doctor, (), False, "this node's RDMA and host checks"),
        Request("snapshot", _snapshot, (), False, "the configuration snapshot (fleet check)"),
        Request("hostpath", _hostpath, (), False, "GPU-NIC affinity and PCIe links"),
        Request("nics", _nics, (), False, "IP interfaces and RDMA ports (rails)"),
        Request("reach", _reach, ("addresses",), False, "can probes reach it at its NIC addresses"),
        Request("probe", _probe, _PROBE_FIELDS, True, "measure one path, this node initiating"),
        Request("engines", _engines, ("engines",), False, "which fetch engines load here"),
        Request(
            "engine.target", _engine_target, _ENGINE_FIELDS, True,
            "hold a fetch engine's memory for a peer to read or write",
        ),
        Request(
            "engine.initiate", _engine_initiate,
            (*_ENGINE_FIELDS, "warmup", "ops", "descriptor", "operations", "barrier"), True,
            "fetch through an engine from a peer's target",
        ),
        Request("counters.begin", _counters, ("tcp",), False, "snapshot host counters now"),
        Request("counters.end", _counters, (), False, "host counters moved since begin"),
        Request(
            "tcp.pingpong", _transport,
            ("size_bytes", "count", "timeout_s", "nonce"), True, "answer TCP round trips",
        ),
        Request(
            "tcp.bulk", _transport,
            ("chunk_bytes", "reads", "depth", "timeout_s", "nonce"), True, "serve TCP chunk reads",
        ),
        Request(
            "rdma.connect", _transport,
            ("plan", "conninfo", "deadline_s", "nonce", "options"), True,
            "an RDMA queue pair for a probe",
        ),
        Request("rdma.close", _transport, (), True, "end an RDMA probe"),
    )
}  # fmt: skip
