"""The ping-pong's WRITEs (``Writer``): the two reusable work requests from the send area
and two from the receive area (the echo), posting with a completion every
``SIGNAL_EVERY``-th, reaping, and the spin on the receive byte with its own deadline and
the control channel's check; and what a vanished responder's QP says
(``confirm_peer_gone``). The loops that drive them are in pingpong.py.
"""

from __future__ import annotations

import ctypes
import select
import socket
import time
from collections.abc import Callable
from typing import Any

from netqual.base.errors import ProbeError
from netqual.transports.rdma import verbs
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.endpoint import Endpoint

SIGNAL_EVERY = 16
SPINS_PER_CHECK = 4096  # byte polls between deadline / CQ / abort checks
PINGPONG_WR_ID = 0xFFFF_0000


class Writer:
    """The two reusable WRITE work requests (plain and signalled) and the polled bytes."""

    def __init__(self, ep: Endpoint, peer: ConnInfo, size: int) -> None:
        if size < 1 or peer.recv_offset + size > peer.bulk_offset:
            raise ProbeError(f"ping-pong size {size} does not fit the peer's receive area")
        pv = ep.pv
        self.ep, self.qp, self.cq = ep, ep.qp, ep.cq
        flags = verbs.SEND_INLINE if ep.inline_bytes >= size else 0
        self.inline = bool(flags)
        lkey = int(ep.mr.lkey)
        self.flags, self.lkey, self.size = flags, lkey, size
        self.remote_addr, self.rkey = peer.addr + peer.recv_offset, peer.rkey
        self.send_area, self.recv_area = ep.buf + ep.send_offset, ep.buf + ep.recv_offset
        # (plain, signalled) WRITEs from the send area, and from the receive area: the echo
        # of the ping that just landed there.
        self.wrs = {echo: self._wrs(pv, area, flags) for echo, area in
                    ((False, self.send_area), (True, self.recv_area))}  # fmt: skip
        self.plain, self.signalled = self.wrs[False]
        # Zero-copy views of single bytes of the registered buffer (alive while the MR is).
        self.send_byte = ctypes.c_uint8.from_address(ep.buf + ep.send_offset + size - 1)
        self.recv_byte = ctypes.c_uint8.from_address(ep.buf + ep.recv_offset + size - 1)
        self.posted = 0
        self.unreaped = 0

    def _wrs(self, pv: Any, area: int, flags: int) -> tuple[Any, Any]:
        sg = verbs.sge(pv, area, self.size, self.lkey)
        out = tuple(
            verbs.send_wr(pv, PINGPONG_WR_ID, verbs.WR_RDMA_WRITE, sg, flags | signal)
            for signal in (0, verbs.SEND_SIGNALED)
        )
        for wr in out:
            wr.set_wr_rdma(self.rkey, self.remote_addr)
        return out[0], out[1]

    def post(self, echo: bool = False) -> None:
        self.posted += 1
        plain, signalled = self.wrs[echo]
        if self.posted % SIGNAL_EVERY:
            self.qp.post_send(plain)
        else:
            self.qp.post_send(signalled)
            self.unreaped += 1

    def reap(self) -> None:
        """Collect finished signalled writes; an error completion becomes ProbeError."""
        count, wcs = self.cq.poll(SIGNAL_EVERY)
        for wc in wcs[:count]:
            if wc.status != 0:
                raise self.ep.completion_error("RDMA WRITE", int(wc.status), int(wc.vendor_err))
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
                raise Aborted()


class Aborted(Exception):
    """The other end spoke on (or closed) the control channel during the ping-pong."""


# Reads what the responder said on the control channel once it turned readable: its reason
# for stopping early, or None when the channel was closed (nothing to read).
PeerNotice = Callable[[], str | None]


CONFIRM_S = 30.0  # how long a probe write to a vanished peer may take to fail (retries)


def confirm_peer_gone(w: Writer, deadline: float) -> str:
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
