"""The fake verbs at the C level, so the compiled ping-pong loop (hotloop.c) runs on them.

hotloop.c reaches a device only through ``qp->context->ops.post_send`` and
``cq->context->ops.poll_cq`` (verbs.h's inline ibv_post_send / ibv_poll_cq). A twin of a
fake QP is a zeroed ``struct ibv_qp``, ``ibv_cq`` and ``ibv_context`` whose two ops slots are
ctypes callbacks into the fake QP's ``post_send`` and its CQ's ``poll``: the compiled loop
then moves bytes, signals, reaps and meets injected faults exactly as the Python loop does.
Offsets inside the structs come from the library itself (nq_layout); the work request and
completion structs below are verbs.h's ABI, checked against its sizes.
"""

from __future__ import annotations

import ctypes
import errno
from typing import Any

from netqual.transports.rdma import hotloop

QPT_RC = 2


class Sge(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("length", ctypes.c_uint32), ("lkey", ctypes.c_uint32)]


class SendWr(ctypes.Structure):
    """The prefix of struct ibv_send_wr the loop fills (RDMA WRITE), padded to its size."""

    _fields_ = [
        ("wr_id", ctypes.c_uint64),
        ("next", ctypes.c_void_p),
        ("sg_list", ctypes.POINTER(Sge)),
        ("num_sge", ctypes.c_int),
        ("opcode", ctypes.c_int),
        ("send_flags", ctypes.c_uint),
        ("imm_data", ctypes.c_uint32),
        ("remote_addr", ctypes.c_uint64),
        ("rkey", ctypes.c_uint32),
        ("_rest", ctypes.c_uint8 * 76),
    ]


class Wc(ctypes.Structure):
    _fields_ = [
        ("wr_id", ctypes.c_uint64),
        ("status", ctypes.c_int),
        ("opcode", ctypes.c_int),
        ("vendor_err", ctypes.c_uint32),
        ("byte_len", ctypes.c_uint32),
        ("_rest", ctypes.c_uint8 * 24),
    ]


PostSend = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(SendWr), ctypes.POINTER(ctypes.c_void_p)
)
PollCq = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(Wc))


class Twin:
    """The C structs for one fake QP. Keep it alive as long as the loop may call it."""

    def __init__(self, qp: Any, send_wr: Any, sge: Any, layout: hotloop.Layout) -> None:
        assert ctypes.sizeof(SendWr) == layout.send_wr_bytes
        assert ctypes.sizeof(Wc) == layout.wc_bytes
        self.qp, self.send_wr, self.sge = qp, send_wr, sge
        self.errors: list[BaseException] = []  # what a callback raised (it must not unwind C)
        self.ctx = ctypes.create_string_buffer(layout.ctx_bytes)
        self.cq = ctypes.create_string_buffer(layout.cq_bytes)
        self.ibv_qp = ctypes.create_string_buffer(layout.qp_bytes)
        self._post, self._poll = PostSend(self.post_send), PollCq(self.poll_cq)
        ctx, cq, ibv_qp = (ctypes.addressof(b) for b in (self.ctx, self.cq, self.ibv_qp))
        _put(ctx + layout.ctx_post_send, ctypes.cast(self._post, ctypes.c_void_p).value)
        _put(ctx + layout.ctx_poll_cq, ctypes.cast(self._poll, ctypes.c_void_p).value)
        _put(cq, ctx)  # ibv_cq.context comes first
        _put(ibv_qp, ctx)  # so does ibv_qp.context
        _put(ibv_qp + layout.qp_send_cq, cq)
        ctypes.c_uint32.from_address(ibv_qp + layout.qp_qp_num).value = qp.qp_num
        ctypes.c_int.from_address(ibv_qp + layout.qp_qp_type).value = QPT_RC
        self.address = ibv_qp

    def post_send(self, _qp: int, wr: Any, bad: Any) -> int:
        w = wr.contents
        try:
            sg = w.sg_list[0]
            fake = self.send_wr(
                wr_id=w.wr_id,
                opcode=w.opcode,
                num_sge=1,
                sg=[self.sge(sg.addr, sg.length, sg.lkey)],
                send_flags=w.send_flags,
            )
            fake.set_wr_rdma(w.rkey, w.remote_addr)
            self.qp.post_send(fake)  # through the attribute: a test may replace it
        except Exception as err:
            code = getattr(err, "error_code", None)
            if isinstance(code, int) and code > 0:
                return code
            self.errors.append(err)
            return errno.EIO
        return 0

    def poll_cq(self, _cq: int, num: int, out: Any) -> int:
        try:
            count, wcs = self.qp.cq.poll(num)
            for i, wc in enumerate(wcs[:count]):
                out[i].wr_id, out[i].status = wc.wr_id, wc.status
                out[i].opcode, out[i].vendor_err = wc.opcode, wc.vendor_err
            return int(count)
        except Exception as err:
            self.errors.append(err)
            return -errno.EIO


def _put(address: int, value: int | None) -> None:
    ctypes.c_void_p.from_address(address).value = value


def twin_address(qp: Any, send_wr: Any, sge: Any) -> int | None:
    """The address of ``qp``'s C twin (made on first use), or None where the compiled loop
    is not built (the transport then runs its Python loop)."""
    lib = hotloop.library()
    if isinstance(lib, str):
        return None
    twin = getattr(qp, "twin", None)
    if twin is None:
        twin = qp.twin = Twin(qp, send_wr, sge, lib.layout)
    return int(twin.address)


class SilentDevice:
    """A device made of C alone, for what a Python callback would mask: ``post_send`` and
    ``poll_cq`` are libc's ``sched_yield`` (returns 0; the extra arguments are ignored on
    the x86-64 and AArch64 calling conventions): every write "succeeds" and goes nowhere,
    no completion ever comes, and no Python runs inside the loop."""

    def __init__(self, qp_num: int, layout: hotloop.Layout) -> None:
        libc = ctypes.CDLL(None)
        nothing = ctypes.cast(libc.sched_yield, ctypes.c_void_p).value
        self.ctx = ctypes.create_string_buffer(layout.ctx_bytes)
        self.cq = ctypes.create_string_buffer(layout.cq_bytes)
        self.ibv_qp = ctypes.create_string_buffer(layout.qp_bytes)
        ctx, cq, ibv_qp = (ctypes.addressof(b) for b in (self.ctx, self.cq, self.ibv_qp))
        _put(ctx + layout.ctx_post_send, nothing)
        _put(ctx + layout.ctx_poll_cq, nothing)
        _put(cq, ctx)
        _put(ibv_qp, ctx)
        _put(ibv_qp + layout.qp_send_cq, cq)
        ctypes.c_uint32.from_address(ibv_qp + layout.qp_qp_num).value = qp_num
        ctypes.c_int.from_address(ibv_qp + layout.qp_qp_type).value = QPT_RC
        self.address = ibv_qp
