"""Ping-pong the way perftest's ``ib_write_lat`` does it, timed as a full round trip.

Each side spins on the last byte of its receive area until it holds the round's sequence
byte, then RDMA-WRITEs its own message (inline when the device allows) into the peer's
receive area. No receive queue, no completion on the passive side, no WC object per
message: the only Python work per round trip is one ``post_send`` and a byte poll. Only
every ``SIGNAL_EVERY``-th write asks for a completion, reaped outside the timed section,
so the send queue never fills. The initiator times ``post -> peer's write landed``: the
full RTT (``ib_write_lat`` prints half of it).

The last byte lands last for a message within one MTU (RDMA WRITE places data in order
within a packet; across packets every IB/RoCE NIC we know of places in order too).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import select
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.errors import ProbeError
from netqual.transports.rdma import verbs
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.errors import completion_error

SIGNAL_EVERY = 16
SPINS_PER_CHECK = 4096  # byte polls between deadline / CQ / abort checks
PINGPONG_WR_ID = 0xFFFF_0000


class _Writer:
    """The two reusable WRITE work requests (plain and signalled) and the polled bytes."""

    def __init__(self, ep: Endpoint, peer: ConnInfo, size: int) -> None:
        if size < 1 or peer.recv_offset + size > peer.bulk_offset:
            raise ProbeError(f"ping-pong size {size} does not fit the peer's receive area")
        pv = ep.pv
        self.ep, self.qp, self.cq = ep, ep.qp, ep.cq
        flags = verbs.SEND_INLINE if ep.inline_bytes >= size else 0
        self.inline = bool(flags)
        lkey = int(ep.mr.lkey)
        sg = verbs.sge(pv, ep.buf + ep.send_offset, size, lkey)
        self.plain = verbs.send_wr(pv, PINGPONG_WR_ID, verbs.WR_RDMA_WRITE, sg, flags)
        self.signalled = verbs.send_wr(
            pv, PINGPONG_WR_ID, verbs.WR_RDMA_WRITE, sg, flags | verbs.SEND_SIGNALED
        )
        for wr in (self.plain, self.signalled):
            wr.set_wr_rdma(peer.rkey, peer.addr + peer.recv_offset)
        # Zero-copy views of single bytes of the registered buffer (alive while the MR is).
        self.send_byte = ctypes.c_uint8.from_address(ep.buf + ep.send_offset + size - 1)
        self.recv_byte = ctypes.c_uint8.from_address(ep.buf + ep.recv_offset + size - 1)
        self.posted = 0
        self.unreaped = 0

    def post(self) -> None:
        self.posted += 1
        if self.posted % SIGNAL_EVERY:
            self.qp.post_send(self.plain)
        else:
            self.qp.post_send(self.signalled)
            self.unreaped += 1

    def reap(self) -> None:
        """Collect finished signalled writes; an error completion becomes ProbeError."""
        count, wcs = self.cq.poll(SIGNAL_EVERY)
        for wc in wcs[:count]:
            if wc.status != 0:
                raise completion_error("RDMA WRITE", int(wc.status), int(wc.vendor_err))
            self.unreaped -= 1

    def wait(self, seq: int, deadline: float, abort: socket.socket | None) -> None:
        """Spin until the receive byte equals ``seq``. Own deadline: a dead peer sends nothing."""
        byte = self.recv_byte
        while True:
            for _ in range(SPINS_PER_CHECK):
                if byte.value == seq:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from the peer")
            self.reap()  # a lost peer shows as IBV_WC_RETRY_EXC_ERR here
            if abort is not None and select.select([abort], [], [], 0)[0]:
                raise _Aborted()


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """A collection inside the timed loop would be a multi-ms outlier that is not the network."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Aborted(Exception):
    """The other end spoke on (or closed) the control channel during the ping-pong."""


# Reads what the responder said on the control channel once it turned readable: its reason
# for stopping early, or None when the channel was closed (nothing to read).
PeerNotice = Callable[[], str | None]


