"""Helpers shared by tests (from test_tcp_pingpong_deadline.py)."""

from __future__ import annotations

import socket

from netqual.agent.wire.protocol import Channel


def _tcp_pair() -> tuple[Channel, Channel]:
    """Real TCP on loopback (kernel send buffers, partial sends), not a Unix socketpair."""
    with socket.create_server(("127.0.0.1", 0)) as lst:
        a = socket.create_connection(lst.getsockname())
        b, _ = lst.accept()
    a.settimeout(5)
    b.settimeout(5)
    return Channel(a, "initiator"), Channel(b, "responder")
