"""The long-running agent: one per node, serving many authenticated control sessions.

Each accepted connection gets a thread (probes are blocking socket loops; a thread per
session keeps the timed path free of event-loop overhead). Anything a peer can make the
agent do is capped by ``AgentLimits``; a peer that does not authenticate within
``auth_timeout_s`` is dropped; connections beyond ``max_sessions`` get a ``busy`` error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import asdict
from types import FrameType
from typing import Any

from netqual import __version__
from netqual import hops as hops_mod
from netqual.errors import AuthError, NetqualError, ProtocolError
from netqual.probes import serve_probe
from netqual.protocol import Channel, server_handshake
from netqual.transports import TRANSPORT_NAMES, AgentLimits, get_transport

log = logging.getLogger("netqual.agent")


class Agent:
    def __init__(
        self,
        host: str,
        port: int,
        token: bytes | None,
        name: str | None = None,
        limits: AgentLimits | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.name = name or socket.gethostname()
        self.limits = limits or AgentLimits()
        self._stop = threading.Event()
        self._sessions = threading.BoundedSemaphore(self.limits.max_sessions)
        self._listener: socket.socket | None = None
        self._udp: socket.socket | None = None
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------
    def bind(self) -> tuple[str, int]:
        """Open the TCP control socket and the UDP hop-count socket; returns the address."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        lst = socket.socket(family, socket.SOCK_STREAM)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind((self.host, self.port))
        lst.listen(128)
        self.port = lst.getsockname()[1]
        self._listener = lst
        self._udp = hops_mod.open_responder(self.host, self.port)
        return self.host, self.port

    def stop(self) -> None:
        self._stop.set()

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
            sel.register(self._listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not sel.select(timeout=0.5):
                    continue
                try:
                    conn, addr = self._listener.accept()
                except OSError:
                    continue
                self._admit(conn, addr)
        self._listener.close()
        for t in self._threads:
            t.join(timeout=2.0)
        udp.join(timeout=1.0)
        self._udp.close()

    def _admit(self, conn: socket.socket, addr: Any) -> None:
        peer = f"{addr[0]}:{addr[1]}"
        if not self._sessions.acquire(blocking=False):
            # Over the cap: say so briefly without letting a slow peer block accept().
            conn.settimeout(0.2)
            with contextlib.suppress(OSError, NetqualError):
                Channel(conn, peer).send_error(
                    "busy", f"agent busy: {self.limits.max_sessions} sessions"
                )
            conn.close()
            return
        t = threading.Thread(target=self._session, args=(conn, peer), daemon=True)
        self._threads = [x for x in self._threads if x.is_alive()]
        self._threads.append(t)
        t.start()

    # -- one session -------------------------------------------------------------------
    def _session(self, conn: socket.socket, peer: str) -> None:
        ch = Channel(conn, peer, max_frame_bytes=self.limits.max_frame_bytes)
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ch.set_timeout(self.limits.auth_timeout_s)
            server_handshake(ch, self.token, self.name, __version__)
            ch.set_timeout(self.limits.idle_timeout_s)
            while not self._stop.is_set():
                msg = ch.recv()
                if msg.kind == "bye":
                    break
                self._dispatch(ch, msg.kind, msg.body)
        except AuthError as err:
            log.warning("refused %s: %s", peer, err.problem)
        except (ProtocolError, NetqualError) as err:
            log.info("session %s ended: %s", peer, err)
            if isinstance(err, ProtocolError):
                with contextlib.suppress(OSError, NetqualError):
                    ch.send_error("protocol", err.problem)
        except (TimeoutError, OSError) as err:
            log.info("session %s ended: %s", peer, err or "timeout")
        finally:
            ch.close()
            self._sessions.release()

    def _dispatch(self, ch: Channel, kind: str, body: dict[str, Any]) -> None:
        if kind == "info":
            ch.send("info", self.info())
        elif kind == "doctor":
            ch.send("doctor", _doctor_report())
        elif kind == "probe":
            serve_probe(ch, body, self.name, self.token, self.limits)
        elif "." in kind and kind.split(".", 1)[0] in TRANSPORT_NAMES:
            transport = get_transport(kind.split(".", 1)[0])
            transport.respond(ch, kind, body, self.limits)
        else:
            ch.send_error("bad-request", f"unknown request {kind!r}")

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": __version__,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "transports": list(TRANSPORT_NAMES),
            "limits": asdict(self.limits),
        }


def _doctor_report() -> dict[str, Any]:
    try:
        from netqual.doctor import local_report
    except ImportError as err:  # doctor is optional in minimal builds
        return {"problems": [{"severity": "error", "message": f"doctor unavailable: {err}"}]}
    report: dict[str, Any] = local_report()
    return report
