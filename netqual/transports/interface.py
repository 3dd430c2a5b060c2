"""The one Transport interface. Implementations: ``tcp``, ``rdma``.

A probe runs between two agents. The *initiator* agent opens an authenticated control
channel to the *responder* agent and calls ``Transport.initiate``; the responder's agent
routes every message whose kind starts with ``"<transport name>."`` to
``Transport.respond`` on that same channel. What a transport does over the channel is its
own business (TCP uses it as the data path too; RDMA exchanges QP info over it).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from netqual.models import ProbePlan
from netqual.protocol import Channel


@dataclass(frozen=True)
class AgentLimits:
    """Hard caps on what a peer may ask of an agent; a request over a cap gets an error."""

    max_frame_bytes: int = 1 << 20
    max_iterations: int = 1_000_000
    max_message_bytes: int = 1 << 20
    max_chunk_bytes: int = 64 << 20
    max_depth: int = 64
    max_bulk_bytes: int = 8 << 30  # per bulk request
    max_duration_s: float = 600.0
    max_sessions: int = 64
    auth_timeout_s: float = 5.0
    idle_timeout_s: float = 120.0


@dataclass(frozen=True)
class RawBulk:
    """One bulk-read cell as measured at the initiator (nanoseconds, not yet reduced)."""

    chunk_bytes: int
    depth: int
    completion_ns: npt.NDArray[np.int64]  # one per read: post -> last byte / completion
    elapsed_ns: int  # first post -> last completion
    error: str | None = None


@dataclass(frozen=True)
class RawProbe:
    """What one probe produced: kept RTT samples (warm-up already dropped) and bulk cells."""

    rtt_ns: npt.NDArray[np.int64]
    warmup_discarded: int
    bulk: tuple[RawBulk, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


class Transport(abc.ABC):
    name: ClassVar[str]

    def check_available(self) -> None:  # noqa: B027 - most transports are always available
        """Raise TransportUnavailableError when this node cannot run the transport."""

    @abc.abstractmethod
    def initiate(
        self, channel: Channel, plan: ProbePlan, deadline: float, peer_address: str
    ) -> RawProbe:
        """Run ping-pong then bulk reads against the responder behind ``channel``.

        ``deadline`` is a time.monotonic() value; past it the probe must fail with
        ProbeError or TimeoutError, never hang. ``peer_address`` is the responder's
        address as the inventory gives it (RDMA uses it to pick a GID).
        """

    @abc.abstractmethod
    def respond(
        self, channel: Channel, kind: str, body: Mapping[str, Any], limits: AgentLimits
    ) -> None:
        """Serve one request of ``kind`` (prefixed with ``name + "."``) from an initiator.

        Requests over ``limits`` must be answered with ``channel.send_error("limit", ...)``.
        """
