"""What the initiator asks of the responder, checked against the responder's limits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from netqual.errors import ProtocolError, TransportUnavailableError
from netqual.models import ProbePlan
from netqual.protocol import Channel
from netqual.transports.interface import AgentLimits


@dataclass(frozen=True)
class SessionPlan:
    iterations: int
    warmup: int
    size_bytes: int
    chunks_bytes: tuple[int, ...]
    depths: tuple[int, ...]
    reads: tuple[int, ...]  # per chunk, same order as chunks_bytes

    @classmethod
    def from_plan(cls, plan: ProbePlan) -> SessionPlan:
        chunks = tuple(plan.chunks_bytes) if plan.bulk else ()
        return cls(
            iterations=plan.iterations,
            warmup=plan.warmup,
            size_bytes=plan.size_bytes,
            chunks_bytes=chunks,
            depths=tuple(plan.depths) if chunks else (),
            reads=tuple(plan.reads_for(c) for c in chunks),
        )

    @property
    def rounds(self) -> int:
        return self.iterations + self.warmup

    @property
    def max_chunk_bytes(self) -> int:
        return max(self.chunks_bytes, default=0)

    def cells(self) -> Iterator[tuple[int, int, int]]:
        """(chunk_bytes, depth, reads) in the order TCP measures them."""
        for chunk, reads in zip(self.chunks_bytes, self.reads, strict=True):
            for depth in self.depths:
                yield chunk, depth, reads

    def to_json(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations,
            "warmup": self.warmup,
            "size_bytes": self.size_bytes,
            "chunks_bytes": list(self.chunks_bytes),
            "depths": list(self.depths),
            "reads": list(self.reads),
        }

    @classmethod
    def from_json(cls, obj: Any, peer: str = "peer") -> SessionPlan:
        if not isinstance(obj, dict):
            raise ProtocolError(peer, "rdma.connect: 'plan' must be an object")

        def ints(name: str) -> tuple[int, ...]:
            value = obj.get(name)
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
            ):
                raise ProtocolError(
                    peer, f"rdma.connect: plan field {name!r} must be a list of positive integers"
                )
            return tuple(value)

        def one(name: str, low: int) -> int:
            value = obj.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ProtocolError(
                    peer, f"rdma.connect: plan field {name!r} must be an integer >= {low}"
                )
            return value

        plan = cls(
            iterations=one("iterations", 1),
            warmup=one("warmup", 0),
            size_bytes=one("size_bytes", 1),
            chunks_bytes=ints("chunks_bytes"),
            depths=ints("depths"),
            reads=ints("reads"),
        )
        if len(plan.reads) != len(plan.chunks_bytes):
            raise ProtocolError(peer, "rdma.connect: plan 'reads' must have one entry per chunk")
        return plan

    def over_limits(self, limits: AgentLimits) -> str | None:
        """The first way this plan exceeds ``limits``, in words; None when it fits."""
        if self.rounds > limits.max_iterations:
            return f"{self.rounds} ping-pong rounds exceed the agent limit {limits.max_iterations}"
        if self.size_bytes > limits.max_message_bytes:
            return f"{self.size_bytes} B messages exceed the agent limit {limits.max_message_bytes}"
        for chunk, reads in zip(self.chunks_bytes, self.reads, strict=True):
            if chunk > limits.max_chunk_bytes:
                return f"{chunk} B chunks exceed the agent limit {limits.max_chunk_bytes}"
            if chunk * reads > limits.max_bulk_bytes:
                total = chunk * reads
                return f"{total} B of bulk reads exceed the agent limit {limits.max_bulk_bytes}"
        for depth in self.depths:
            if depth > limits.max_depth:
                return f"depth {depth} exceeds the agent limit {limits.max_depth}"
        return None


def local_ip_of(channel: Channel) -> str | None:
    """The local IP this node uses towards the peer (the probed IP on the responder)."""
    try:
        name = channel.sock.getsockname()
    except (OSError, AttributeError):
        return None
    return str(name[0]) if isinstance(name, tuple) and name else None


def unavailable_message(node: str, err: TransportUnavailableError) -> str:
    """'rdma unavailable on gpu01: no RDMA device (...); load the NIC driver ...'"""
    text = f"{err.transport} unavailable on {node}: {err.problem}"
    return f"{text}; {err.hint}" if err.hint else text
