"""The fetch engines' interface (docs/engines.md): what an agent asks an engine worker to
do (``EngineJob``), what a target worker hands its initiator (``EngineDescriptor``), what
comes back per operation (``OpSamples``), and the errors. The cell a path keeps is
``netqual.model.engine.EngineCell`` (re-exported here).

A worker is ``python -m netqual.engines.worker``, one process per role, started by the
agent (``netqual.engines.runner``); its modules per engine (``mooncake``, ``nixl``) import
the engine lazily, inside the worker only: the agent never loads native engine code.

``EngineDescriptor.from_wire`` is where a peer's descriptor becomes a value: every field
is read through ``agent.wire.messages.Fields`` and checked against the path it claims to
serve (its address must be the path's peer address, its buffer must hold the job).
"""

from __future__ import annotations

import base64
import binascii
import enum
import ipaddress
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from netqual.agent.wire.messages import Fields
from netqual.base.errors import BadRequestError, ErrorCode, NetqualError
from netqual.model.engine import (
    EngineCell,
    EngineEvidence,
    EngineName,
    EngineOp,
    EngineTransport,
)

__all__ = [
    "EngineCell",
    "EngineDescriptor",
    "EngineError",
    "EngineEvidence",
    "EngineJob",
    "EngineName",
    "EngineOp",
    "EngineTransport",
    "EngineUnavailableError",
    "EngineWorkerError",
    "Role",
]

# Bounds on what a peer's descriptor may hold: sizes the initiator allocates and reads.
MAX_BUFFER_BYTES = 1 << 34  # a target buffer beyond 16 GiB is not a KV chunk's
MAX_METADATA_B64 = 64 * 1024  # NIXL metadata: ~500 base64 characters over TCP, more with RDMA
MAX_ADDRESS = (1 << 64) - 1


class Role(str, enum.Enum):
    CHECK = "check"  # import the engine, report its version and what it would install
    TARGET = "target"  # register a buffer, hand out the descriptor, wait for stop
    INITIATOR = "initiator"  # read and write the target's buffer at depth, timed


class EngineError(NetqualError):
    """An engine could not measure a path (it failed to start, crashed, hung)."""

    code = ErrorCode.PROBE_FAILED

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class EngineUnavailableError(EngineError):
    """The engine is not installed (or does not load) on this node: configuration."""

    code = ErrorCode.UNAVAILABLE


class EngineWorkerError(EngineError):
    """The worker process failed: ``phase`` is the last it reached, ``log_tail`` its log."""

    def __init__(self, phase: str, problem: str, log_tail: str = "") -> None:
        self.phase = phase
        self.log_tail = log_tail
        super().__init__(f"{problem} (last phase: {phase})")


@dataclass(frozen=True)
class EngineJob:
    """One worker's job, as the agent writes it on the worker's stdin (first line).

    ``address``: the address this side's engine uses (the path's address here);
    ``peer_address``: the other end's. ``netdev``: pin the engine to this interface
    (UCX_NET_DEVICES), None to leave it to the engine and its environment.
    ``rdma_device``: the RDMA device filter (Mooncake's device list, UCX's RDMA devices).
    ``want``: the transport the run asks for (Mooncake's ``protocol``; UCX_TLS).
    """

    role: Role
    engine: EngineName
    address: str
    peer_address: str
    want: EngineTransport = EngineTransport.TCP
    netdev: str | None = None
    rdma_device: str | None = None
    length_bytes: int = 0  # target: the buffer it registers
    chunk_bytes: int = 0
    depths: tuple[int, ...] = (1,)  # initiator: each depth in turn, every operation at each
    warmup: int = 0
    ops: int = 0
    ops_list: tuple[EngineOp, ...] = (EngineOp.READ, EngineOp.WRITE)
    timeout_s: float = 60.0  # initiator: all operations; target: waiting for stop
    log_dir: str = ""
    descriptor: EngineDescriptor | None = None  # initiator: the target's
    # initiator: connected and one operation done, say "ready" and wait for "go" on stdin
    # before the timed operations (a fan-in level's readers start together)
    barrier: bool = False

    @property
    def slots(self) -> int:
        """Chunks in each side's buffer: the deepest depth's."""
        return max(self.depths)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["role"] = self.role.value
        d["engine"] = self.engine.value
        d["want"] = self.want.value
        d["ops_list"] = [op.value for op in self.ops_list]
        d["depths"] = list(self.depths)
        d["descriptor"] = None if self.descriptor is None else self.descriptor.to_wire()
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EngineJob:
        """The worker's side: its parent (the agent) wrote the job, so a mistake here is a
        bug, reported as an error line, not a hostile input."""
        desc = d.get("descriptor")
        return cls(
            role=Role(d["role"]),
            engine=EngineName(d["engine"]),
            address=str(d.get("address", "")),
            peer_address=str(d.get("peer_address", "")),
            want=EngineTransport(d.get("want", "tcp")),
            netdev=d.get("netdev"),
            rdma_device=d.get("rdma_device"),
            length_bytes=int(d.get("length_bytes", 0)),
            chunk_bytes=int(d.get("chunk_bytes", 0)),
            depths=tuple(int(x) for x in d.get("depths", (1,))),
            warmup=int(d.get("warmup", 0)),
            ops=int(d.get("ops", 0)),
            ops_list=tuple(EngineOp(x) for x in d.get("ops_list", ("read", "write"))),
            timeout_s=float(d.get("timeout_s", 60.0)),
            log_dir=str(d.get("log_dir", "")),
            descriptor=None if desc is None else EngineDescriptor.from_worker(desc),
            barrier=bool(d.get("barrier", False)),
        )


