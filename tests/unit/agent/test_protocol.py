"""The control protocol over a real socket pair: framing limits and the HMAC handshake.

The agent's side of the handshake is the agent's own code: ``agent_handshake`` drives
``netqual.agent.admission.Admission`` (the accept loop's handling of connections that have
not authenticated yet) on the socket, as the agent's selector loop does."""

from __future__ import annotations

import json
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

from netqual.agent.admission import Admission
from netqual.agent.wire.handshake import PROTOCOL_VERSION, ClientHandshake, SessionKeys, _hkdf
from netqual.agent.wire.protocol import (
    HEADER,
    MAGIC,
    Channel,
    client_handshake,
)
from netqual.base.errors import AuthError, IntegrityError, PeerError, ProtocolError

TOKEN = b"0123456789abcdef0123456789abcdef"


def pair() -> tuple[Channel, Channel]:
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    return Channel(a, "client-side"), Channel(b, "agent-side")


def agent_handshake(ch: Channel, token: bytes | None, name: str, version: str) -> None:
    """The agent's admission of the connection ``ch`` holds; AuthError when the agent
    refused or dropped the client (it then closed the socket, as the agent does)."""
    sel = selectors.DefaultSelector()
    admitted: list[SessionKeys | None] = []

    def admit(sock: socket.socket, peer: str, keys: SessionKeys | None, welcome: bytes) -> bool:
        sock.setblocking(True)
        sock.sendall(welcome)
        admitted.append(keys)
        return True

    adm = Admission(sel, token, name, version, 5.0, 4, 4, admit)
    adm.add(ch.sock, ("127.0.0.1", 0))
    deadline = time.monotonic() + 10
    while len(adm) and time.monotonic() < deadline:
        for key, _ in sel.select(adm.next_timeout(0.5)):
            adm.readable(key.data)
        adm.expire(time.monotonic())
    sel.close()
    if not admitted:
        raise AuthError(ch.peer, "the agent refused the client")
    ch.sock.settimeout(5)
    ch.use_keys(admitted[0])


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
    t, errors = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    hello = client_handshake(client, TOKEN)
    t.join()
    assert not errors
    assert hello.agent == "agent1" and hello.auth == "hmac-sha256"
    client.send("ping", {"n": 1})
    assert server.recv().body == {"n": 1}


def test_wrong_token_is_refused_on_both_sides() -> None:
    client, server = pair()
    t, errors = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    with pytest.raises(AuthError, match="wrong token"):
        client_handshake(client, b"another-token-another-token-1234")
    t.join()
    assert isinstance(errors[0], AuthError)


def test_agent_that_does_not_hold_the_token_is_detected() -> None:
    client, server = pair()

    def impostor() -> None:
        server.send(
            "hello",
            {
                "protocol": PROTOCOL_VERSION,
                "agent": "x",
                "version": "0",
                "auth": "hmac-sha256",
                "nonce": "00" * 32,
            },
        )
        server.recv()
        server.send("welcome", {"mac": "f" * 64})

    t, _ = run_server(impostor)
    with pytest.raises(AuthError, match="failed to prove"):
        client_handshake(client, TOKEN)
    t.join()


def test_insecure_agent_and_tokened_client_do_not_mix() -> None:
    client, server = pair()
    t, _ = run_server(lambda: agent_handshake(server, None, "agent1", "1.0"))
    with pytest.raises(AuthError, match="without authentication"):
        client_handshake(client, TOKEN)
    client.close()
    t.join()


def test_client_without_token_is_told_what_to_do() -> None:
    client, server = pair()
    t, _ = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    with pytest.raises(AuthError, match="requires a token"):
        client_handshake(client, None)
    client.close()
    t.join()


def test_request_before_auth_is_refused() -> None:
    client, server = pair()
    t, errors = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    client.expect("hello")
    client.send("probe", {})
    with pytest.raises(PeerError, match="'probe' before authenticating"):
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


# -- identity, frame integrity, versions (issue: relay-proof control channel) ---------------
def handshaken(expect: str | None = "agent1") -> tuple[Channel, Channel]:
    client, server = pair()
    t, errors = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    client_handshake(client, TOKEN, expect)
    t.join()
    assert not errors
    return client, server


def test_client_expecting_another_node_refuses_the_agent() -> None:
    client, server = pair()
    t, _ = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    with pytest.raises(AuthError, match="dialled as 'gpu07' but this agent is 'agent1'"):
        client_handshake(client, TOKEN, "gpu07")
    client.close()
    t.join()


def test_agent_refuses_a_client_that_dialled_another_name() -> None:
    """A relay can rewrite the hello's name; the MAC'd dialled name still reaches the agent."""
    client, server = pair()
    t, errors = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    hello = client.expect("hello")
    hs = ClientHandshake(TOKEN, "gpu07")
    _, auth = hs.auth({**hello, "agent": "gpu07"}, "relay")
    client.send("auth", auth)
    with pytest.raises(PeerError, match="dialled as 'gpu07' but this agent is 'agent1'"):
        client.expect("welcome")
    t.join()
    assert isinstance(errors[0], AuthError)


