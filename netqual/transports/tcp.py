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
from typing import Any

import numpy as np

from netqual.errors import ErrorCode, PeerUnreachableError, ProbeError
from netqual.models import ProbePlan
from netqual.protocol import Channel
from netqual.transports.interface import AgentLimits, RawBulk, RawProbe, Transport

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
        posted = [0] * reads
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
        self, channel: Channel, kind: str, body: Mapping[str, Any], limits: AgentLimits
    ) -> None:
        if kind == "tcp.pingpong":
            self._serve_pingpong(channel, body, limits)
        elif kind == "tcp.bulk":
            self._serve_bulk(channel, body, limits)
        else:
            channel.send_error(ErrorCode.BAD_REQUEST, f"unknown tcp request {kind!r}")

    @staticmethod
    def _int(body: Mapping[str, Any], key: str, low: int, high: int, ch: Channel) -> int | None:
        value = body.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            ch.send_error(ErrorCode.BAD_REQUEST, f"{key} must be an integer")
            return None
        if not low <= value <= high:
            problem = f"{key}={value} outside the agent's limit [{low}, {high}]"
            ch.send_error(ErrorCode.LIMIT, problem)
            return None
        return value

    @staticmethod
    def _timeout(body: Mapping[str, Any], limits: AgentLimits) -> float:
        value = body.get("timeout_s", limits.max_duration_s)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            return limits.max_duration_s
        return min(float(value), limits.max_duration_s)

    def _serve_pingpong(self, ch: Channel, body: Mapping[str, Any], limits: AgentLimits) -> None:
        size = self._int(body, "size_bytes", 1, limits.max_message_bytes, ch)
        count = self._int(body, "count", 1, limits.max_iterations, ch) if size else None
        if size is None or count is None:
            return
        timeout = self._timeout(body, limits)
        ch.send("ok")
        sock = ch.sock
        _kernel_timeouts(sock, timeout)
        view = memoryview(bytearray(size))
        recv_into = sock.recv_into
        send = sock.send
        waitall = socket.MSG_WAITALL
        end = time.monotonic() + timeout
        try:
            for i in range(count):
                if recv_into(view, size, waitall) != size:
                    _recv_full(sock, view, ch.peer)
                if send(view) != size:
                    sock.sendall(view)  # pragma: no cover
                if i % _DEADLINE_CHECK_EVERY == 0 and time.monotonic() > end:
                    raise ProbeError("ping-pong exceeded its duration")
        except BlockingIOError as err:
            raise ProbeError(f"ping-pong: {ch.peer} went silent") from err
        finally:
            ch.set_timeout(limits.idle_timeout_s)

    def _serve_bulk(self, ch: Channel, body: Mapping[str, Any], limits: AgentLimits) -> None:
        chunk = self._int(body, "chunk_bytes", 1, limits.max_chunk_bytes, ch)
        if chunk is None:
            return
        reads = self._int(body, "reads", 1, max(1, limits.max_bulk_bytes // chunk), ch)
        depth = self._int(body, "depth", 1, limits.max_depth, ch) if reads else None
        if reads is None or depth is None:
            return
        timeout = self._timeout(body, limits)
        ch.send("ok")
        sock = ch.sock
        _kernel_timeouts(sock, timeout)
        payload = memoryview(bytearray(chunk))
        req = memoryview(bytearray(_REQ.size))
        end = time.monotonic() + timeout
        try:
            for _ in range(reads):
                _recv_full(sock, req, ch.peer)
                sock.sendall(payload)
                if time.monotonic() > end:
                    raise ProbeError("bulk read exceeded its duration")
        except BlockingIOError as err:
            raise ProbeError(f"bulk read: {ch.peer} went silent") from err
        finally:
            ch.set_timeout(limits.idle_timeout_s)
