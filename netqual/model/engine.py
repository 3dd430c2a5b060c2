"""A fetch engine's cell on a path (``--engine mooncake|nixl``, docs/engines.md): what the
data mover a deployment uses moved between the path's two NICs, READ and WRITE, and the
evidence of the transport it really used.

One ``EngineCell`` per operation; a path holds a tuple of them (``PathResult.engine``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from netqual.base.choices import parse_choice


class EngineName(str, enum.Enum):
    """The data movers netqual can drive (the connectors' fetch engines)."""

    MOONCAKE = "mooncake"  # Mooncake Transfer Engine (vLLM/SGLang Mooncake connectors, LMCache)
    NIXL = "nixl"  # NVIDIA NIXL over UCX (vLLM's NIXL connector, Dynamo)

    @classmethod
    def parse(cls, text: str, what: str = "--engine") -> EngineName:
        return parse_choice(cls, text, what)


class EngineOp(str, enum.Enum):
    READ = "read"  # the initiator pulls the target's buffer (a KV fetch)
    WRITE = "write"  # the initiator pushes into the target's buffer (a KV offload)


class EngineTransport(str, enum.Enum):
    """The wire an engine's bytes took, as proven (not as configured)."""

    TCP = "tcp"
    RDMA = "rdma"  # verbs: RoCE or InfiniBand (Mooncake's rdma, UCX rc/ud/dc)
    SHM = "shm"  # a memory copy on one host (UCX cma, posix, sysv, xpmem, knem): no network
    UNKNOWN = "unknown"  # the engine failed before anything said which

    @classmethod
    def parse(cls, text: str, what: str = "--engine-require") -> EngineTransport:
        return parse_choice(cls, text, what)


# What --engine-require accepts: a network transport.
REQUIRABLE = (EngineTransport.TCP, EngineTransport.RDMA)


@dataclass(frozen=True)
class EngineEvidence:
    """Why the cell's ``transport`` and ``device`` are what they are.

    ``claimed``: what the engine itself reported (Mooncake: the transport it installed,
    from its log; NIXL: the UCX lanes ``UCX_PROTO_INFO`` printed for this operation).
    ``carried_by`` / ``peer_carried_by``: the interface whose byte counters moved by the
    bytes the operation moved, at the initiator and at the target (None: none did, or no
    counters). ``intended``: the path's NIC at the initiator (the interface the route to the
    peer leaves by, or the inventory's NIC). ``settings``: what netqual set for the engine
    (``UCX_TLS=tcp``, the device filter, ...), so a reader can reproduce it.
    """

    claimed: tuple[str, ...] = ()
    carried_by: str | None = None
    peer_carried_by: str | None = None
    intended: str | None = None
    peer_intended: str | None = None
    bytes_moved: int = 0
    settings: tuple[str, ...] = ()
    start_s: float | None = None  # initiator: process start -> engine ready to transfer
    peer_start_s: float | None = None  # target: process start -> descriptor sent
    connect_us: float | None = None  # initiator: attaching the target (NIXL add_remote_agent)
    data_ok: bool | None = None  # the bytes arrived intact (READ: the target's pattern)
    # how the initiator's worker ended when not cleanly after its result ("killed by
    # SIGSEGV": NIXL's teardown); the measurement stands
    worker_exit: str | None = None


@dataclass(frozen=True)
class EngineCell:
    """One operation of one engine on one path. Times are per chunk, from post to
    completion, at ``depth`` chunks outstanding; ``vs_probe`` = this cell's completion p50
    over netqual's own bulk cell's at the same chunk and depth (None without that cell)."""

    name: EngineName
    version: str | None
    op: EngineOp
    chunk_bytes: int
    depth: int
    transport: EngineTransport
    device: str | None  # the NIC (netdev or RDMA device/port) that carried it
    ops: int = 0  # completions kept (warm-up excluded)
    completion_p50_us: float | None = None
    completion_p99_us: float | None = None
    goodput_gbps: float | None = None
    first_op_us: float | None = None  # the first operation alone (connection set-up)
    vs_probe: float | None = None
    fallback: str | None = None  # the engine moved bytes other than asked: why, in words
    error: str | None = None  # the cell failed: where and why
    evidence: EngineEvidence = EngineEvidence()

    @property
    def measured(self) -> bool:
        return self.error is None and self.completion_p50_us is not None


@dataclass(frozen=True)
class EnginePlan:
    """What a run's engine cells move (``run --engine``): the chunk (the workload's, or the
    first ``--chunk``) at each depth of the plan, READ and WRITE, ``warmup`` then ``ops``
    operations each, within ``timeout_s`` for all of them. ``want``: the transport the run
    qualifies (``--transport``); ``require``: ``--engine-require``, a fallback from it is a
    configuration failure of the path. ``pin``: NIC to NIC (``--rails``)."""

    name: EngineName
    chunk_bytes: int
    depths: tuple[int, ...]
    want: EngineTransport = EngineTransport.TCP
    require: EngineTransport | None = None
    warmup: int = 20
    ops: int = 200
    timeout_s: float = 120.0
    pin: bool = False

    @property
    def expected(self) -> EngineTransport:
        """The transport the cells are held to: the required one, else the run's."""
        return self.require or self.want


@dataclass(frozen=True)
class EngineAvailability:
    """One engine on one node, as ``engines`` reports it."""

    engine: EngineName
    installed: bool
    version: str | None = None
    ucx: str | None = None
    import_s: float | None = None
    rdma_devices: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def would_install(self) -> EngineTransport | None:
        """The transport the engine would pick here: RDMA when an RDMA device exists (both
        engines prefer it: Mooncake whatever its ``protocol``, UCX by its ranking), TCP."""
        if not self.installed or self.problem is not None:
            return None
        return EngineTransport.RDMA if self.rdma_devices else EngineTransport.TCP