CONFIRM_S = 30.0  # how long a probe write to a vanished peer may take to fail (retries)


def _confirm_peer_gone(w: _Writer, deadline: float) -> str:
    """The responder closed its control channel mid-ping-pong (its agent died or gave up).
    A waiting initiator has no write in flight, so the verbs layer has nothing to report:
    post one signalled WRITE and let its completion tell what became of the peer's QP."""
    gone = "the responder closed the control channel"
    w.posted += 1
    w.qp.post_send(w.signalled)
    w.unreaped += 1
    end = min(deadline, time.monotonic() + CONFIRM_S)
    try:
        while w.unreaped and time.monotonic() < end:
            w.reap()
            time.sleep(0.001)
    except ProbeError as err:  # IBV_WC_RETRY_EXC_ERR once the retries to a dead QP run out
        return f"{gone}; then {err.problem}"
    if w.unreaped:
        return f"{gone}; a write to its QP got no completion within {CONFIRM_S:g} s"
    return f"{gone}, yet a write to its QP still completes"


def initiate(
    ep: Endpoint,
    peer: ConnInfo,
    *,
    iterations: int,
    warmup: int,
    size: int,
    deadline: float,
    channel: socket.socket | None = None,
    notice: PeerNotice | None = None,
) -> npt.NDArray[np.int64]:
    """Run warmup + iterations round trips; return the kept full-RTT samples (ns).
    ``channel``: the control socket. The responder says nothing on it during the ping-pong
    unless it stops early, so it turning readable means the responder stopped (``notice``
    reads why) or is gone (closed: a confirming write tells what became of its QP)."""
    w = _Writer(ep, peer, size)
    samples = np.empty(iterations, dtype=np.int64)
    clock = time.perf_counter_ns
    total = warmup + iterations
    done = 0
    with _no_gc():
        try:
            for i in range(total):
                seq = (i + 1) & 0xFF  # consecutive rounds always differ, so wrap-around is safe
                w.send_byte.value = seq
                t0 = clock()
                w.post()
                w.wait(seq, deadline, channel)
                t1 = clock()
                if i >= warmup:
                    samples[i - warmup] = t1 - t0
                if w.unreaped:
                    w.reap()
                done = i + 1
        except _Aborted:
            said = notice() if notice is not None else None
            why = said if said is not None else _confirm_peer_gone(w, deadline)
            raise ProbeError(
                f"rdma ping-pong: {why} (after {done} of {total} round trips)"
            ) from None
        except TimeoutError as err:
            raise ProbeError(
                f"rdma ping-pong timed out after {done} of {total} round trips: {err}"
            ) from err
        except ProbeError as err:
            raise ProbeError(f"{err.problem} (after {done} of {total} round trips)") from err
    return samples


def respond(
    ep: Endpoint,
    peer: ConnInfo,
    *,
    rounds: int,
    size: int,
    deadline: float,
    abort: socket.socket,
) -> int:
    """Answer ``rounds`` pings. Returns the rounds completed; stops early if aborted."""
    w = _Writer(ep, peer, size)
    done = 0
    with _no_gc():
        try:
            for i in range(rounds):
                seq = (i + 1) & 0xFF
                w.wait(seq, deadline, abort)
                w.send_byte.value = seq
                w.post()
                if w.unreaped:
                    w.reap()
                done = i + 1
        except _Aborted:
            return done
        except TimeoutError as err:
            raise ProbeError(
                f"rdma ping-pong responder timed out after {done} of {rounds} rounds: {err}"
            ) from err
    return done


def pingpong_details(ep: Endpoint, size: int) -> dict[str, Any]:
    return {
        "pingpong_method": "rdma-write, poll last byte (as ib_write_lat), full RTT",
        "pingpong_inline": ep.inline_bytes >= size,
        "inline_bytes": ep.inline_bytes,
        "signal_every": SIGNAL_EVERY,
    }
