"""The one Transport interface. Implementations: ``tcp``, ``rdma``.

A probe runs between two agents. The *initiator* agent opens an authenticated control
channel to the *responder* agent and calls ``Transport.initiate``; the responder's agent
routes every message whose kind starts with ``"<transport name>."`` to
``Transport.respond`` on that same channel. What a transport does over the channel is its
own business (TCP uses it as the data path too; RDMA exchanges QP info over it).
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from netqual.agent.wire.protocol import Channel
from netqual.base.errors import BusyError, PeerSilentError
from netqual.model.limits import AgentLimits
from netqual.model.path import RawBulk, RawProbe
from netqual.model.plan import ProbePlan

# A real agent accepts (or refuses) a measurement request as soon as it has checked it,
# before any buffer or device is set up: waiting longer for the answer only waits for a
# node that passed the pre-flight check yet sits on its requests (``PeerSilentError``).
ACCEPT_TIMEOUT_S = 10.0


def accepted(
    ch: Channel, kind: str, body: Mapping[str, Any], deadline: float, reply: str = "ok"
) -> dict[str, Any]:
    """Send a measurement request and wait at most ACCEPT_TIMEOUT_S (and never past the
    probe's ``deadline``) for the responder's acceptance ``reply``; its refusal is the
    usual PeerError. Afterwards the channel runs to ``deadline`` again."""
    waited_s = min(ACCEPT_TIMEOUT_S, max(0.0, deadline - time.monotonic()))
    ch.set_deadline(time.monotonic() + waited_s)
    try:
        answer = ch.request(kind, body, reply=reply)
    except TimeoutError as err:
        raise PeerSilentError(
            f"{ch.peer} never answered the {kind} request (waited {waited_s:.1f} s; its agent "
            "passed the pre-flight check, so it is up but not serving measurements)"
        ) from err
    ch.set_deadline(deadline)
    return answer


class BufferBudget:
    """Payload buffer bytes all sessions of one agent may hold at once.

    64 sessions each asking for 64 MiB chunks would otherwise pin 4 GiB; a request that
    does not fit now is answered ``busy`` (``max_buffer_bytes``).
    """

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self._used = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, nbytes: int) -> Iterator[None]:
        with self._lock:
            if self._used + nbytes > self.total_bytes:
                raise BusyError(
                    f"agent busy: {nbytes} bytes of buffers asked, {self.total_bytes - self._used}"
                    f" of {self.total_bytes} free (max_buffer_bytes)"
                )
            self._used += nbytes
        try:
            yield
        finally:
            with self._lock:
                self._used -= nbytes


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
        self,
        channel: Channel,
        kind: str,
        body: Mapping[str, Any],
        limits: AgentLimits,
        buffers: BufferBudget | None = None,
    ) -> None:
        """Serve one request of ``kind`` (prefixed with ``name + "."``) from an initiator.

        The request is decoded with ``netqual.agent.wire.messages.Fields`` and checked with
        ``limits``: raise BadRequestError / LimitError (the agent answers them and keeps
        the session). Payload buffers are held through ``buffers`` (BusyError when full).
        """


__all__ = ["AgentLimits", "BufferBudget", "RawBulk", "RawProbe", "Transport"]
