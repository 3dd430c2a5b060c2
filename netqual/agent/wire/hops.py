"""Hop count of a routed IP path, from the TTL / hop limit of received packets.

Every agent answers small UDP datagrams on its control port number. The prober sends
``MAGIC | nonce | 0`` with TTL 64; the agent replies ``MAGIC | nonce | ttl_seen`` with TTL
64, where ``ttl_seen`` is the TTL it received (IP_RECVTTL / IPV6_RECVHOPLIMIT): the last
byte of the request is overwritten, so a reply is exactly as long as its request and a
spoofed source gets no more bytes than the spoofer sent (no amplification, not even one
byte). Each router decrements the TTL once, so ``routers = 64 - ttl_received`` per
direction, and ``hops = routers + 1`` (traceroute numbering: a directly connected peer is
hop 1). The prober accepts only a reply carrying its random nonce.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass

MAGIC = b"NQH2"  # NQH1 replies were one byte longer than their requests
NONCE_BYTES = 16
INITIAL_TTL = 64
_REQUEST_LEN = len(MAGIC) + NONCE_BYTES + 1  # the last byte: room for the TTL seen
_CMSG_SPACE = socket.CMSG_SPACE(struct.calcsize("i"))
# Linux constants missing from some Python builds' socket module.
_IP_RECVTTL = getattr(socket, "IP_RECVTTL", 12)
_IP_TTL_CMSG = getattr(socket, "IP_TTL", 2)
_IPV6_RECVHOPLIMIT = getattr(socket, "IPV6_RECVHOPLIMIT", 51)
_IPV6_HOPLIMIT = getattr(socket, "IPV6_HOPLIMIT", 52)


@dataclass(frozen=True)
class HopCount:
    hops: int  # reverse path (what the prober received), traceroute numbering
    forward_hops: int | None  # as seen by the responder, if it could read the TTL


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _prepare(sock: socket.socket, family: socket.AddressFamily) -> None:
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, _IPV6_RECVHOPLIMIT, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, INITIAL_TTL)
    else:
        sock.setsockopt(socket.IPPROTO_IP, _IP_RECVTTL, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, INITIAL_TTL)


def _ttl_of(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancdata:
        if (level, kind) in (
            (socket.IPPROTO_IP, _IP_TTL_CMSG),
            (socket.IPPROTO_IPV6, _IPV6_HOPLIMIT),
        ):
            return int(struct.unpack("i", data[: struct.calcsize("i")])[0])
    return None


def open_responder(host: str, port: int) -> socket.socket:
    family = _family(host)
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    _prepare(sock, family)
    sock.bind((host, port))
    return sock


def serve(sock: socket.socket, stop: threading.Event) -> None:
    """Answer hop probes until ``stop`` is set. Malformed datagrams are ignored."""
    while not stop.is_set():
        ready, _, _ = select.select([sock], [], [], 0.5)
        if not ready:
            continue
        try:
            data, anc, _flags, addr = sock.recvmsg(64, _CMSG_SPACE)
        except OSError:
            continue
        if len(data) != _REQUEST_LEN or not data.startswith(MAGIC):
            continue
        ttl = _ttl_of(anc) or 0
        with contextlib.suppress(OSError):
            sock.sendto(data[:-1] + bytes([min(ttl, 255)]), addr)  # as long as the request


def measure(address: str, port: int, timeout_s: float = 1.0, tries: int = 3) -> HopCount | None:
    """Hop count to an agent, or None when no reply came (old agent, UDP filtered)."""
    family = _family(address)
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        _prepare(sock, family)
        try:
            sock.connect((address, port))
        except OSError:
            return None
        end = time.monotonic() + timeout_s
        for _ in range(tries):
            nonce = os.urandom(NONCE_BYTES)
            with contextlib.suppress(OSError):
                sock.send(MAGIC + nonce + b"\0")
            wait_until = min(end, time.monotonic() + timeout_s / tries)
            while (left := wait_until - time.monotonic()) > 0:
                ready, _, _ = select.select([sock], [], [], left)
                if not ready:
                    break
                try:
                    data, anc, _flags, _addr = sock.recvmsg(64, _CMSG_SPACE)
                except OSError:
                    break
                if len(data) != _REQUEST_LEN or data[:-1] != MAGIC + nonce:
                    continue
                ttl = _ttl_of(anc)
                if ttl is None:
                    return None
                seen = data[-1]
                forward = INITIAL_TTL - seen + 1 if 0 < seen <= INITIAL_TTL else None
                return HopCount(hops=INITIAL_TTL - ttl + 1, forward_hops=forward)
    return None
