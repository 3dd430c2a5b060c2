"""Connections that have not authenticated yet: handled in the agent's accept loop.

A new connection costs a socket and a few hundred bytes here, never a thread or one of
the ``max_sessions`` slots: it gets the hello, has ``auth_timeout_s`` in all to send its
``auth`` frame (at most 4 KiB), and only a client that proves the token and dialled this
agent by its name takes a session slot. The pending set has its own budget
(``max_pending``, ``max_pending_per_source``); when it is full the *oldest* pending
connection is dropped, not the new one, so connections held open (slow-loris) cannot
lock out a client whose handshake takes milliseconds.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from netqual.agent.wire.handshake import ServerHandshake, SessionKeys
from netqual.agent.wire.protocol import (
    FRAME_JSON,
    HEADER,
    PRE_AUTH_MAX_FRAME_BYTES,
    check_header,
    decode_message,
    encode_frame,
    encode_message,
    error_body,
)
from netqual.base.errors import AuthError, ErrorCode, ProtocolError

log = logging.getLogger("netqual.agent")

# Called with an authenticated connection and its welcome frame: sends it and starts the
# session, or answers ``busy``; returns False when the caller should close the socket.
Admit = Callable[[socket.socket, str, SessionKeys | None, bytes], bool]


@dataclass(eq=False)
class _Pending:
    sock: socket.socket
    peer: str
    source: str
    deadline: float
    handshake: ServerHandshake
    buf: bytearray = field(default_factory=bytearray)
    length: int | None = None  # payload length once the header is in


class Admission:
    """The pending (unauthenticated) connections of one agent, driven by its selector."""

    def __init__(
        self,
        sel: selectors.BaseSelector,
        token: bytes | None,
        agent_name: str,
        version: str,
        auth_timeout_s: float,
        max_pending: int,
        max_pending_per_source: int,
        admit: Admit,
    ) -> None:
        self.sel = sel
        self.token = token
        self.agent_name = agent_name
        self.version = version
        self.auth_timeout_s = auth_timeout_s
        self.max_pending = max_pending
        self.max_pending_per_source = max_pending_per_source
        self.admit = admit
        self._all: dict[_Pending, None] = {}  # insertion order = age
        self._by_source: dict[str, collections.deque[_Pending]] = {}

    def __len__(self) -> int:
        return len(self._all)

    # -- events --------------------------------------------------------------------------
    def add(self, sock: socket.socket, addr: tuple[str, int]) -> None:
        peer = f"{addr[0]}:{addr[1]}"
        source = addr[0]
        queue = self._by_source.setdefault(source, collections.deque())
        if len(queue) >= self.max_pending_per_source:
            self._drop(queue[0], f"over {self.max_pending_per_source} pending from {source}")
        if len(self._all) >= self.max_pending:
            self._drop(next(iter(self._all)), f"over {self.max_pending} pending connections")
        sock.setblocking(False)
        hs = ServerHandshake(self.token, self.agent_name, self.version)
        p = _Pending(sock, peer, source, time.monotonic() + self.auth_timeout_s, hs)
        hello = encode_frame(FRAME_JSON, encode_message("hello", hs.hello.to_body()))
        if not self.send_frame(sock, hello):
            self._close(p)
            return
        self._all[p] = None
        self._by_source.setdefault(source, collections.deque()).append(p)
        self.sel.register(sock, selectors.EVENT_READ, p)

    def readable(self, p: _Pending) -> None:
        want = HEADER.size - len(p.buf) if p.length is None else p.length - len(p.buf)
        try:
            data = p.sock.recv(want)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._drop(p, f"receive failed: {err}", quiet=True)
            return
        if not data:
            self._drop(p, "closed before authenticating", quiet=True)
            return
        p.buf += data
        try:
            if p.length is None:
                if len(p.buf) == HEADER.size:
                    frame_type, p.length = check_header(
                        bytes(p.buf), PRE_AUTH_MAX_FRAME_BYTES, p.peer
                    )
                    if frame_type != FRAME_JSON:
                        raise ProtocolError(p.peer, "expected the auth message, got a data frame")
                    p.buf.clear()
                if p.length != 0:
                    return
            if len(p.buf) < p.length:
                return
            msg = decode_message(bytes(p.buf), p.peer)
            welcome, keys = p.handshake.answer(msg.kind, msg.body, p.peer)
        except AuthError as err:
            log.warning("refused %s: %s", p.peer, err.problem)
            self._fail(p, ErrorCode.AUTH, err.problem)
            return
        except ProtocolError as err:
            log.warning("session %s dropped: %s", p.peer, err.problem)
            self._fail(p, err.code, err.problem)
            return
        self._forget(p)
        welcome_frame = encode_frame(FRAME_JSON, encode_message("welcome", welcome))
        if not self.admit(p.sock, p.peer, keys, welcome_frame):
            self._close(p)

    def expire(self, now: float) -> None:
        for p in list(self._all):
            if p.deadline > now:
                break  # deadlines grow with age
            log.warning("dropped %s: no authentication within %g s", p.peer, self.auth_timeout_s)
            self._forget(p)
            self._close(p)

    def next_timeout(self, default_s: float) -> float:
        for p in self._all:
            return max(0.0, min(default_s, p.deadline - time.monotonic()))
        return default_s

    def close_all(self) -> None:
        for p in list(self._all):
            self._forget(p)
            self._close(p)

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def send_frame(sock: socket.socket, frame: bytes) -> bool:
        """Send a small frame without blocking; False when the kernel did not take it all."""
        try:
            return sock.send(frame) == len(frame)
        except OSError:
            return False

    @staticmethod
    def error_frame(code: ErrorCode, message: str) -> bytes:
        return encode_frame(FRAME_JSON, encode_message("error", error_body(code, message)))

    def _fail(self, p: _Pending, code: ErrorCode, message: str) -> None:
        self._forget(p)
        self.send_frame(p.sock, self.error_frame(code, message))
        self._close(p)

    def _drop(self, p: _Pending, why: str, quiet: bool = False) -> None:
        if not quiet:
            log.warning("dropped %s before authentication: %s", p.peer, why)
        self._forget(p)
        self._close(p)

    def _forget(self, p: _Pending) -> None:
        if self._all.pop(p, False) is None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(p.sock)
            queue = self._by_source.get(p.source)
            if queue is not None:
                with contextlib.suppress(ValueError):
                    queue.remove(p)
                if not queue:
                    del self._by_source[p.source]

    @staticmethod
    def _close(p: _Pending) -> None:
        with contextlib.suppress(OSError):
            p.sock.close()