@dataclass(frozen=True)
class EngineDescriptor:
    """What an initiator needs to reach a target's buffer.

    Mooncake: ``session`` is "IP:PORT" (its RPC port), ``metadata_b64`` is None. NIXL:
    ``session`` is the target agent's name and ``metadata_b64`` its agent metadata (the
    UCX worker addresses: which interfaces the initiator will connect to).
    ``claimed``: the transports the target's engine installed or listed, as it said.
    """

    engine: EngineName
    version: str
    address: str
    session: str
    buffer_addr: int
    length_bytes: int
    metadata_b64: str | None = None
    claimed: tuple[str, ...] = ()
    netdev: str | None = None  # the interface the target pinned, None when not pinned
    start_s: float | None = None  # the target's process start -> this descriptor

    def to_wire(self) -> dict[str, Any]:
        d = asdict(self)
        d["engine"] = self.engine.value
        d["claimed"] = list(self.claimed)
        return d

    @classmethod
    def from_worker(cls, d: Mapping[str, Any]) -> EngineDescriptor:
        """A descriptor the agent's own worker wrote (already checked by its agent when it
        came from a peer)."""
        return cls(
            engine=EngineName(d["engine"]),
            version=str(d["version"]),
            address=str(d["address"]),
            session=str(d["session"]),
            buffer_addr=int(d["buffer_addr"]),
            length_bytes=int(d["length_bytes"]),
            metadata_b64=d.get("metadata_b64"),
            claimed=tuple(str(x) for x in d.get("claimed", ())),
            netdev=d.get("netdev"),
            start_s=None if d.get("start_s") is None else float(d["start_s"]),
        )

    @classmethod
    def from_wire(
        cls,
        body: object,
        where: str,
        peer: str,
        *,
        engine: EngineName,
        peer_address: str,
        need_bytes: int,
    ) -> EngineDescriptor:
        """A descriptor from the network, field by field: the engine asked for, the path's
        peer address (nothing else may be dialled), a buffer that holds ``need_bytes``,
        bounded base64 that decodes. Raises BadRequestError naming the field."""
        f = Fields(body, where, peer)
        got = f.choice("engine", tuple(e.value for e in EngineName))
        if got != engine.value:
            raise BadRequestError(peer, f"{where}.engine", f"{got!r}, the job is {engine.value}")
        address = f.address("address")
        if not _same_address(address, peer_address):
            raise BadRequestError(
                peer, f"{where}.address", f"{address!r} is not the path's peer {peer_address}"
            )
        session = f.string("session", 300)
        if engine is EngineName.MOONCAKE:
            _check_mooncake_session(session, peer_address, peer, f"{where}.session")
        elif not session or not session.isprintable() or " " in session:
            raise BadRequestError(peer, f"{where}.session", "must be a printable agent name")
        length = f.integer("length_bytes", 1, MAX_BUFFER_BYTES)
        if length < need_bytes:
            raise BadRequestError(
                peer, f"{where}.length_bytes", f"{length} < {need_bytes} the job moves"
            )
        buffer_addr = f.integer("buffer_addr", 1, MAX_ADDRESS - length)
        metadata = None
        if engine is EngineName.NIXL:
            metadata = f.string("metadata_b64", MAX_METADATA_B64)
            try:
                base64.b64decode(metadata, validate=True)
            except (binascii.Error, ValueError):
                raise BadRequestError(peer, f"{where}.metadata_b64", "not base64") from None
        elif body_has(f, "metadata_b64"):
            raise BadRequestError(peer, f"{where}.metadata_b64", "not for mooncake")
        netdev = None if f.body.get("netdev") is None else f.string("netdev", 15)
        start = None if f.body.get("start_s") is None else f.number("start_s", 0.0, 3600.0)
        return cls(
            engine=engine,
            version=f.string("version", 64),
            address=address,
            session=session,
            buffer_addr=buffer_addr,
            length_bytes=length,
            metadata_b64=metadata,
            claimed=f.strings("claimed", 120),
            netdev=netdev,
            start_s=start,
        )


def body_has(f: Fields, key: str) -> bool:
    return f.body.get(key) is not None


def _same_address(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a.lower().rstrip(".") == b.lower().rstrip(".")


def _check_mooncake_session(session: str, peer_address: str, peer: str, where: str) -> None:
    """ "IP:PORT" (IPv6 in brackets), the IP being the path's peer: Mooncake dials it."""
    host, sep, port = session.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadRequestError(peer, where, f"{session[:60]!r} is not IP:PORT")
    if not _same_address(host, peer_address):
        raise BadRequestError(peer, where, f"{host[:60]!r} is not the path's peer {peer_address}")
