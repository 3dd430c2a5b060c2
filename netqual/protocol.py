"""The control protocol: versioned, length-prefixed frames over TCP, HMAC authentication.

Frame: ``magic b"NQ" | version u8 | type u8 | length u32`` (network order), then
``length`` payload bytes. Type 1 is a JSON object ``{"kind": str, "body": object}``;
type 2 is raw bytes (sample arrays). A frame longer than the receiver's cap is refused
before a byte of it is read, so a hostile length prefix cannot make anyone allocate.

Authentication happens before anything else: the agent sends ``hello`` with a random
nonce; the client answers ``auth`` with its own nonce and
HMAC-SHA256(token, "client" | server_nonce | client_nonce); the agent answers ``welcome``
with HMAC-SHA256(token, "server" | client_nonce | server_nonce), so both sides prove
they hold the token and a recorded exchange cannot be replayed.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.errors import AuthError, PeerError, PeerUnreachableError, ProtocolError

MAGIC = b"NQ"
PROTOCOL_VERSION = 1
HEADER = struct.Struct("!2sBBI")
FRAME_JSON = 1
FRAME_BYTES = 2
DEFAULT_MAX_FRAME_BYTES = 1 << 20
# Before a peer has authenticated, only the tiny hello/auth messages are legitimate.
PRE_AUTH_MAX_FRAME_BYTES = 4096
NONCE_BYTES = 32
_AUTH_LABEL = b"netqual-auth-v1"


@dataclass(frozen=True)
class Message:
    kind: str
    body: dict[str, Any]


def _mac(token: bytes, role: bytes, first: bytes, second: bytes) -> str:
    return hmac.new(
        token, _AUTH_LABEL + b"|" + role + b"|" + first + second, hashlib.sha256
    ).hexdigest()


class FrameTooLargeError(ProtocolError):
    """A frame header announced more bytes than the receiver accepts (a limit, not noise)."""


class Channel:
    """A framed connection to one peer. Not thread-safe; one owner at a time."""

    def __init__(
        self, sock: socket.socket, peer: str, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ) -> None:
        self.sock = sock
        self.peer = peer
        self.max_frame_bytes = max_frame_bytes
        self._deadline: float | None = None

    # -- timing ------------------------------------------------------------------------
    def set_timeout(self, timeout_s: float | None) -> None:
        """Per-call timeout for later blocking calls (clears any deadline)."""
        self._deadline = None
        self.sock.settimeout(timeout_s)

    def set_deadline(self, deadline: float) -> None:
        """Make every later blocking call fail once time.monotonic() passes deadline.

        The deadline bounds the *total* time, so a peer that trickles one byte at a time
        cannot stretch a receive beyond it (a per-call timeout would restart per byte).
        """
        self._deadline = deadline
        self._apply_deadline()

    def _apply_deadline(self) -> None:
        if self._deadline is None:
            return
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"deadline passed talking to {self.peer}")
        self.sock.settimeout(remaining)

    # -- raw bytes ---------------------------------------------------------------------
    def recv_exact(self, n: int) -> bytes:
        buf = bytearray(n)
        self.recv_into_exact(memoryview(buf))
        return bytes(buf)

    def recv_into_exact(self, view: memoryview) -> None:
        got, n = 0, len(view)
        while got < n:
            self._apply_deadline()
            try:
                k = self.sock.recv_into(view[got:], n - got)
            except TimeoutError:
                raise
            except OSError as err:
                raise PeerUnreachableError(self.peer, f"receive failed: {err}") from err
            if k == 0:
                raise PeerUnreachableError(self.peer, "connection closed by peer")
            got += k

    def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self._apply_deadline()
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise
        except OSError as err:
            raise PeerUnreachableError(self.peer, f"send failed: {err}") from err

    # -- frames ------------------------------------------------------------------------
    def _send_frame(self, frame_type: int, payload: bytes) -> None:
        self.send_all(HEADER.pack(MAGIC, PROTOCOL_VERSION, frame_type, len(payload)) + payload)

    def _recv_frame(self, max_bytes: int) -> tuple[int, bytes]:
        magic, version, frame_type, length = HEADER.unpack(self.recv_exact(HEADER.size))
        if magic != MAGIC:
            raise ProtocolError(self.peer, f"not a netqual peer (bad magic {magic!r})")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(
                self.peer, f"protocol version {version}, this side speaks {PROTOCOL_VERSION}"
            )
        if frame_type not in (FRAME_JSON, FRAME_BYTES):
            raise ProtocolError(self.peer, f"unknown frame type {frame_type}")
        if length > max_bytes:
            raise FrameTooLargeError(
                self.peer,
                f"frame of {length} bytes exceeds the cap of {max_bytes} (max_frame_bytes)",
            )
        return frame_type, self.recv_exact(length)

    def send(self, kind: str, body: Mapping[str, Any] | None = None) -> None:
        payload = json.dumps({"kind": kind, "body": dict(body or {})}, separators=(",", ":"))
        self._send_frame(FRAME_JSON, payload.encode())

    def recv(self) -> Message:
        frame_type, payload = self._recv_frame(self.max_frame_bytes)
        if frame_type != FRAME_JSON:
            raise ProtocolError(self.peer, "expected a message frame, got a data frame")
        try:
            obj = json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ProtocolError(self.peer, f"malformed message: {err}") from err
        except RecursionError as err:  # "[[[[..." : the parser's recursion, not ours
            raise ProtocolError(self.peer, "malformed message: nested too deeply") from err
        if (
            not isinstance(obj, dict)
            or not isinstance(obj.get("kind"), str)
            or not isinstance(obj.get("body"), dict)
        ):
            raise ProtocolError(self.peer, "malformed message: expected {kind: str, body: object}")
        return Message(obj["kind"], obj["body"])

    def expect(self, kind: str) -> dict[str, Any]:
        """Receive one message of ``kind``; an ``error`` message becomes PeerError."""
        msg = self.recv()
        if msg.kind == "error":
            raise PeerError(
                self.peer, str(msg.body.get("code", "error")), str(msg.body.get("message", ""))
            )
        if msg.kind != kind:
            raise ProtocolError(self.peer, f"expected {kind!r}, got {msg.kind!r}")
        return msg.body

    def request(
        self, kind: str, body: Mapping[str, Any] | None = None, reply: str = "ok"
    ) -> dict[str, Any]:
        self.send(kind, body)
        return self.expect(reply)

    def send_error(self, code: str, message: str) -> None:
        self.send("error", {"code": code, "message": message})

    def send_bytes(self, data: bytes) -> None:
        self._send_frame(FRAME_BYTES, data)

    def recv_bytes(self, max_bytes: int) -> bytes:
        frame_type, payload = self._recv_frame(max_bytes)
        if frame_type != FRAME_BYTES:
            raise ProtocolError(self.peer, "expected a data frame, got a message frame")
        return payload

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- handshake -------------------------------------------------------------------------
def server_handshake(ch: Channel, token: bytes | None, agent_name: str, version: str) -> None:
    """Agent side. Raises AuthError (after telling the client) when the client fails.

    Until the client has authenticated, frames are capped at PRE_AUTH_MAX_FRAME_BYTES so
    an unauthenticated peer cannot make the agent buffer a full-size frame.
    """
    full_cap = ch.max_frame_bytes
    ch.max_frame_bytes = min(full_cap, PRE_AUTH_MAX_FRAME_BYTES)
    try:
        _server_handshake(ch, token, agent_name, version)
    finally:
        ch.max_frame_bytes = full_cap


def _server_handshake(ch: Channel, token: bytes | None, agent_name: str, version: str) -> None:
    nonce = os.urandom(NONCE_BYTES)
    ch.send(
        "hello",
        {
            "protocol": PROTOCOL_VERSION,
            "agent": agent_name,
            "version": version,
            "auth": "hmac-sha256" if token else "none",
            "nonce": nonce.hex(),
        },
    )
    msg = ch.recv()
    if msg.kind != "auth":
        ch.send_error("auth", "authenticate first")
        raise AuthError(ch.peer, f"sent {msg.kind!r} before authenticating")
    client_nonce_hex = msg.body.get("nonce", "")
    try:
        client_nonce = bytes.fromhex(str(client_nonce_hex))
    except ValueError:
        client_nonce = b""
    if token is None:
        ch.send("welcome", {"mac": ""})
        return
    if len(client_nonce) != NONCE_BYTES:
        ch.send_error("auth", "bad client nonce")
        raise AuthError(ch.peer, "bad client nonce")
    expected = _mac(token, b"client", nonce, client_nonce)
    if not hmac.compare_digest(expected, str(msg.body.get("mac", ""))):
        ch.send_error("auth", "authentication failed: wrong token")
        raise AuthError(ch.peer, "wrong token")
    ch.send("welcome", {"mac": _mac(token, b"server", client_nonce, nonce)})


def client_handshake(ch: Channel, token: bytes | None) -> dict[str, Any]:
    """Client side; returns the agent's hello body. Verifies the agent holds the token too."""
    hello = ch.expect("hello")
    if hello.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(ch.peer, f"agent speaks protocol {hello.get('protocol')!r}")
    auth = hello.get("auth")
    try:
        nonce = bytes.fromhex(str(hello.get("nonce", "")))
    except ValueError as err:
        raise ProtocolError(ch.peer, "bad nonce in hello") from err
    client_nonce = os.urandom(NONCE_BYTES)
    if auth == "none":
        if token is not None:
            raise AuthError(
                ch.peer,
                "agent runs without authentication (--insecure) but a token was given; "
                "restart the agent with a token, or drop the token here",
            )
        ch.send("auth", {"nonce": client_nonce.hex(), "mac": ""})
        ch.expect("welcome")
        return hello
    if auth != "hmac-sha256":
        raise ProtocolError(ch.peer, f"unknown auth scheme {auth!r}")
    if token is None:
        raise AuthError(ch.peer, "agent requires a token (--token-file or NETQUAL_TOKEN)")
    ch.send(
        "auth", {"nonce": client_nonce.hex(), "mac": _mac(token, b"client", nonce, client_nonce)}
    )
    try:
        welcome = ch.expect("welcome")
    except PeerError as err:
        raise AuthError(ch.peer, err.message) from err
    if not hmac.compare_digest(
        _mac(token, b"server", client_nonce, nonce), str(welcome.get("mac", ""))
    ):
        raise AuthError(ch.peer, "agent failed to prove it holds the token")
    return hello


def connect(
    address: str, port: int, token: bytes | None, peer: str, timeout_s: float = 10.0
) -> tuple[Channel, dict[str, Any]]:
    """Open an authenticated channel to an agent. Returns the channel and its hello."""
    try:
        sock = socket.create_connection((address, port), timeout=timeout_s)
    except OSError as err:
        raise PeerUnreachableError(peer, f"connect to {address}:{port} failed: {err}") from err
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ch = Channel(sock, peer)
    try:
        hello = client_handshake(ch, token)
    except TimeoutError as err:
        ch.close()
        raise PeerUnreachableError(peer, f"no answer within {timeout_s:g} s") from err
    except BaseException:
        ch.close()
        raise
    return ch, hello
