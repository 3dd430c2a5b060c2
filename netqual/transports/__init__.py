"""Transports by name: the one registry of what ``--transport`` accepts, how a node builds
a transport, and the typed options that travel with a probe request. Code outside this
package names a transport only through ``TransportKind`` and passes ``TransportOptions``
without looking inside. pyverbs is only imported inside the rdma module, on first use.
"""

from __future__ import annotations

import enum
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from netqual.agent.wire.messages import Fields
from netqual.base.choices import ChoiceError, parse_choice
from netqual.base.errors import UsageError
from netqual.model.limits import AgentLimits
from netqual.model.path import RawBulk, RawProbe
from netqual.transports.interface import Transport
from netqual.transports.rdma.options import RdmaOptions


class TransportKind(str, enum.Enum):
    TCP = "tcp"
    RDMA = "rdma"

    @classmethod
    def parse(cls, name: str, option: str = "--transport") -> TransportKind:
        try:
            return parse_choice(cls, name, option, "transport")
        except ChoiceError as err:
            raise UsageError(err.where, err.problem) from None


TRANSPORT_NAMES = tuple(k.value for k in TransportKind)


@dataclass(frozen=True)
class TransportOptions:
    """Typed device choices for the transports that have any (today RDMA: device, port,
    GID index, QP ACK timeout; TCP ignores them). An agent's own come from its flags over
    the environment; a run's (``run``/``probe`` flags) travel with every probe request to
    both ends."""

    rdma: RdmaOptions = field(default_factory=RdmaOptions)
    # A probe between two NICs (docs/rails.md): the responder's device differs from ours.
    # Set by the initiating agent from the request's ``nics``; never sent as such.
    peer_rdma: RdmaOptions | None = None

    @classmethod
    def from_flags(
        cls,
        device: str | None = None,
        port: int | None = None,
        gid_index: int | None = None,
        qp_timeout: int | None = None,
    ) -> TransportOptions:
        return cls(
            rdma=RdmaOptions(device=device, port=port, gid_index=gid_index, qp_timeout=qp_timeout)
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TransportOptions:
        return cls(rdma=RdmaOptions.from_env(env))

    def over(self, base: TransportOptions) -> TransportOptions:
        """These options where set, ``base`` elsewhere."""
        return TransportOptions(rdma=self.rdma.over(base.rdma))

    @property
    def empty(self) -> bool:
        return self.rdma.empty

    def to_body(self) -> dict[str, Any]:
        """The probe request's typed ``options`` field (docs/rdma.md)."""
        return {"rdma": self.rdma.to_json()}

    @classmethod
    def decode(cls, f: Fields | None) -> TransportOptions:
        """The ``options`` field of a probe request, checked field by field."""
        if f is None:
            return cls()
        return cls(rdma=RdmaOptions.decode(f.obj("rdma", None)))


def preload(options: TransportOptions) -> tuple[str, ...]:
    """Load, before an agent listens, the transports it is configured for; returns the
    modules loaded. A node told its RDMA device (``--rdma-device`` or
    ``NETQUAL_RDMA_DEVICE``) will be asked for RDMA probes, and the responder's acceptance
    of one is awaited ``ACCEPT_TIMEOUT_S`` (10 s): a fresh agent that imported the RDMA
    transport only then took longer than that in an emulated (qemu TCG) guest, and its
    first probe failed as a silent peer. A node without one loads it on first use, as
    before (start-up CPU: bench/startup). pyverbs itself is loaded after the acceptance."""
    if not options.rdma.device:
        return ()
    import importlib

    name = "netqual.transports.rdma.transport"
    importlib.import_module(name)
    return (name,)


def get_transport(
    kind: TransportKind | str,
    *,
    node_name: str | None = None,
    options: TransportOptions | None = None,
    run: TransportOptions | None = None,
) -> Transport:
    """The transport one agent uses for one request.

    ``options``: the node's own (default: from the environment). ``run``: the run's, from
    the probe request (``ProbeRequest.options``); they win over the node's own.
    """
    if not isinstance(kind, TransportKind):
        kind = TransportKind.parse(kind)
    if kind is TransportKind.TCP:
        from netqual.transports.tcp import TcpTransport

        return TcpTransport()
    from netqual.transports.rdma.transport import transport_for_agent

    return transport_for_agent(
        node_name or socket.gethostname(),
        run.rdma if run is not None else None,
        options.rdma if options is not None else None,
        run.peer_rdma if run is not None else None,
    )


__all__ = [
    "TRANSPORT_NAMES",
    "AgentLimits",
    "RawBulk",
    "RawProbe",
    "Transport",
    "TransportKind",
    "TransportOptions",
    "get_transport",
]
