"""TCP probes. The control channel's socket doubles as the data path (TCP_NODELAY is on).

Ping-pong: the initiator sends ``size_bytes``, the responder answers with as many; one RTT
per iteration, timed at the initiator around send -> full reply received. Bulk read: the
initiator keeps ``depth`` 8-byte read requests outstanding on the stream; the responder
answers each with one ``chunk_bytes`` chunk. Pings and read requests carry random
challenges, replies and chunks the responder's session-key tags, checked after each loop
(``netqual.transports.integrity``). A read completes when its chunk's last byte
has arrived. Both loops wait with MSG_WAITALL under a kernel receive timeout
(SO_RCVTIMEO), so the hot path is one syscall per direction and never hangs.
"""

from __future__ import annotations

import secrets
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel
from netqual.base.errors import (
    BadRequestError,
    LimitError,
    PeerUnreachableError,
    ProbeError,
)
from netqual.model.plan import ProbePlan
from netqual.transports import integrity
from netqual.transports.integrity import Rounds
from netqual.transports.interface import (
    AgentLimits,
    BufferBudget,
    RawBulk,
    RawProbe,
    Transport,
    accepted,
)

_REQ_BYTES = 8  # one bulk read request: a random challenge (docs/security.md)
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
        nonce = integrity.new_nonce()
        challenges = secrets.token_bytes(count * integrity.tag_width(size))
        out, into = Rounds(count, size, challenges), Rounds(count, size)
        accepted(
            ch,
            "tcp.pingpong",
            {"size_bytes": size, "count": count, "timeout_s": timeout, "nonce": nonce.hex()},
            deadline,
        )
        sock = ch.sock
        _kernel_timeouts(sock, timeout)
        samples: list[int] = []
        append = samples.append
        pc = time.perf_counter_ns
        send = sock.send
        recv_into = sock.recv_into
        waitall = socket.MSG_WAITALL
        sview, rview, w = out.view, into.view, out.width
        top = (count - 1) * w
        try:
            for i in range(count):
                if i % _DEADLINE_CHECK_EVERY == 0 and time.monotonic() > deadline:
                    raise ProbeError(f"ping-pong timed out after {i} of {count} iterations")
                # Round i's windows (challenge i first, then earlier rounds' bytes), sliced
                # outside the timed section.
                o = i * w
                dst = rview[o : o + size]
                o = top - o
                msg = sview[o : o + size]
                t0 = pc()
                if (sent := send(msg)) != size:
                    sock.sendall(msg[sent:])  # pragma: no cover - blocking send of <= 1 MiB
                if (got := recv_into(dst, size, waitall)) != size:
                    _recv_rest(sock, dst, got, ch.peer)
                append(pc() - t0)
        except BlockingIOError as err:
            raise ProbeError(f"ping-pong: no echo from {ch.peer} within {timeout:.1f} s") from err
        except OSError as err:
            raise PeerUnreachableError(ch.peer, f"ping-pong failed: {err}") from err
        key = _key(ch, responder=False)
        bad = integrity.check_replies(
            key, b"tcp.pingpong", nonce, challenges, into.received(), count
        )
        end = "tcp.pingpong.end"
        integrity.check_end(ch, end, deadline, challenges, bad, count, "ping-pong replies")
        return np.asarray(samples[plan.warmup :], dtype=np.int64)

    def _bulk(self, ch: Channel, chunk: int, reads: int, depth: int, deadline: float) -> RawBulk:
        cell = BulkCell.open(ch, chunk, reads, depth, deadline, f"bulk {chunk}x{depth}")
        sock, view, w, tail, cview = cell.sock, cell.view, cell.w, cell.tail, cell.cview
        heads, tails, timeout = cell.heads, cell.tails, cell.timeout_s
        posted = np.empty(reads, dtype=np.int64)
        done = np.empty(reads, dtype=np.int64)
        pc = time.perf_counter_ns
        try:
            start = pc()
            nxt = 0
            for _ in range(min(depth, reads)):
                posted[nxt] = pc()
                sock.sendall(cview[nxt * _REQ_BYTES : (nxt + 1) * _REQ_BYTES])
                nxt += 1
            for i in range(reads):
                _recv_full(sock, view, ch.peer)
                now = pc()
                done[i] = now - posted[i]
                if nxt < reads:
                    posted[nxt] = now
                    sock.sendall(cview[nxt * _REQ_BYTES : (nxt + 1) * _REQ_BYTES])
                    nxt += 1
                # The chunk's tags, kept for the check after the cell (the next request is
                # already out, so this copy delays no read).
                heads[i * w : (i + 1) * w] = view[:w]
                tails[i * w : (i + 1) * w] = view[tail:]
                if time.monotonic() > deadline:
                    raise ProbeError(f"bulk read timed out after {i + 1} of {reads} reads")
            elapsed = pc() - start
        except BlockingIOError as err:
            raise ProbeError(f"bulk read: {ch.peer} sent nothing for {timeout:.1f} s") from err
        except OSError as err:
            raise PeerUnreachableError(ch.peer, f"bulk read failed: {err}") from err
        cell.check(ch, deadline, "bulk chunks")
        return RawBulk(
            chunk_bytes=chunk, depth=depth, completion_ns=done, elapsed_ns=elapsed, started_ns=start
        )

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
            # The replies (a tag per round, and the tag stream they are laid out from) and
            # every round's challenge.
            with budget.hold(
                2 * ping.size_bytes + 3 * ping.count * integrity.tag_width(ping.size_bytes)
            ):
                self._serve_pingpong(channel, ping, limits)
        elif kind == "tcp.bulk":
            bulk = BulkRequest.decode(body, limits, channel.peer)
            with budget.hold(
                bulk.chunk_bytes + bulk.reads * (_REQ_BYTES + 2 * integrity.TAG_BYTES)
            ):
                self._serve_bulk(channel, bulk, limits)
        else:
            raise BadRequestError(channel.peer, "kind", f"unknown tcp request {kind[:40]!r}")

    def _serve_pingpong(self, ch: Channel, req: PingpongRequest, limits: AgentLimits) -> None:
        size, count = req.size_bytes, req.count
        w = integrity.tag_width(size)
        key = _key(ch, responder=True)
        # Every reply starts with this agent's tag for its round: the replies are laid out
        # like the initiator's pings (tags reversed), and each ping lands where its
        # challenge stays, so a round copies nothing. The next round's windows are cut
        # right after a reply is sent, while it travels.
        tags = integrity.responder_tags(key, b"tcp.pingpong", req.nonce, count, w)
        out = Rounds(count, size, tags)
        into = Rounds(count, size)
        ch.send("ok")
        sock = ch.sock
        clock = _SendDeadline(sock, req.timeout_s)
        recv_into = sock.recv_into
        send = sock.send
        waitall = socket.MSG_WAITALL
        sview, rview = out.view, into.view
        top = (count - 1) * w
        dst, msg = rview[:size], sview[top : top + size]
        try:
            for i in range(count):
                if (got := recv_into(dst, size, waitall)) != size:
                    _recv_rest(sock, dst, got, ch.peer)
                if (sent := send(msg)) != size:
                    sock.sendall(msg[sent:])  # pragma: no cover
                o = (i + 1) * w
                dst, msg = rview[o : o + size], sview[top - o : top - o + size]
                if i % _DEADLINE_CHECK_EVERY == 0:
                    clock.check("ping-pong exceeded its duration")
        except BlockingIOError as err:
            raise ProbeError(f"ping-pong: {ch.peer} went silent") from err
        finally:
            ch.set_timeout(limits.idle_timeout_s)
        integrity.answer_end(ch, "tcp.pingpong.end", into.received(), "ping-pong")

    def _serve_bulk(self, ch: Channel, req: BulkRequest, limits: AgentLimits) -> None:
        chunk, reads = req.chunk_bytes, req.reads
        w = _bulk_tag_width(chunk)
        tail = chunk - w
        tags = memoryview(
            integrity.keystream(_key(ch, responder=True), b"tcp.bulk", req.nonce, 2 * reads * w)
        )
        ch.send("ok")
        sock = ch.sock
        clock = _SendDeadline(sock, req.timeout_s)
        payload = bytearray(chunk)
        pview = memoryview(payload)
        requests = memoryview(bytearray(reads * _REQ_BYTES))
        try:
            for i in range(reads):
                _recv_full(sock, requests[i * _REQ_BYTES : (i + 1) * _REQ_BYTES], ch.peer)
                o = 2 * i * w
                payload[:w] = tags[o : o + w]  # chunk i's tag, first and last bytes
                payload[tail:] = tags[o + w : o + 2 * w]
                # Re-armed before each chunk: a peer that stops reading ends the send at
                # the request's timeout, not one kernel timeout per chunk later.
                clock.send_all(pview, "bulk read exceeded its duration")
        except BlockingIOError as err:
            raise ProbeError(f"bulk read: {ch.peer} stopped reading or went silent") from err
        finally:
            ch.set_timeout(limits.idle_timeout_s)
        integrity.answer_end(ch, "tcp.bulk.end", bytes(requests), "bulk read")


