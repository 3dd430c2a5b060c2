"""TCP probes. The control channel's socket doubles as the data path (TCP_NODELAY is on).

Ping-pong: the initiator sends ``size_bytes``, the responder echoes them; one RTT per
iteration, timed at the initiator around send -> full echo received. Bulk read: the
initiator keeps ``depth`` 8-byte read requests outstanding on the stream; the responder
answers each with one ``chunk_bytes`` chunk. A read completes when its chunk's last byte
has arrived. Both loops wait with MSG_WAITALL under a kernel receive timeout
(SO_RCVTIMEO), so the hot path is one syscall per direction and never hangs.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from netqual.errors import BadRequestError, LimitError, PeerUnreachableError, ProbeError
from netqual.messages import Fields
from netqual.models import ProbePlan
from netqual.protocol import Channel
from netqual.transports.interface import AgentLimits, BufferBudget, RawBulk, RawProbe, Transport

_REQ = struct.Struct("!Q")
_TIMEVAL = struct.Struct("@ll")
_DEADLINE_CHECK_EVERY = 256


def _kernel_timeouts(sock: socket.socket, seconds: float) -> None:
    """Blocking socket whose every send/recv gives up after ``seconds`` (EAGAIN)."""
    sock.settimeout(None)
    secs = max(0.001, seconds)
    tv = _TIMEVAL.pack(int(secs), int((secs % 1) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def _recv_full(sock: socket.socket, view: memoryview, peer: str) -> None:
    n = len(view)
    got = sock.recv_into(view, n, socket.MSG_WAITALL)
    while got < n:  # interrupted or timed out part-way; the kernel returned what it had
        if got == 0 and n > 0:
            raise PeerUnreachableError(peer, "connection closed by peer")
        k = sock.recv_into(view[got:], n - got, socket.MSG_WAITALL)
        if k == 0:
            raise PeerUnreachableError(peer, "connection closed by peer")
        got += k


def _remaining(deadline: float, what: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ProbeError(f"timed out before {what}")
    return left


class TcpTransport(Transport):
    name = "tcp"

    # -- initiator ---------------------------------------------------------------------
    def initiate(
        self, channel: Channel, plan: ProbePlan, deadline: float, peer_address: str
    ) -> RawProbe:
        rtt = self._pingpong(channel, plan, deadline)
        bulk: list[RawBulk] = []
        if plan.bulk:
            for chunk in plan.chunks_bytes:
                for depth in plan.depths:
                    bulk.append(self._bulk(channel, chunk, plan.reads_for(chunk), depth, deadline))
        return RawProbe(
            rtt_ns=rtt,
            warmup_discarded=plan.warmup,
            bulk=tuple(bulk),
            details={"tcp_nodelay": True, "size_bytes": plan.size_bytes},
        )

    def _pingpong(self, ch: Channel, plan: ProbePlan, deadline: float) -> np.ndarray:
        count = plan.warmup + plan.iterations
        size = plan.size_bytes
        timeout = _remaining(deadline, "ping-pong")
        ch.set_deadline(deadline)
        ch.request("tcp.pingpong", {"size_bytes": size, "count": count, "timeout_s": timeout})
        sock = ch.sock
        _kernel_timeouts(sock, timeout)
        msg = bytes(size)
        view = memoryview(bytearray(size))
        samples: list[int] = []
        append = samples.append
        pc = time.perf_counter_ns
        send = sock.send
        recv_into = sock.recv_into
        waitall = socket.MSG_WAITALL
        try:
            for i in range(count):
                if i % _DEADLINE_CHECK_EVERY == 0 and time.monotonic() > deadline:
                    raise ProbeError(f"ping-pong timed out after {i} of {count} iterations")
                t0 = pc()
                if send(msg) != size:
                    sock.sendall(msg[size:])  # pragma: no cover - blocking send of <= 1 MiB
                if recv_into(view, size, waitall) != size:
                    _recv_full(sock, view, ch.peer)
                append(pc() - t0)
        except BlockingIOError as err:
            raise ProbeError(f"ping-pong: no echo from {ch.peer} within {timeout:.1f} s") from err
        except OSError as err:
            raise PeerUnreachableError(ch.peer, f"ping-pong failed: {err}") from err
        return np.asarray(samples[plan.warmup :], dtype=np.int64)

    def _bulk(self, ch: Channel, chunk: int, reads: int, depth: int, deadline: float) -> RawBulk:
        timeout = _remaining(deadline, f"bulk {chunk}x{depth}")
        ch.set_deadline(deadline)
        ch.request(
            "tcp.bulk", {"chunk_bytes": chunk, "reads": reads, "depth": depth, "timeout_s": timeout}
        )
        sock = ch.sock
        _kernel_timeouts(sock, timeout)
        view = memoryview(bytearray(chunk))
        posted = np.empty(reads, dtype=np.int64)
        done = np.empty(reads, dtype=np.int64)
        pc = time.perf_counter_ns
        try:
            start = pc()
            nxt = 0
            for _ in range(min(depth, reads)):
                posted[nxt] = pc()
                sock.sendall(_REQ.pack(nxt))
                nxt += 1
            for i in range(reads):
                _recv_full(sock, view, ch.peer)
                now = pc()
                done[i] = now - posted[i]
                if nxt < reads:
                    posted[nxt] = now
                    sock.sendall(_REQ.pack(nxt))
                    nxt += 1
                if time.monotonic() > deadline:
                    raise ProbeError(f"bulk read timed out after {i + 1} of {reads} reads")
            elapsed = pc() - start
        except BlockingIOError as err:
            raise ProbeError(f"bulk read: {ch.peer} sent nothing for {timeout:.1f} s") from err
        except OSError as err:
            raise PeerUnreachableError(ch.peer, f"bulk read failed: {err}") from err
        return RawBulk(chunk_bytes=chunk, depth=depth, completion_ns=done, elapsed_ns=elapsed)

    # -- responder ---------------------------------------------------------------------
    def respond(
        self,
        channel: Channel,
        kind: str,
        body: Mapping[str, Any],
        limits: AgentLimits,
        buffers: BufferBudget | None = None,
    ) -> None:
        budget = buffers or BufferBudget(limits.max_buffer_bytes)
        if kind == "tcp.pingpong":
            ping = PingpongRequest.decode(body, limits, channel.peer)
            with budget.hold(ping.size_bytes):
                self._serve_pingpong(channel, ping, limits)
        elif kind == "tcp.bulk":
            bulk = BulkRequest.decode(body, limits, channel.peer)
            with budget.hold(bulk.chunk_bytes):
                self._serve_bulk(channel, bulk, limits)
        else:
            raise BadRequestError(channel.peer, "kind", f"unknown tcp request {kind[:40]!r}")

    def _serve_pingpong(self, ch: Channel, req: PingpongRequest, limits: AgentLimits) -> None:
        size, count = req.size_bytes, req.count
        ch.send("ok")
        sock = ch.sock
        clock = _SendDeadline(sock, req.timeout_s)
        view = memoryview(bytearray(size))
        recv_into = sock.recv_into
        send = sock.send
        waitall = socket.MSG_WAITALL
        try:
            for i in range(count):
                if recv_into(view, size, waitall) != size:
                    _recv_full(sock, view, ch.peer)
                if send(view) != size:
                    sock.sendall(view)  # pragma: no cover
                if i % _DEADLINE_CHECK_EVERY == 0:
                    clock.check("ping-pong exceeded its duration")
        except BlockingIOError as err:
            raise ProbeError(f"ping-pong: {ch.peer} went silent") from err
        finally:
            ch.set_timeout(limits.idle_timeout_s)

    def _serve_bulk(self, ch: Channel, req: BulkRequest, limits: AgentLimits) -> None:
        ch.send("ok")
        sock = ch.sock
        clock = _SendDeadline(sock, req.timeout_s)
        payload = memoryview(bytearray(req.chunk_bytes))
        view = memoryview(bytearray(_REQ.size))
        try:
            for _ in range(req.reads):
                _recv_full(sock, view, ch.peer)
                # Re-armed before each chunk: a peer that stops reading ends the send at
                # the request's timeout, not one kernel timeout per chunk later.
                clock.send_all(payload, "bulk read exceeded its duration")
        except BlockingIOError as err:
            raise ProbeError(f"bulk read: {ch.peer} stopped reading or went silent") from err
        finally:
            ch.set_timeout(limits.idle_timeout_s)


class _SendDeadline:
    """Kernel send/receive timeouts that never reach past ``timeout_s`` from now.

    Re-arms SO_SNDTIMEO/SO_RCVTIMEO to the time left whenever that is 5% of the timeout
    below what is armed, so a blocked call overshoots the deadline by at most that much.
    (Only checking between chunks let a bulk send to a peer that never reads run 3x its
    timeout: every partial send waited a full kernel timeout.)
    """

    def __init__(self, sock: socket.socket, timeout_s: float) -> None:
        self.sock = sock
        self.end = time.monotonic() + timeout_s
        self.step_s = max(0.01, 0.05 * timeout_s)
        self.armed_s = timeout_s
        _kernel_timeouts(sock, timeout_s)

    def check(self, what: str) -> None:
        left = self.end - time.monotonic()
        if left <= 0:
            raise ProbeError(what)
        if left < self.armed_s - self.step_s:
            _kernel_timeouts(self.sock, left)
            self.armed_s = left

    def send_all(self, data: memoryview, what: str) -> None:
        """sendall, with the deadline checked between the kernel's partial sends: a peer
        that reads a little now and then cannot stretch one chunk past the deadline."""
        sent, n = 0, len(data)
        while sent < n:
            self.check(what)
            sent += self.sock.send(data[sent:])


def _timeout(f: Fields, limits: AgentLimits) -> float:
    """The request's ``timeout_s`` (default and ceiling: the agent's max_duration_s)."""
    return min(f.number("timeout_s", 1e-3, 1e9, limits.max_duration_s), limits.max_duration_s)


@dataclass(frozen=True)
class PingpongRequest:
    """``tcp.pingpong``: echo ``count`` messages of ``size_bytes`` within ``timeout_s``."""

    size_bytes: int
    count: int
    timeout_s: float

    @classmethod
    def decode(cls, body: Mapping[str, Any], limits: AgentLimits, peer: str) -> PingpongRequest:
        f = Fields(body, "tcp.pingpong", peer)
        req = cls(
            size_bytes=f.integer("size_bytes", 1, 1 << 40),
            count=f.integer("count", 1, 1 << 40),
            timeout_s=_timeout(f, limits),
        )
        if (problem := limits.check_pingpong(req.count, req.size_bytes)) is not None:
            raise LimitError(peer, problem)
        return req


@dataclass(frozen=True)
class BulkRequest:
    """``tcp.bulk``: answer ``reads`` 8-byte requests with ``chunk_bytes`` each."""

    chunk_bytes: int
    reads: int
    depth: int
    timeout_s: float

    @classmethod
    def decode(cls, body: Mapping[str, Any], limits: AgentLimits, peer: str) -> BulkRequest:
        f = Fields(body, "tcp.bulk", peer)
        req = cls(
            chunk_bytes=f.integer("chunk_bytes", 1, 1 << 40),
            reads=f.integer("reads", 1, 1 << 40),
            depth=f.integer("depth", 1, 1 << 40),
            timeout_s=_timeout(f, limits),
        )
        if (problem := limits.check_bulk(req.chunk_bytes, req.reads, req.depth)) is not None:
            raise LimitError(peer, problem)
        return req
