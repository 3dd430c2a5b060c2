"""The control protocol: versioned, length-prefixed frames over TCP, authenticated.

Frame: ``magic b"NQ" | version u8 | type u8 | length u32`` (network order), then
``length`` payload bytes, then (after the handshake) a 32-byte HMAC-SHA256 tag over
``sequence u64 | header | payload`` with this direction's session key. Type 1 is a JSON
object ``{"kind": str, "body": object}``; type 2 is raw bytes (sample arrays). A frame
longer than the receiver's cap is refused before a byte of it is read, so a hostile
length prefix cannot make anyone allocate. A frame whose tag does not match (modified,
replayed, reordered or injected) ends the session.

The handshake (``netqual.agent.wire.handshake``) proves that both sides hold the token and that the
agent is the node that was dialled, and yields the session keys.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.agent.wire.handshake import (
    PROTOCOL_VERSION,
    ClientHandshake,
    Hello,
    ServerHandshake,
    SessionKeys,
    protocol_mismatch,
)
from netqual.agent.wire.messages import Fields
from netqual.base.errors import (
    ErrorCode,
    FrameTooLargeError,
    IntegrityError,
    PeerError,
    PeerUnreachableError,
    ProtocolError,
)

MAGIC = b"NQ"
HEADER = struct.Struct("!2sBBI")
FRAME_JSON = 1
FRAME_BYTES = 2
TAG_BYTES = 32
DEFAULT_MAX_FRAME_BYTES = 1 << 20
# Before a peer has authenticated, only the tiny hello/auth messages are legitimate.
PRE_AUTH_MAX_FRAME_BYTES = 4096
_SEQ = struct.Struct("!Q")


@dataclass(frozen=True)
class Message:
    kind: str
    body: dict[str, Any]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def decode_message(payload: bytes, peer: str) -> Message:
    """A JSON message frame's payload -> Message; anything else is a ProtocolError."""
    try:
        obj = json.loads(payload, parse_constant=_reject_constant)
    except RecursionError as err:  # "[[[[..." : the parser's recursion, not ours
        raise ProtocolError(peer, "malformed message: nested too deeply") from err
    except ValueError as err:  # bad JSON or UTF-8, NaN/Infinity, an int over 4300 digits
        raise ProtocolError(peer, f"malformed message: {str(err)[:200]}") from err
    if not isinstance(obj, dict) or not isinstance(obj.get("body"), dict):
        raise ProtocolError(peer, "malformed message: expected {kind: str, body: object}")
    kind = Fields(obj, "message", peer).string("kind", 64)
    return Message(kind, obj["body"])


def encode_message(kind: str, body: Mapping[str, Any] | None = None) -> bytes:
    return json.dumps({"kind": kind, "body": dict(body or {})}, separators=(",", ":")).encode()


def encode_frame(frame_type: int, payload: bytes) -> bytes:
    """An unauthenticated frame (the handshake's, or any frame of an --insecure session)."""
    return HEADER.pack(MAGIC, PROTOCOL_VERSION, frame_type, len(payload)) + payload


def check_header(header: bytes, max_bytes: int, peer: str) -> tuple[int, int]:
    """(frame type, payload length) of a frame header, or the ProtocolError it deserves."""
    magic, version, frame_type, length = HEADER.unpack(header)
    if magic != MAGIC:
        raise ProtocolError(peer, f"not a netqual peer (bad magic {magic!r})")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(peer, protocol_mismatch(version))
    if frame_type not in (FRAME_JSON, FRAME_BYTES):
        raise ProtocolError(peer, f"unknown frame type {frame_type}")
    if length > max_bytes:
        raise FrameTooLargeError(
            peer, f"frame of {length} bytes exceeds the cap of {max_bytes} (max_frame_bytes)"
        )
    return frame_type, length


def _tag(key: bytes, seq: int, header: bytes, payload: bytes | bytearray | memoryview) -> bytes:
    mac = hmac.new(key, _SEQ.pack(seq), hashlib.sha256)
    mac.update(header)
    mac.update(payload)
    return mac.digest()


def error_body(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"code": code.value, "message": message}


class Channel:
    """A framed connection to one peer. Not thread-safe; one owner at a time."""

    def __init__(
        self,
        sock: socket.socket,
        peer: str,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        keys: SessionKeys | None = None,
    ) -> None:
        self.sock = sock
        self.peer = peer
        self.max_frame_bytes = max_frame_bytes
        self._deadline: float | None = None
        self._keys = keys
        self._send_seq = 0
        self._recv_seq = 0

    def measurement_key(self, *, responder: bool) -> bytes | None:
        """The key the responder's measurement tags derive from (None when insecure): its
        send key, which is the initiator's receive key (``netqual.transports.integrity``)."""
        if self._keys is None:
            return None
        return self._keys.send if responder else self._keys.recv

    def use_keys(self, keys: SessionKeys | None) -> None:
        """From now on every frame carries (and must carry) a MAC; sequence numbers from 0."""
        self._keys = keys
        self._send_seq = self._recv_seq = 0

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
        header = HEADER.pack(MAGIC, PROTOCOL_VERSION, frame_type, len(payload))
        if self._keys is None:
            self.send_all(header + payload)
            return
        tag = _tag(self._keys.send, self._send_seq, header, payload)
        self._send_seq += 1
        self.send_all(b"".join((header, payload, tag)))

    def _recv_frame(self, max_bytes: int) -> tuple[int, bytes]:
        header = self.recv_exact(HEADER.size)
        frame_type, length = check_header(header, max_bytes, self.peer)
        payload = self.recv_exact(length)
        if self._keys is not None:
            tag = self.recv_exact(TAG_BYTES)
            if not hmac.compare_digest(tag, _tag(self._keys.recv, self._recv_seq, header, payload)):
                raise IntegrityError(
                    self.peer,
                    f"frame {self._recv_seq} failed its integrity check (modified, replayed, "
                    "reordered or injected); session ended",
                )
            self._recv_seq += 1
        return frame_type, payload

    def send(self, kind: str, body: Mapping[str, Any] | None = None) -> None:
        self._send_frame(FRAME_JSON, encode_message(kind, body))

    def recv(self) -> Message:
        frame_type, payload = self._recv_frame(self.max_frame_bytes)
        if frame_type != FRAME_JSON:
            raise ProtocolError(self.peer, "expected a message frame, got a data frame")
        return decode_message(payload, self.peer)

    def expect(self, kind: str) -> dict[str, Any]:
        """Receive one message of ``kind``; an ``error`` message becomes PeerError."""
        msg = self.recv()
        if msg.kind == "error":
            raise peer_error(msg.body, self.peer)
        if msg.kind != kind:
            raise ProtocolError(self.peer, f"expected {kind!r}, got {msg.kind!r}")
        return msg.body

    def request(
        self, kind: str, body: Mapping[str, Any] | None = None, reply: str = "ok"
    ) -> dict[str, Any]:
        self.send(kind, body)
        return self.expect(reply)

    def send_error(self, code: ErrorCode, message: str) -> None:
        self.send("error", error_body(code, message))

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


