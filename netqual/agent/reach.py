"""Can a peer's probe reach this agent at each of its NIC addresses? (docs/rails.md)

A rails run's probes connect to every NIC address of the inventory, not to the agent's
control address: an agent that listens on one address only, or a NIC address that is not
on this host, refuses them. The pre-flight asks each agent a ``reach`` request with its
node's NIC addresses; for each, the agent binds a socket to it (is it an address of this
host?) and connects to it at its own port (does the agent take connections there?). Only
local addresses are connected to: a coordinator cannot make an agent open connections
elsewhere. A failure makes the paths through that NIC "not measured (configuration)", never
an unsafe network verdict (``run/agentcheck``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from netqual.agent.wire.messages import Fields
from netqual.base.errors import BadRequestError

CONNECT_S = 1.0
MAX_ADDRESSES = 64
WILDCARDS = ("0.0.0.0", "::", "")


def check(address: str, port: int, listen: str) -> str | None:
    """Why a probe cannot reach this agent at ``address``:``port``, or None."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    except ValueError:
        return f"{address} is not an IP address"
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, 0))
        except OSError as err:
            return f"{address} is not an address of this host ({err.strerror or err})"
    try:
        socket.create_connection((address, port), timeout=CONNECT_S).close()
    except ConnectionRefusedError:
        where = "every address" if listen in WILDCARDS else f"{listen} only"
        return f"connection refused at {address}:{port}: the agent listens on {where}"
    except OSError as err:
        return f"cannot connect to {address}:{port}: {err.strerror or err}"
    return None


def serve(body: object, port: int, listen: str, peer: str) -> dict[str, Any]:
    """The ``reach`` answer: {``addresses`` {ADDRESS: null or the problem}}."""
    f = Fields(body, "reach", peer)
    asked = f.strings("addresses", 64)
    out: dict[str, str | None] = {}
    for i, address in enumerate(asked[:MAX_ADDRESSES]):
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise BadRequestError(peer, f"reach.addresses[{i}]", "must be an IP address") from None
        out[address] = check(address, port, listen)
    return {"addresses": out}


def from_peer(body: object, asked: Sequence[str], peer: str) -> dict[str, str | None]:
    """A peer's ``reach`` answer for the ``asked`` addresses, checked: one entry each, a
    problem a printable string (shown as it is)."""
    f = Fields(body, "reach", peer)
    got = f.obj("addresses")
    assert got is not None
    raw: Mapping[str, Any] = got.body
    out: dict[str, str | None] = {}
    for address in asked:
        if address not in raw:
            raise BadRequestError(peer, f"reach.addresses.{address}", "missing")
        value = raw[address]
        if value is not None and (not isinstance(value, str) or not value.isprintable()):
            raise BadRequestError(peer, f"reach.addresses.{address}", "must be text or null")
        out[address] = None if value is None else value[:200]
    return out
