"""Transports by name. pyverbs is only imported inside the rdma module, on first use."""

from __future__ import annotations

from netqual.errors import UsageError
from netqual.transports.interface import AgentLimits, RawBulk, RawProbe, Transport

TRANSPORT_NAMES = ("tcp", "rdma")


def get_transport(name: str) -> Transport:
    if name == "tcp":
        from netqual.transports.tcp import TcpTransport

        return TcpTransport()
    if name == "rdma":
        from netqual.transports.rdma import RdmaTransport

        transport: Transport = RdmaTransport()
        return transport
    raise UsageError("--transport", f"unknown transport {name!r} (choose from tcp, rdma)")


__all__ = ["TRANSPORT_NAMES", "AgentLimits", "RawBulk", "RawProbe", "Transport", "get_transport"]
