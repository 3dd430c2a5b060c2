"""Authenticated sessions to agents, kept open between a run's probe requests.

A session costs a TCP connection, the token handshake (netqual.handshake: two messages, key
derivation) and a close, on both ends; a 1,024-node run makes a million probe requests, and
opening a session for each was about a quarter of the coordinator's time per request. An agent
serves any number of requests in one session (netqual.agent.server), so the coordinator keeps the
session of a finished request and uses it for that agent's next one. Nothing about trust
changes: the session was authenticated once, its keys MAC every frame, and frame sequence
numbers continue, so a reused session cannot be spliced or replayed.

A session is reused only while the agent surely still holds it: an agent ends a session
idle for ``idle_timeout_s`` (120 s by default), so one idle for more than ``REUSE_S`` is
closed instead, and one that turned readable while idle (the agent closed it, or sent
something unasked) is dropped. A reused session that breaks before the agent's answer
(agent restarted) is replaced by a new one once (``probe_request.request_probe``).
"""

from __future__ import annotations

import contextlib
import resource
import select
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from netqual.agent.wire.protocol import Channel, connect
from netqual.base.errors import NetqualError, PeerUnreachableError
from netqual.model.node import Node

REUSE_S = 20.0  # well inside the agent's idle timeout (AgentLimits.idle_timeout_s, 120 s)

_Key = tuple[str, int, str | None]
T = TypeVar("T")


class Sessions:
    """Idle sessions by agent (address, port, identity); thread-safe. ``close`` ends them."""

    def __init__(
        self, token: bytes | None, reuse_s: float = REUSE_S, max_idle: int | None = None
    ) -> None:
        self.token = token
        self.reuse_s = reuse_s
        self._idle: dict[_Key, list[tuple[float, Channel]]] = {}
        self._lock = threading.Lock()
        self._count = 0
        self.max_idle = max_idle if max_idle is not None else _fd_share()
        self.opened = self.reused = 0

    @staticmethod
    def _key(node: Node) -> _Key:
        return (node.control_address, node.port, node.identity)

    def take(self, node: Node, timeout_s: float) -> tuple[Channel, bool]:
        """A session to ``node``'s agent: an idle one still good (True), else a new one."""
        now = time.monotonic()
        while True:
            with self._lock:
                idle = self._idle.get(self._key(node))
                if not idle:
                    break
                since, ch = idle.pop()
                self._count -= 1
            if now - since <= self.reuse_s and not _spoke(ch):
                self.reused += 1
                return ch, True
            ch.close()
        ch, _hello = connect(
            node.control_address, node.port, self.token, node.name, timeout_s,
            expect_name=node.identity,
        )  # fmt: skip
        self.opened += 1
        return ch, False

    def use(self, node: Node, connect_s: float, exchange: Callable[[Channel], T]) -> T:
        """``exchange`` on a session to ``node``'s agent, given back when it ends cleanly and
        closed otherwise. A reused session lost before any answer (``SessionLost``: the
        agent let go of it) is replaced by a new one, once; a new one lost is the error."""
        ch, reused = self.take(node, connect_s)
        try:
            try:
                out = exchange(ch)
            except SessionLost as lost:
                ch.close()
                if not reused:
                    raise lost.err from lost.err
                ch, _ = self.take(node, connect_s)
                try:
                    out = exchange(ch)
                except SessionLost as again:
                    raise again.err from again.err
        except BaseException:
            ch.close()  # an unclean end: unread frames or a broken session are never reused
            raise
        self.give(node, ch)
        return out

    def give(self, node: Node, ch: Channel) -> None:
        """A session whose request ended cleanly (nothing unread): the next one may use it,
        unless ``max_idle`` sessions are kept already (then it is ended)."""
        with self._lock:
            keep = self._count < self.max_idle
            if keep:
                self._idle.setdefault(self._key(node), []).append((time.monotonic(), ch))
                self._count += 1
        if not keep:
            _bye(ch)

    def close(self) -> None:
        """Say ``bye`` on every idle session and close it (the end of a run)."""
        with self._lock:
            idle = [ch for chans in self._idle.values() for _, ch in chans]
            self._idle.clear()
            self._count = 0
        for ch in idle:
            _bye(ch)


def _bye(ch: Channel) -> None:
    with contextlib.suppress(NetqualError, OSError, TimeoutError):
        ch.set_timeout(1.0)
        ch.send("bye")
    ch.close()


def _fd_share() -> int:
    """Idle sessions kept at most: half the file descriptors the process may open, less
    room for the files and the sessions of running probes (a soft limit of 1,024 keeps
    448). Past it a session is ended as before; reuse is only ever a saving."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 16
    return max(0, soft // 2 - 64)


def _spoke(ch: Channel) -> bool:
    """The idle session is readable: the agent closed it (EOF) or sent what nobody asked."""
    try:
        return bool(select.select([ch.sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class SessionLost(Exception):
    """The session broke before the agent's answer began; ``err`` says how."""

    def __init__(self, err: PeerUnreachableError) -> None:
        super().__init__(str(err))
        self.err = err
