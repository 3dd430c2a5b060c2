"""``campaign serve``'s HTTP server: /metrics for Prometheus, safe to expose.

One thread runs an asyncio loop that holds every connection; an idle or slow one costs a
socket and at most ``MAX_REQUEST_BYTES`` of buffer, never a thread. Per connection, the
request must arrive whole within ``REQUEST_TIMEOUT_S`` and the answer be taken within
``WRITE_TIMEOUT_S``; at most ``max_connections`` are held (below the process's file limit),
and a new connection at the cap closes the oldest one still sending its request, so a
flood of half-sent requests (slow-loris) cannot keep a scrape out. The metrics are rendered
by one worker at a time and kept for ``SNAPSHOT_S``: a thousand scrapes at once read the
store once, and the store's lock is held for one short read at most every few seconds,
never long enough to make ``campaign add`` or ``gate`` wait past their bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("netqual.campaign")

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
MAX_REQUEST_BYTES = 8 * 1024  # request line and headers; a scrape sends a few hundred
REQUEST_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 30.0
SNAPSHOT_S = 5.0
MAX_CONNECTIONS = 512
_FD_RESERVE = 64  # descriptors kept for the store, logs and the listener


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """``wanted``, or fewer when the process may not open that many descriptors."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(8, min(wanted, soft - _FD_RESERVE))


class Snapshot:
    """The rendered metrics, re-rendered at most every ``max_age_s``, one render at a time.
    A render that fails keeps serving the last good one (and logs why); with none, the
    scrape gets 503."""

    def __init__(self, render: Callable[[], bytes], max_age_s: float = SNAPSHOT_S) -> None:
        self.render, self.max_age_s = render, max_age_s
        self._lock = threading.Lock()
        self._body: bytes | None = None
        self._at = -float("inf")

    def get(self) -> bytes | None:
        with self._lock:
            if time.monotonic() - self._at >= self.max_age_s or self._body is None:
                try:
                    self._body = self.render()
                    self._at = time.monotonic()
                except Exception as err:  # a scrape reports it; the server goes on
                    log.warning("metrics: %s", err)
            return self._body


class MetricsServer:
    """Serves ``snapshot`` at GET /metrics on (host, port) until ``stop``."""

    def __init__(
        self,
        snapshot: Snapshot,
        host: str,
        port: int,
        *,
        max_connections: int | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.snapshot = snapshot
        self.host, self.port = host, port
        self.max_connections = max_connections or connection_cap()
        self.request_timeout_s = request_timeout_s
        # connections held (counted against the cap), and those still sending a request
        self._open: set[int] = set()
        self._pending: OrderedDict[int, asyncio.StreamWriter] = OrderedDict()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics")
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._inflight: asyncio.Future[bytes | None] | None = None

    def start(self) -> tuple[str, int]:
        """Listen (OSError when it cannot) and serve in a thread; the bound address."""
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, self.host, self.port, backlog=128, limit=65536)
        )
        sock = self._server.sockets[0].getsockname()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        return str(sock[0]), int(sock[1])

    def stop(self) -> None:
        if self._server is None:
            return

        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for w in list(self._pending.values()):
                w.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._worker.shutdown(wait=False)

    # -- per connection ----------------------------------------------------------------

    def _make_room(self) -> None:
        """At the cap: close the oldest connections still sending their request."""
        while len(self._open) >= self.max_connections and self._pending:
            key, oldest = self._pending.popitem(last=False)
            self._open.discard(key)
            oldest.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._make_room()
        if len(self._open) >= self.max_connections:  # every slot answering: refuse this one
            writer.close()
            return
        key = id(writer)
        self._open.add(key)
        self._pending[key] = writer
        try:
            head = await asyncio.wait_for(self._read_head(reader), self.request_timeout_s)
            if self._pending.pop(key, None) is None:
                return  # closed to make room meanwhile
            status, body, ctype = await self._answer(head)
            await asyncio.wait_for(self._write(writer, status, body, ctype), WRITE_TIMEOUT_S)
        except (TimeoutError, asyncio.TimeoutError, ConnectionError, OSError, ValueError):
            pass
        finally:
            self._pending.pop(key, None)
            self._open.discard(key)
            writer.close()

    async def _read_head(self, reader: asyncio.StreamReader) -> bytes:
        head = b""
        while b"\r\n\r\n" not in head and b"\n\n" not in head:
            part = await reader.read(1024)
            if not part:
                raise ConnectionError("closed before a whole request")
            head += part
            if len(head) > MAX_REQUEST_BYTES:
                raise ValueError("request too large")
        return head

    async def _answer(self, head: bytes) -> tuple[str, bytes, str]:
        line = head.split(b"\n", 1)[0].decode("latin-1").strip().split()
        if len(line) != 3 or not line[2].startswith("HTTP/"):
            return "400 Bad Request", b"bad request\n", "text/plain"
        method, target = line[0], line[1].split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", b"GET /metrics\n", "text/plain"
        if target not in ("/metrics", "/"):
            return "404 Not Found", b"GET /metrics\n", "text/plain"
        body = await self._rendered()
        if body is None:
            return "503 Service Unavailable", b"the history store cannot be read\n", "text/plain"
        return "200 OK", b"" if method == "HEAD" else body, CONTENT_TYPE

    async def _rendered(self) -> bytes | None:
        """The snapshot; concurrent scrapes share one render."""
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(
                self._loop.run_in_executor(self._worker, self.snapshot.get)
            )
        return await asyncio.shield(self._inflight)

    async def _write(
        self, writer: asyncio.StreamWriter, status: str, body: bytes, ctype: str
    ) -> None:
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
