"""The control protocol over a real socket pair: framing limits and the HMAC handshake."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

import pytest

from netqual.errors import AuthError, PeerError, ProtocolError
from netqual.protocol import (
    HEADER,
    MAGIC,
    PROTOCOL_VERSION,
    Channel,
    client_handshake,
    server_handshake,
)

TOKEN = b"0123456789abcdef0123456789abcdef"


def pair() -> tuple[Channel, Channel]:
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    return Channel(a, "client-side"), Channel(b, "agent-side")


def run_server(fn: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as err:  # collected for the assertion in the test thread
            errors.append(err)

    t = threading.Thread(target=target)
    t.start()
    return t, errors


def test_handshake_with_the_same_token() -> None:
    client, server = pair()
    t, errors = run_server(lambda: server_handshake(server, TOKEN, "agent1", "1.0"))
    hello = client_handshake(client, TOKEN)
    t.join()
    assert not errors
    assert hello["agent"] == "agent1" and hello["auth"] == "hmac-sha256"
    client.send("ping", {"n": 1})
    assert server.recv().body == {"n": 1}


def test_wrong_token_is_refused_on_both_sides() -> None:
    client, server = pair()
    t, errors = run_server(lambda: server_handshake(server, TOKEN, "agent1", "1.0"))
    with pytest.raises(AuthError, match="wrong token"):
        client_handshake(client, b"another-token-another-token-1234")
    t.join()
    assert isinstance(errors[0], AuthError)


def test_agent_that_does_not_hold_the_token_is_detected() -> None:
    client, server = pair()

    def impostor() -> None:
        server.send(
            "hello",
            {"protocol": PROTOCOL_VERSION, "agent": "x", "auth": "hmac-sha256", "nonce": "00" * 32},
        )
        server.recv()
        server.send("welcome", {"mac": "f" * 64})

    t, _ = run_server(impostor)
    with pytest.raises(AuthError, match="failed to prove"):
        client_handshake(client, TOKEN)
    t.join()


def test_insecure_agent_and_tokened_client_do_not_mix() -> None:
    client, server = pair()
    t, _ = run_server(lambda: server_handshake(server, None, "agent1", "1.0"))
    with pytest.raises(AuthError, match="without authentication"):
        client_handshake(client, TOKEN)
    client.close()
    t.join()


def test_client_without_token_is_told_what_to_do() -> None:
    client, server = pair()
    t, _ = run_server(lambda: server_handshake(server, TOKEN, "agent1", "1.0"))
    with pytest.raises(AuthError, match="requires a token"):
        client_handshake(client, None)
    client.close()
    t.join()


def test_request_before_auth_is_refused() -> None:
    client, server = pair()
    t, errors = run_server(lambda: server_handshake(server, TOKEN, "agent1", "1.0"))
    client.expect("hello")
    client.send("probe", {})
    with pytest.raises(PeerError, match="authenticate first"):
        client.expect("welcome")
    t.join()
    assert isinstance(errors[0], AuthError)


def test_oversized_length_prefix_is_refused_before_reading() -> None:
    client, server = pair()
    client.sock.sendall(HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, 0xFFFFFFFF))
    with pytest.raises(ProtocolError, match="exceeds the cap"):
        server.recv()


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", "bad magic"),
        (HEADER.pack(MAGIC, 9, 1, 2) + b"{}", "protocol version 9"),
        (HEADER.pack(MAGIC, PROTOCOL_VERSION, 7, 0), "unknown frame type"),
        (HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, 3) + b"\xff\xfe{", "malformed message"),
        (HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, 2) + b"[]", "malformed message"),
        (HEADER.pack(MAGIC, PROTOCOL_VERSION, 2, 1) + b"x", "expected a message frame"),
    ],
)
def test_garbage_is_a_protocol_error(raw: bytes, words: str) -> None:
    client, server = pair()
    client.sock.sendall(raw)
    with pytest.raises(ProtocolError, match=words):
        server.recv()


def test_bytes_frames_respect_the_callers_cap() -> None:
    client, server = pair()
    client.send_bytes(b"x" * 100)
    with pytest.raises(ProtocolError, match="exceeds the cap of 99"):
        server.recv_bytes(99)
    client, server = pair()  # after a protocol error the stream is abandoned
    client.send_bytes(struct.pack("<q", 42))
    assert struct.unpack("<q", server.recv_bytes(8)) == (42,)
