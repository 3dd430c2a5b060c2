"""An in-process stand-in for pyverbs, for unit tests of the RDMA loops without hardware.

Same constructor keywords and methods as the real classes the transport uses (the real
ones are checked in test_rdma_api.py). Memory regions are ctypes buffers; an RDMA WRITE or
READ is a memmove between them after an rkey and bounds check, so the transport's byte
polling, signalling, reaping and bulk bookkeeping run for real. The send queue enforces
``max_send_wr`` the way a NIC does: a WR slot is freed only when a later signalled
completion is polled.

Two ends in one process (the fake agent thread and the test) share one interpreter lock,
so neither may rely on being pre-empted to let the other run: a spinning loop that only
drops the lock briefly (its abort check) can starve the other thread for tens of ms per
round in CPython (each brief release bumps the lock's switch number, so the waiter's
timeout never turns into a drop request). A completion poll that finds nothing therefore
blocks, lock released, until the fabric moves bytes (or ``POLL_IDLE_S`` passes), the way
an event-driven wait would: each side hands over to the other at every check, whatever the
machine's load or speed.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections import deque
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from netqual.transports.rdma import verbs

POLL_IDLE_S = 0.002  # the most an empty poll waits for the fabric to move bytes


class PyverbsError(Exception):
    pass


class PyverbsRDMAError(PyverbsError):
    def __init__(self, msg: str, error_code: int = -1) -> None:
        super().__init__(f"{msg}. Errno: {error_code}")
        self.error_code = error_code


class Fabric:
    """Shared state: registered regions by rkey, fault injection, the one device."""

    def __init__(self, link_layer: int = 2, gids: list[tuple[str, int]] | None = None) -> None:
        self.lock = threading.Lock()
        self.regions: dict[int, Any] = {}  # rkey -> fake MR
        self.keys = itertools.count(0x100)
        self.qpns = itertools.count(0x40)
        self.link_layer = link_layer
        self.gids = (
            gids
            if gids is not None
            else [
                ("fe80:0000:0000:0000:0000:0000:0000:0001", 0),
                ("fe80:0000:0000:0000:0000:0000:0000:0001", 1),
                ("0000:0000:0000:0000:0000:ffff:7f00:0001", 0),
                ("0000:0000:0000:0000:0000:ffff:7f00:0001", 1),
            ]
        )
        self.fail_status: int | None = None  # next completion carries this status
        self.fail_read_status: int | None = None  # next RDMA READ completes with this status
        # (qp_num, n): that QP's n-th RDMA WRITE moves nothing and completes with
        # IBV_WC_RETRY_EXC_ERR, as when the peer's QP vanished
        self.fail_write: tuple[int, int] | None = None
        self.fail_transition: tuple[str, int] | None = None
        self.fail_transition_skip = 0  # let this many matching transitions succeed first
        self.on_write: Callable[[int, int], None] | None = None  # (remote_addr, length)
        # Give QPs a C-level twin (rdma_fakeverbs_c) so the compiled ping-pong loop runs on
        # them; False: the transport finds no ibv_qp and runs its Python loop.
        self.compiled = False
        # Whether pyverbs has Context.query_gid_table (rdma-core 32 on); False: scans walk
        # the table slot by slot (query_gid, query_gid_type), as with older pyverbs.
        self.gid_table = True
        self.closed: list[str] = []
        self.max_sq_seen = 0
        self.reads_by_qp: dict[int, int] = {}  # qp_num -> RDMA READs it posted
        self.moved = threading.Condition()  # notified whenever a WRITE or READ moved bytes
        self.moves = 0


def module(fabric: Fabric) -> verbs.Pyverbs:
    f = fabric

    class Device:
        def __init__(self, name: bytes) -> None:
            self.name = name

    class DeviceAttr:
        max_qp_rd_atom = 16
        max_qp_init_rd_atom = 16
        max_qp_wr = 32768
        phys_port_cnt = 1
        fw_version = "fake-1.0"

    class PortAttr:
        state = 4
        active_mtu = 3 if f.link_layer == 2 else 5
        lid = 0 if f.link_layer == 2 else 7
        link_layer = f.link_layer
        gid_tbl_len = 8
        max_msg_sz = 1 << 31

    class GID:
        def __init__(self, val: str | None = None) -> None:
            self.gid = val or "0000:0000:0000:0000:0000:0000:0000:0000"

        def __str__(self) -> str:
            return self.gid

    class GIDEntry:  # one populated slot, as query_gid_table gives it (port 1)
        def __init__(self, index: int, gid: str, gid_type: int) -> None:
            self.gid_index, self.gid, self.gid_type, self.port_num = index, gid, gid_type, 1

        def gid_str(self) -> str:
            return self.gid

    class Context:
        def __init__(self, **kwargs: Any) -> None:
            if kwargs.get("name") != "fake0":
                raise PyverbsRDMAError(f"No IB device with name {kwargs.get('name')}", 19)

        def query_device(self) -> DeviceAttr:
            return DeviceAttr()

        def query_port(self, port_num: int) -> PortAttr:
            return PortAttr()

        def query_gid(self, port_num: int, index: int) -> GID:
            return GID(f.gids[index][0] if index < len(f.gids) else None)

        def query_gid_table(self, max_entries: int) -> list[GIDEntry]:
            if not f.gid_table:
                raise AttributeError("query_gid_table")  # as an older pyverbs' Context
            zero = "0000:0000:0000:0000:0000:0000:0000:0000"
            used = [(i, g, t) for i, (g, t) in enumerate(f.gids) if g != zero]
            if len(used) > max_entries:
                raise PyverbsRDMAError("Failed to query gid table", 12)
            ib = f.link_layer == 1  # ibv_gid_type: 0 IB, 1 RoCE v1, 2 RoCE v2
            return [GIDEntry(i, g, 0 if ib else 2 if t == 1 else 1) for i, g, t in used]

        def query_gid_type(self, port_num: int, index: int) -> int:
            if index >= len(f.gids):
                raise PyverbsRDMAError("Failed to query gid type", 22)
            return f.gids[index][1]

        def close(self) -> None:
            f.closed.append("ctx")

    class PD:
        def __init__(self, creator: Context) -> None:
            self.ctx = creator

        def close(self) -> None:
            f.closed.append("pd")

    class MR:
        def __init__(self, creator: PD, length: int, access: int) -> None:
            self._mem = ctypes.create_string_buffer(length)
            self.buf = ctypes.addressof(self._mem)
            self.length = length
            self.access = access
            self.lkey = self.rkey = next(f.keys)
            with f.lock:
                f.regions[self.rkey] = self

        def close(self) -> None:
            with f.lock:
                f.regions.pop(self.rkey, None)
            f.closed.append("mr")

    class WC:
        def __init__(self, wr_id: int = 0, status: int = 0, opcode: int = 0) -> None:
            self.wr_id, self.status, self.opcode, self.vendor_err = wr_id, status, opcode, 0

    class CQ:
        def __init__(
            self, context: Context, cqe: int, cq_context: Any, channel: Any, comp_vector: int
        ) -> None:
            self.entries: deque[tuple[WC, QP]] = deque()

        def poll(self, num_entries: int = 1) -> tuple[int, list[WC]]:
            if not self.entries:  # hand over to the other end until it moves bytes
                with f.moved:
                    seen = f.moves
                    f.moved.wait_for(lambda: f.moves != seen, POLL_IDLE_S)
            out: list[WC] = []
            while self.entries and len(out) < num_entries:
                wc, qp = self.entries.popleft()
                qp.retire(wc)
                out.append(wc)
            return len(out), out

        def close(self) -> None:
            f.closed.append("cq")

    class QPCap:
        def __init__(
            self,
            max_send_wr: int = 1,
            max_recv_wr: int = 10,
            max_send_sge: int = 1,
            max_recv_sge: int = 1,
            max_inline_data: int = 0,
        ) -> None:
            self.max_send_wr, self.max_inline_data = max_send_wr, max_inline_data

    class QPInitAttr:
        def __init__(
            self,
            qp_type: int = 3,
            qp_context: Any = None,
            scq: Any = None,
            rcq: Any = None,
            srq: Any = None,
            cap: QPCap | None = None,
            sq_sig_all: int = 1,
        ) -> None:
            self.scq, self.qp_type, self.sq_sig_all = scq, qp_type, sq_sig_all
            self.max_send_wr = cap.max_send_wr if cap else 1
            self.max_inline_data = min(cap.max_inline_data, 220) if cap else 0

    class QPAttr:
        def __init__(
            self, qp_state: int = 1, cur_qp_state: int = 0, port_num: int = 1, path_mtu: int = 3
        ) -> None:
            self.qp_state, self.port_num, self.path_mtu = qp_state, port_num, path_mtu
            self.ah_attr: Any = None

    class GlobalRoute:
        def __init__(
            self,
            dgid: GID | None = None,
            flow_label: int = 0,
            sgid_index: int = 0,
            hop_limit: int = 1,
            traffic_class: int = 0,
        ) -> None:
            self.dgid, self.sgid_index, self.hop_limit = dgid, sgid_index, hop_limit

    class AHAttr:
        def __init__(
            self,
            dlid: int = 0,
            sl: int = 0,
            src_path_bits: int = 0,
            static_rate: int = 0,
            is_global: int = 0,
            port_num: int = 1,
            gr: GlobalRoute | None = None,
        ) -> None:
            self.dlid, self.is_global, self.gr = dlid, is_global, gr
            self.hop_limit = gr.hop_limit if gr else None
            self.sgid_index = gr.sgid_index if gr else None

    class SGE:
        def __init__(self, addr: int, length: int, lkey: int) -> None:
            self.addr, self.length, self.lkey = addr, length, lkey

    class SendWR:
        def __init__(
            self,
            wr_id: int = 0,
            opcode: int = 2,
            num_sge: int = 0,
            imm_data: int = 0,
            sg: list[SGE] | None = None,
            send_flags: int = 2,
            next_wr: Any = None,
        ) -> None:
            assert sg is not None and num_sge == 1
            self.wr_id, self.opcode, self.send_flags = wr_id, opcode, send_flags
            self.sge = SGE(sg[0].addr, sg[0].length, sg[0].lkey)  # copied, as pyverbs does
            self.rkey = self.remote_addr = 0

        def set_wr_rdma(self, rkey: int, addr: int) -> None:
            self.rkey, self.remote_addr = rkey, addr

    class QP:
        def __init__(self, creator: PD, init_attr: QPInitAttr, qp_attr: Any = None) -> None:
            self.qp_num = next(f.qpns)
            self.cq: CQ = init_attr.scq
            self.max_send_wr = init_attr.max_send_wr
            self.sq: deque[tuple[int, bool]] = deque()  # (serial, signalled)
            self.serial = itertools.count()
            self.state = 0
            self.attrs: dict[str, Any] = {}
            self.writes = 0

        def _step(self, name: str, state: int, attr: QPAttr) -> None:
            if f.fail_transition and f.fail_transition[0] == name:
                if f.fail_transition_skip:
                    f.fail_transition_skip -= 1
                else:
                    code = f.fail_transition[1]
                    raise PyverbsRDMAError(f"Failed to modify QP state to {name}", code)
            self.state = state
            self.attrs[name] = dict(vars(attr))

        def to_init(self, qp_attr: QPAttr) -> None:
            self._step("INIT", 1, qp_attr)

        def to_rtr(self, qp_attr: QPAttr) -> None:
            self._step("RTR", 2, qp_attr)

        def to_rts(self, qp_attr: QPAttr) -> None:
            self._step("RTS", 3, qp_attr)

        def query(self, attr_mask: int) -> tuple[QPAttr, QPInitAttr]:
            attr = QPAttr(qp_state=self.state)
            attr.path_mtu = self.attrs.get("RTR", {}).get("path_mtu", 0)
            return attr, QPInitAttr()

        def retire(self, wc: WC) -> None:
            serial = getattr(wc, "serial", None)
            while self.sq and serial is not None and self.sq[0][0] <= serial:
                self.sq.popleft()

        def post_send(self, wr: SendWR, bad_wr: Any = None) -> None:
            if self.state != 3:
                raise PyverbsRDMAError("Failed to post send", 22)
            if len(self.sq) >= self.max_send_wr:
                raise PyverbsRDMAError("Failed to post send", 12)
            serial = next(self.serial)
            signalled = bool(wr.send_flags & verbs.SEND_SIGNALED)
            self.sq.append((serial, signalled))
            f.max_sq_seen = max(f.max_sq_seen, len(self.sq))
            status = self._post_status(wr)
            if f.fail_status is not None:
                status, f.fail_status = f.fail_status, None
            if wr.opcode == verbs.WR_RDMA_READ and f.fail_read_status is not None:
                status, f.fail_read_status = f.fail_read_status, None
            if signalled or status:
                wc = WC(wr.wr_id, status, wr.opcode)
                wc.serial = serial  # type: ignore[attr-defined]
                self.cq.entries.append((wc, self))

        def _post_status(self, wr: SendWR) -> int:
            if wr.opcode == verbs.WR_RDMA_WRITE:
                self.writes += 1
                if f.fail_write == (self.qp_num, self.writes):
                    return 12  # IBV_WC_RETRY_EXC_ERR
            return self._move(wr)

        def _move(self, wr: SendWR) -> int:
            with f.lock:
                region = f.regions.get(wr.rkey)
            n = wr.sge.length
            if region is None or not region.buf <= wr.remote_addr <= region.buf + region.length - n:
                return 10  # IBV_WC_REM_ACCESS_ERR
            if wr.opcode == verbs.WR_RDMA_WRITE:
                # The last byte lands last, as a NIC places a WRITE: the loops spin on it.
                # One memmove of 4000 bytes may store the tail before the middle (glibc
                # copies head and tail vectors first), and the compiled loop, spinning in
                # another thread, then echoed a half-written message (an integrity failure
                # seen once in CI: test_rdma_integrity[compiled-4000]).
                if n > 1:
                    ctypes.memmove(wr.remote_addr, wr.sge.addr, n - 1)
                if n > 0:
                    ctypes.memmove(wr.remote_addr + n - 1, wr.sge.addr + n - 1, 1)
                if f.on_write:
                    f.on_write(wr.remote_addr, n)
            else:
                ctypes.memmove(wr.sge.addr, wr.remote_addr, n)
                f.reads_by_qp[self.qp_num] = f.reads_by_qp.get(self.qp_num, 0) + 1
            with f.moved:
                f.moves += 1
                f.moved.notify_all()
            return 0

        def close(self) -> None:
            f.closed.append("qp")

    def get_device_list() -> list[Device]:
        return [Device(b"fake0")]

    def qp_address(qp: QP) -> int | None:
        if not f.compiled:
            return None
        from rdma_fakeverbs_c import twin_address

        return twin_address(qp, SendWR, SGE)

    ns = SimpleNamespace
    return verbs.Pyverbs(
        device=ns(
            get_device_list=get_device_list,
            Device=Device,
            Context=Context,
            DeviceAttr=DeviceAttr,
            PortAttr=PortAttr,
        ),  # type: ignore[arg-type]
        pd=ns(PD=PD),  # type: ignore[arg-type]
        mr=ns(MR=MR),  # type: ignore[arg-type]
        cq=ns(CQ=CQ, WC=WC),  # type: ignore[arg-type]
        qp=ns(QP=QP, QPCap=QPCap, QPInitAttr=QPInitAttr, QPAttr=QPAttr),  # type: ignore[arg-type]
        addr=ns(GID=GID, GlobalRoute=GlobalRoute, AHAttr=AHAttr),  # type: ignore[arg-type]
        wr=ns(SGE=SGE, SendWR=SendWR),  # type: ignore[arg-type]
        pyverbs_error=ns(PyverbsError=PyverbsError, PyverbsRDMAError=PyverbsRDMAError),  # type: ignore[arg-type]
        location="(fake)",
        version="fake",
        route="test",
        qp_address=qp_address,
    )