def test_mac_binds_the_name_a_lying_name_field_fails() -> None:
    client, server = pair()
    t, errors = run_server(lambda: agent_handshake(server, TOKEN, "agent1", "1.0"))
    hello = client.expect("hello")
    _, auth = ClientHandshake(TOKEN, "gpu07").auth({**hello, "agent": "gpu07"}, "relay")
    client.send("auth", {**auth, "name": "agent1"})  # name fixed up, MAC still for gpu07
    with pytest.raises(PeerError, match="wrong token"):
        client.expect("welcome")
    t.join()
    assert isinstance(errors[0], AuthError)


def test_frames_after_the_handshake_carry_a_mac() -> None:
    client, server = handshaken()
    client.send("ping", {"n": 1})
    server.send("pong", {"n": 2})
    assert server.recv().body == {"n": 1}
    assert client.recv().body == {"n": 2}
    client.send_bytes(b"\x01" * 1000)
    assert server.recv_bytes(1000) == b"\x01" * 1000


def _capture_frame(ch: Channel, kind: str, body: dict[str, object]) -> bytes:
    """The exact bytes ``ch`` would send for one message (sent into a throwaway pair)."""
    sink_a, sink_b = socket.socketpair()
    real, ch.sock = ch.sock, sink_a
    try:
        ch.send(kind, body)
        sink_b.settimeout(1)
        return sink_b.recv(65536)
    finally:
        ch.sock = real
        sink_a.close()
        sink_b.close()


@pytest.mark.parametrize("attack", ["modified", "replayed", "reordered", "injected", "truncated"])
def test_tampered_frames_end_the_session(attack: str) -> None:
    client, server = handshaken()
    first = _capture_frame(client, "info", {})
    second = _capture_frame(client, "probe", {"n": 2})
    if attack == "modified":
        wire = first[:-40] + bytes([first[-40] ^ 1]) + first[-39:]
    elif attack == "replayed":
        wire = first + first
        server.sock.sendall(b"")
    elif attack == "reordered":
        wire = second + first
    elif attack == "injected":
        wire = HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, 2) + b"{}" + b"\x00" * 32
    else:  # tag cut off and replaced by the next frame's header
        wire = first[:-32] + second
    client.sock.sendall(wire)
    if attack == "replayed":
        assert server.recv().kind == "info"
    with pytest.raises(IntegrityError, match="integrity check"):
        server.recv()


@pytest.mark.parametrize("old", [1, 2])
def test_old_protocol_peer_gets_a_clear_version_error(old: int) -> None:
    client, server = pair()
    old_hello = b'{"kind":"hello","body":{"protocol":%d}}' % old
    server.sock.sendall(HEADER.pack(MAGIC, old, 1, len(old_hello)) + old_hello)
    with pytest.raises(
        ProtocolError,
        match=rf"protocol version {old} on the other side.*version {PROTOCOL_VERSION}",
    ):
        client_handshake(client, TOKEN)


@pytest.mark.parametrize(
    "hello",
    [
        "9" * 5000,
        {
            "protocol": PROTOCOL_VERSION,
            "agent": "a",
            "version": "0",
            "auth": "hmac-sha256",
            "nonce": "é" * 64,
        },
        {
            "protocol": PROTOCOL_VERSION,
            "agent": "a\x00b",
            "version": "0",
            "auth": "hmac-sha256",
            "nonce": "",
        },
        {"protocol": 2.5},
        {
            "protocol": PROTOCOL_VERSION,
            "agent": "a",
            "version": "0",
            "auth": "rot13",
            "nonce": "00" * 32,
        },
        {
            "protocol": PROTOCOL_VERSION,
            "agent": "\ud800",
            "version": "0",
            "auth": "none",
            "nonce": "00" * 32,
        },
    ],
)
def test_hostile_hello_is_a_protocol_error(hello: dict[str, object] | str) -> None:
    client, server = pair()
    if isinstance(hello, str):  # an integer Python refuses to convert (over 4300 digits)
        raw = b'{"kind":"hello","body":{"protocol":' + hello.encode() + b"}}"
    else:
        raw = json.dumps({"kind": "hello", "body": hello}).encode()
    server.sock.sendall(HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, len(raw)) + raw)
    with pytest.raises(ProtocolError):
        client_handshake(client, TOKEN)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"kind":"x","body":{"n":NaN}}',
        b'{"kind":"x","body":{"n":-Infinity}}',
        b'{"kind":"x","body":{"n":' + b"7" * 5000 + b"}}",
        b'{"kind":"\\ud800","body":{}}',
        b'{"kind":5,"body":{}}',
    ],
)
def test_json_a_peer_cannot_send(raw: bytes) -> None:
    client, server = pair()
    client.sock.sendall(HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, len(raw)) + raw)
    with pytest.raises(ProtocolError, match=r"malformed message|message\.kind"):
        server.recv()


def test_hkdf_matches_rfc5869_test_case_1() -> None:
    okm = _hkdf(b"\x0b" * 22, bytes(range(13)), bytes(range(0xF0, 0xFA)), 42)
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )
