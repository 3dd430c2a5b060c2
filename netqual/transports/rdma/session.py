"""What the initiator asks of the responder, checked against the responder's limits."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel, peer_error
from netqual.base.errors import BadRequestError, NetqualError, ProbeError, TransportUnavailableError
from netqual.model.fetchprofile import profile
from netqual.model.plan import ProbePlan
from netqual.transports.interface import AgentLimits
from netqual.transports.rdma.conninfo import MAX_QPS


@dataclass(frozen=True)
class SessionPlan:
    iterations: int
    warmup: int
    size_bytes: int
    chunks_bytes: tuple[int, ...]
    depths: tuple[int, ...]
    reads: tuple[int, ...]  # per chunk, same order as chunks_bytes
    qps: int = 1  # QPs per endpoint (a fetch profile's; the first carries the ping-pong)

    @classmethod
    def from_plan(cls, plan: ProbePlan) -> SessionPlan:
        """A fetch profile's chunk is the bytes its slices read (whole slices), one read
        per chunk as the responder sees it (its bulk area and limits)."""
        chunks = tuple(plan.chunks_bytes) if plan.bulk else ()
        reads = tuple(plan.reads_for(c) for c in chunks)
        qps = 1
        if plan.fetch_profile and chunks:
            prof = profile(plan.fetch_profile)
            qps = max(prof.connections_for(c) for c in chunks)
            chunks = tuple(prof.fetched_bytes(c) for c in chunks)
        return cls(
            iterations=plan.iterations,
            warmup=plan.warmup,
            size_bytes=plan.size_bytes,
            chunks_bytes=chunks,
            depths=tuple(plan.depths) if chunks else (),
            reads=reads,
            qps=qps,
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
            **({"qps": self.qps} if self.qps > 1 else {}),
        }

    @classmethod
    def from_json(cls, obj: Any, peer: str = "peer") -> SessionPlan:
        f = Fields(obj, "rdma.connect.plan", peer)
        plan = cls(
            iterations=f.integer("iterations", 1, 1 << 40),
            warmup=f.integer("warmup", 0, 1 << 40),
            size_bytes=f.integer("size_bytes", 1, 1 << 40),
            chunks_bytes=_optional_ints(f, "chunks_bytes"),
            depths=_optional_ints(f, "depths"),
            reads=_optional_ints(f, "reads"),
            qps=f.integer("qps", 1, MAX_QPS, 1),
        )
        if len(plan.reads) != len(plan.chunks_bytes):
            raise BadRequestError(peer, "rdma.connect.plan.reads", "must have one entry per chunk")
        return plan

    def over_limits(self, limits: AgentLimits) -> str | None:
        """The first way this plan exceeds ``limits``, in words; None when it fits."""
        if (problem := limits.check_pingpong(self.rounds, self.size_bytes)) is not None:
            return problem
        for chunk, depth, reads in self.cells():
            if (problem := limits.check_bulk(chunk, reads, depth)) is not None:
                return problem
        return None


def _optional_ints(f: Fields, key: str) -> tuple[int, ...]:
    """A list of positive integers; empty when the plan has no bulk cells."""
    if f.body.get(key) == []:
        return ()
    return f.ints(key, 1, 1 << 40)


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


STOPPED_TEXT_CHARS = 500


def say_stopped(channel: Channel, err: Exception) -> None:
    """``rdma.stopped`` {reason}: best effort; a dead channel tells the initiator as much."""
    reason = err.problem if isinstance(err, ProbeError) else f"rdma verbs call failed: {err}"
    with contextlib.suppress(NetqualError, OSError):
        channel.send("rdma.stopped", {"reason": reason[:STOPPED_TEXT_CHARS]})


def responder_stopped(channel: Channel) -> str | None:
    """What the responder said when its control channel turned readable mid-measurement
    (the ping-pong, or a fetch profile's READs): its reason for stopping, or None when the
    channel closed (its agent is gone)."""
    try:
        channel.set_timeout(1.0)
        msg = channel.recv()
    except (NetqualError, OSError):
        return None
    if msg.kind == "rdma.stopped":
        reason = Fields(msg.body, "rdma.stopped", channel.peer).text("reason", "no reason given")
        return f"the responder stopped early: {reason[:STOPPED_TEXT_CHARS]}"
    if msg.kind == "error":
        return f"the responder stopped early: {peer_error(msg.body, channel.peer).message}"
    return f"the responder sent {msg.kind[:40]!r} while it was measured"