@dataclass
class BulkCell:
    """The initiator's side of one ``tcp.bulk`` cell, for every loop that reads chunks (the
    bulk probe here, the fetch profiles in tcp_fetch.py): the accepted request, the receive
    buffer, the challenges it sends, and the tag bytes kept from each chunk for the check
    after the cell. The timed loops stay with their callers."""

    sock: socket.socket
    view: memoryview
    w: int  # tag bytes at each end of a chunk
    tail: int  # where the tail tag starts
    cview: memoryview  # the challenges, _REQ_BYTES per read
    challenges: bytes
    heads: bytearray
    tails: bytearray
    nonce: bytes
    timeout_s: float
    reads: int

    @classmethod
    def open(
        cls, ch: Channel, chunk: int, reads: int, depth: int, deadline: float, what: str
    ) -> BulkCell:
        timeout = _remaining(deadline, what)
        ch.set_deadline(deadline)
        nonce = integrity.new_nonce()
        body = {"chunk_bytes": chunk, "reads": reads, "depth": depth, "timeout_s": timeout}
        accepted(ch, "tcp.bulk", {**body, "nonce": nonce.hex()}, deadline)
        _kernel_timeouts(ch.sock, timeout)
        w = _bulk_tag_width(chunk)
        challenges = secrets.token_bytes(reads * _REQ_BYTES)
        return cls(
            ch.sock, memoryview(bytearray(chunk)), w, chunk - w, memoryview(challenges),
            challenges, bytearray(reads * w), bytearray(reads * w), nonce, timeout, reads,
        )  # fmt: skip

    def check(self, ch: Channel, deadline: float, what: str) -> None:
        """Every kept tag against the session key, then the responder's end of the cell."""
        w, reads = self.w, self.reads
        bad = 0
        if w:
            key = _key(ch, responder=False)
            tags = integrity.keystream(key, b"tcp.bulk", self.nonce, 2 * reads * w)
            got = b"".join(
                self.heads[i * w : (i + 1) * w] + self.tails[i * w : (i + 1) * w]
                for i in range(reads)
            )
            bad = integrity.mismatches(got, tags, 2 * w)
        integrity.check_end(ch, "tcp.bulk.end", deadline, self.challenges, bad, reads, what)


