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
from typing import Any, ClassVar

from netqual.models import AgentLimits, ProbePlan, RawBulk, RawProbe
from netqual.protocol import Channel


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


__all__ = ["AgentLimits", "RawBulk", "RawProbe", "Transport"]