def peer_error(body: Mapping[str, Any], peer: str) -> PeerError:
    """An ``error`` message as PeerError: a known code, printable bounded text."""
    f = Fields(body, "error", peer)
    return PeerError(peer, ErrorCode.parse(body.get("code")), f.text("message", default=""))


# -- handshake over a blocking channel ------------------------------------------------------
def server_handshake(ch: Channel, token: bytes | None, agent_name: str, version: str) -> None:
    """Agent side over a blocking channel (tests and fakes; the agent uses its event loop).

    Raises AuthError (after telling the client) when the client fails.
    """
    full_cap = ch.max_frame_bytes
    ch.max_frame_bytes = min(full_cap, PRE_AUTH_MAX_FRAME_BYTES)
    try:
        hs = ServerHandshake(token, agent_name, version)
        ch.send("hello", hs.hello.to_body())
        msg = ch.recv()
        try:
            welcome, keys = hs.answer(msg.kind, msg.body, ch.peer)
        except ProtocolError as err:
            with contextlib.suppress(OSError, ProtocolError, PeerUnreachableError):
                ch.send_error(ErrorCode.AUTH, err.problem)
            raise
        ch.send("welcome", welcome)
        ch.use_keys(keys)
    finally:
        ch.max_frame_bytes = full_cap


def client_handshake(ch: Channel, token: bytes | None, expect_name: str | None = None) -> Hello:
    """Client side; returns the agent's hello. Verifies the agent holds the token and is
    ``expect_name`` (when given); installs the session keys on ``ch``."""
    hs = ClientHandshake(token, expect_name)
    msg = ch.recv()
    if msg.kind == "error":
        raise peer_error(msg.body, ch.peer)
    if msg.kind != "hello":
        raise ProtocolError(ch.peer, f"expected 'hello', got {msg.kind!r}")
    hello, auth = hs.auth(msg.body, ch.peer)
    ch.send("auth", auth)
    reply = ch.recv()
    ch.use_keys(hs.welcome(reply.kind, reply.body, ch.peer))
    return hello


BUSY_RETRIES = 3


def connect(
    address: str,
    port: int,
    token: bytes | None,
    peer: str,
    timeout_s: float = 10.0,
    expect_name: str | None = None,
    source: str | None = None,
) -> tuple[Channel, Hello]:
    """Open an authenticated channel to an agent. Returns the channel and its hello.

    ``source``: the local address to bind (a probe from one NIC, docs/rails.md).

    ``expect_name``: the node's name; the agent must be that node (None accepts whoever
    answers, for ``probe HOST:PORT``). An agent at its session cap answers ``busy``; that
    is retried a few times with a growing pause (within ``timeout_s``).
    """
    deadline = time.monotonic() + timeout_s
    pause = 0.25
    for attempt in range(BUSY_RETRIES + 1):
        try:
            left = max(0.1, deadline - time.monotonic())
            return _connect_once(address, port, token, peer, left, expect_name, source)
        except PeerError as err:
            busy = err.code is ErrorCode.BUSY
            if not busy or attempt == BUSY_RETRIES or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def _connect_once(
    address: str,
    port: int,
    token: bytes | None,
    peer: str,
    timeout_s: float,
    expect_name: str | None,
    source: str | None = None,
) -> tuple[Channel, Hello]:
    bind = None if source is None else (source, 0)
    try:
        sock = socket.create_connection((address, port), timeout=timeout_s, source_address=bind)
    except OSError as err:
        frm = "" if source is None else f" from {source}"
        raise PeerUnreachableError(peer, f"connect to {address}:{port}{frm} failed: {err}") from err
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ch = Channel(sock, peer, max_frame_bytes=PRE_AUTH_MAX_FRAME_BYTES)
    try:
        ch.set_deadline(time.monotonic() + timeout_s)
        hello = client_handshake(ch, token, expect_name)
        ch.max_frame_bytes = DEFAULT_MAX_FRAME_BYTES
        ch.set_timeout(timeout_s)
    except TimeoutError as err:
        ch.close()
        raise PeerUnreachableError(peer, f"no answer within {timeout_s:g} s") from err
    except BaseException:
        ch.close()
        raise
    return ch, hello