def _key(ch: Channel, *, responder: bool) -> bytes:
    """The session's measurement key; an --insecure session has none (the check then only
    catches accidents, see docs/security.md)."""
    return ch.measurement_key(responder=responder) or b""


def _bulk_tag_width(chunk: int) -> int:
    """Tag bytes at each end of a chunk (0 for a 1-byte chunk: nothing to tag)."""
    return integrity.tag_width(chunk // 2)


def _recv_rest(sock: socket.socket, view: memoryview, got: int, peer: str) -> None:
    """The rest of ``view`` after a receive that returned ``got`` bytes (interrupted or
    timed out part-way; the kernel returned what it had)."""
    if got == 0 and len(view) > 0:
        raise PeerUnreachableError(peer, "connection closed by peer")
    _recv_full(sock, view[got:], peer)


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
    """``tcp.pingpong``: answer ``count`` messages of ``size_bytes`` within ``timeout_s``,
    each with this agent's tag for the round (keyed with ``nonce``)."""

    size_bytes: int
    count: int
    timeout_s: float
    nonce: bytes

    @classmethod
    def decode(cls, body: Mapping[str, Any], limits: AgentLimits, peer: str) -> PingpongRequest:
        f = Fields(body, "tcp.pingpong", peer)
        size, count = f.integer("size_bytes", 1, 1 << 40), f.integer("count", 1, 1 << 40)
        if (problem := limits.check_pingpong(count, size)) is not None:
            raise LimitError(peer, problem)
        return cls(size, count, _timeout(f, limits), f.hex("nonce", integrity.NONCE_BYTES))


@dataclass(frozen=True)
class BulkRequest:
    """``tcp.bulk``: answer ``reads`` 8-byte requests with ``chunk_bytes`` each, every
    chunk tagged at both ends with this agent's tag for its index (keyed with ``nonce``)."""

    chunk_bytes: int
    reads: int
    depth: int
    timeout_s: float
    nonce: bytes

    @classmethod
    def decode(cls, body: Mapping[str, Any], limits: AgentLimits, peer: str) -> BulkRequest:
        f = Fields(body, "tcp.bulk", peer)
        chunk = f.integer("chunk_bytes", 1, 1 << 40)
        reads, depth = f.integer("reads", 1, 1 << 40), f.integer("depth", 1, 1 << 40)
        if (problem := limits.check_bulk(chunk, reads, depth)) is not None:
            raise LimitError(peer, problem)
        return cls(chunk, reads, depth, _timeout(f, limits), f.hex("nonce", integrity.NONCE_BYTES))
