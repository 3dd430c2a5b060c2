"""The long-running agent: one per node, serving many authenticated control sessions.

New connections are handshaken in the accept loop (``netqual.agent.admission``): they cost no
thread and never hold a session slot. Each authenticated session gets a thread (probes are
blocking socket loops; a thread per session keeps the timed path free of event-loop
overhead). Anything a peer can make the agent do is capped by ``AgentLimits``; a peer that
does not authenticate within ``auth_timeout_s`` is dropped; an authenticated client beyond
``max_sessions`` gets a ``busy`` error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

from netqual import __version__
from netqual.agent import counters
from netqual.agent.admission import Admission
from netqual.agent.requests import REQUESTS
from netqual.agent.wire import hops as hops_mod
from netqual.agent.wire.handshake import SessionKeys
from netqual.agent.wire.protocol import Channel
from netqual.base.errors import (
    BadRequestError,
    BusyError,
    ErrorCode,
    LimitError,
    ListenError,
    NetqualError,
    ProtocolError,
)
from netqual.model.engine import EngineName
from netqual.transports import (
    TRANSPORT_NAMES,
    AgentLimits,
    Transport,
    TransportOptions,
    get_transport,
)
from netqual.transports.interface import BufferBudget

log = logging.getLogger("netqual.agent")


class Agent:
    def __init__(
        self,
        host: str,
        port: int,
        token: bytes | None,
        name: str | None = None,
        limits: AgentLimits | None = None,
        transport_options: TransportOptions | None = None,
        sysfs_root: Path = Path("/"),
        engines: tuple[EngineName, ...] | None = None,
    ) -> None:
        self.host = host
        # the fetch engines it offers (netqual agent --engines); None: every one installed
        self.engines = engines
        self.sysfs_root = sysfs_root  # hostpath, nics and snapshot read sysfs below it
        self.port = port
        self.token = token
        self.name = name or socket.gethostname()
        self.limits = limits or AgentLimits()
        self.buffers = BufferBudget(self.limits.max_buffer_bytes)
        self.transport_options = transport_options
        self._stop = threading.Event()
        self._sessions = threading.BoundedSemaphore(self.limits.max_sessions)
        self._listener: socket.socket | None = None
        self._udp: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._measuring = 0  # probes and transport requests in progress (``info``)
        self.activity = counters.Activity()  # tells whether a counter window was shared
        self.counter_sources = counters.Sources()
        # stop() may run in a signal handler: it only sets a flag and pokes this pipe, which
        # wakes the accept loop at once instead of at its next select timeout.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)

    # -- lifecycle ---------------------------------------------------------------------
    def bind(self) -> tuple[str, int]:
        """Open the TCP control socket and the UDP hop-count socket; returns the address."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        lst = socket.socket(family, socket.SOCK_STREAM)
        try:
            lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lst.bind((self.host, self.port))
            lst.listen(128)
            self.port = lst.getsockname()[1]
            self._udp = hops_mod.open_responder(self.host, self.port)
        except OSError as err:
            lst.close()
            raise ListenError(self.host, self.port, err) from err
        self._listener = lst
        return self.host, self.port

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            log.info("signal %d: shutting down", signum)
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def serve_forever(self, on_ready: Callable[[], None] | None = None) -> None:
        if self._listener is None:
            self.bind()
        assert self._listener is not None and self._udp is not None
        udp = threading.Thread(target=hops_mod.serve, args=(self._udp, self._stop), daemon=True)
        udp.start()
        if on_ready:
            on_ready()
        with selectors.DefaultSelector() as sel:
            pending = Admission(
                sel,
                self.token,
                self.name,
                __version__,
                auth_timeout_s=self.limits.auth_timeout_s,
                max_pending=self.limits.max_pending,
                max_pending_per_source=self.limits.max_pending_per_source,
                admit=self._admit,
            )
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            self._listener.setblocking(False)
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=pending.next_timeout(0.5)):
                    if key.fileobj is self._listener:
                        self._accept(pending)
                    elif key.data is not None:
                        pending.readable(key.data)
                pending.expire(time.monotonic())
            pending.close_all()
        self._listener.close()
        self._shutdown_sessions()
        _wake_udp(self._udp)
        udp.join(timeout=1.0)
        self._udp.close()
        self._wake_r.close()
        self._wake_w.close()

    def _shutdown_sessions(self, timeout_s: float = 1.0) -> None:
        """Wake every session blocked in recv (shutdown -> EOF) and wait a bounded time."""
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        end = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(timeout=max(0.0, end - time.monotonic()))

    def _accept(self, pending: Admission) -> None:
        assert self._listener is not None
        for _ in range(64):  # drain a burst, but let pending handshakes progress too
            try:
                conn, addr = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as err:  # e.g. EMFILE: back off instead of spinning
                log.warning("accept failed: %s", err)
                time.sleep(0.05)
                return
            pending.add(conn, addr)

    def _admit(
        self, conn: socket.socket, peer: str, keys: SessionKeys | None, welcome: bytes
    ) -> bool:
        """Take a session slot, send ``welcome`` and start the session; or answer ``busy``.
        False: the caller closes the connection."""
        if not self._sessions.acquire(blocking=False):
            log.warning("busy: refused %s, all %d sessions in use", peer, self.limits.max_sessions)
            message = (
                f"agent busy: all {self.limits.max_sessions} sessions in use "
                "(max_sessions, --max-sessions)"
            )
            Admission.send_frame(conn, Admission.error_frame(ErrorCode.BUSY, message))
            return False
        if not Admission.send_frame(conn, welcome):
            self._sessions.release()
            return False
        conn.setblocking(True)
        with self._conns_lock:
            self._conns.add(conn)
        t = threading.Thread(target=self._session, args=(conn, peer, keys), daemon=True)
        self._threads = [x for x in self._threads if x.is_alive()]
        try:
            t.start()
        except RuntimeError as err:  # can't start new thread: refuse this one, keep serving
            log.warning("refused %s: %s", peer, err)
            with self._conns_lock:
                self._conns.discard(conn)
            self._sessions.release()
            return False
        self._threads.append(t)
        return True

    # -- one session -------------------------------------------------------------------
    def _session(self, conn: socket.socket, peer: str, keys: SessionKeys | None) -> None:
        ch = Channel(conn, peer, max_frame_bytes=self.limits.max_frame_bytes, keys=keys)
        counting = counters.Counting(self.activity, counters.Tally(), self.counter_sources)
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ch.set_timeout(self.limits.idle_timeout_s)
            while not self._stop.is_set():
                msg = ch.recv()
                if msg.kind == "bye":
                    break
                try:
                    self._dispatch(ch, msg.kind, msg.body, counting)
                except (BadRequestError, LimitError, BusyError) as err:
                    # A refused request, not a broken session: answer it and keep serving.
                    log.info("session %s: %s refused: %s", peer, msg.kind[:40], err)
                    ch.send_error(err.code, err.problem)
        except ProtocolError as err:
            log.warning("session %s dropped: %s", peer, err.problem)
            with contextlib.suppress(OSError, NetqualError):
                ch.set_timeout(0.5)
                ch.send_error(err.code, err.problem)
        except NetqualError as err:
            log.info("session %s ended: %s", peer, err)
        except TimeoutError:
            log.info("session %s ended: idle or silent peer", peer)
        except OSError as err:
            log.info("session %s ended: %s", peer, err)
        except Exception:  # a bug must end one session, never the agent
            log.exception("session %s: internal error", peer)
            with contextlib.suppress(Exception):
                ch.set_timeout(0.5)
                ch.send_error(ErrorCode.INTERNAL, "agent internal error; see the agent log")
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
            ch.close()
            self._sessions.release()

    def _dispatch(
        self, ch: Channel, kind: str, body: dict[str, Any], counting: counters.Counting
    ) -> None:
        """One request, by its kind (``netqual.agent.requests``)."""
        request = REQUESTS.get(kind)
        if request is None:
            raise BadRequestError(ch.peer, "kind", f"unknown request {kind[:40]!r}")
        if not request.measures:
            request.serve(self, ch, kind, body, counting)
            return
        with self._measurement(counting):
            request.serve(self, ch, kind, body, counting)

    def transport(self, name: str, run: TransportOptions | None = None) -> Transport:
        """The transport for one request: this agent's name and options, and the run's
        (decoded from the probe request) over them."""
        return get_transport(name, node_name=self.name, options=self.transport_options, run=run)

    @contextlib.contextmanager
    def _measurement(self, counting: counters.Counting) -> Iterator[None]:
        with self._conns_lock:
            self._measuring += 1
        try:
            with self.activity.measuring(counting.mine):
                yield
        finally:
            with self._conns_lock:
                self._measuring -= 1

    def info(self) -> dict[str, Any]:
        with self._conns_lock:
            measuring = self._measuring
        return {
            "name": self.name,
            "version": __version__,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "transports": list(TRANSPORT_NAMES),
            "limits": asdict(self.limits),
            "time_ns": time.time_ns(),  # wall clock, for the pre-flight clock check
            # probes and transport requests running now: ``run --resume`` waits for a
            # killed coordinator's to end before measuring
            "measuring": measuring,
        }


def _wake_udp(sock: socket.socket) -> None:
    """An empty datagram to the hop responder ends its select() now, not at its timeout."""
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", "::"):
        host = "::1" if sock.family == socket.AF_INET6 else "127.0.0.1"
    with contextlib.suppress(OSError):
        sock.sendto(b"", (host, port))
