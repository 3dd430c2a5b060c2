"""One end of an RC connection: Context, PD, one MR, one CQ, one QP (or ``qps`` of them for
a fetch profile's QPs per endpoint, sharing the CQ and the MR), and their teardown.

Memory region layout: ``[receive area | send area | bulk area]``, each start 4 KiB aligned.
The peer RDMA-WRITEs ping-pong messages into the receive area; the send area is the source
of our own writes; the bulk area is what the peer READs from (responder) or where our
READs land (initiator).
"""

from __future__ import annotations

import secrets
from typing import Any

from netqual.base.errors import ProbeError
from netqual.transports.rdma import verbs
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.devices import Selection
from netqual.transports.rdma.errors import completion_error, transition_error
from netqual.transports.rdma.gid import LinkLayer, check_peer

_ALIGN = 4096
MAX_INLINE_REQUEST = 256  # ask for inline only for small messages; the device may grant less
# IBA timeout 14 = 4.096 us * 2^14 = 67 ms per try; 6 retries -> ~0.5 s to RETRY_EXC_ERR.
# The default; --rdma-qp-timeout (RdmaOptions.qp_timeout) changes it for slow responders.
# Retries not 7: Soft-RoCE (rxe_comp.c) treats retry_cnt 7 as "retry forever", so a vanished
# peer would never produce an error completion there.
QP_TIMEOUT = 14
QP_RETRY_CNT = 6
QP_RNR_RETRY = 7
QP_MIN_RNR_TIMER = 12


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class Endpoint:
    """Owns every verbs resource of one end; ``close()`` releases them in reverse order."""

    def __init__(
        self,
        pv: verbs.Pyverbs,
        sel: Selection,
        *,
        msg_bytes: int,
        bulk_bytes: int,
        send_wr: int,
        qps: int = 1,
        qp_timeout: int | None = None,
    ) -> None:
        self.pv, self.sel = pv, sel
        self.qp_timeout = QP_TIMEOUT if qp_timeout is None else qp_timeout
        self.msg_bytes = msg_bytes
        self.recv_offset = 0
        self.send_offset = _align(msg_bytes)
        self.bulk_offset = self.send_offset + _align(msg_bytes)
        self.bulk_bytes = bulk_bytes
        self.length = self.bulk_offset + max(_ALIGN, _align(bulk_bytes))
        self.psn = secrets.randbits(24)
        self.inline_bytes = 0
        self.rd_atomic = 1
        self.path_mtu = sel.port.active_mtu
        self.send_wr = max(8, min(send_wr, sel.device.max_qp_wr))
        self.ctx: Any = None
        self.pd: Any = None
        self.mr: Any = None
        self.cq: Any = None
        self.qp: Any = None
        self.more_qps: list[tuple[Any, int]] = []  # (QP, its PSN) beyond the first
        try:
            self.ctx = pv.device.Context(name=sel.device.name)
            self.pd = pv.pd.PD(self.ctx)
            access = verbs.ACCESS_LOCAL_WRITE | verbs.ACCESS_REMOTE_WRITE | verbs.ACCESS_REMOTE_READ
            self.mr = pv.mr.MR(self.pd, self.length, access)
            self.cq = pv.cq.CQ(self.ctx, 2 * self.send_wr * qps, None, None, 0)
            self.qp = self._create_qp()
            for _ in range(qps - 1):
                self.more_qps.append((self._create_qp(), secrets.randbits(24)))
        except pv.error as err:
            self.close()
            raise ProbeError(f"rdma set-up on {sel.where} failed: {err}") from err

    def _create_qp(self) -> Any:
        want_inline = self.msg_bytes if self.msg_bytes <= MAX_INLINE_REQUEST else 0
        try:
            init = verbs.qp_init_attr(
                self.pv, self.cq, verbs.qp_cap(self.pv, self.send_wr, want_inline)
            )
            qp = self.pv.qp.QP(self.pd, init)
        except self.pv.error:
            if not want_inline:
                raise
            # Some providers refuse any inline size they cannot honour; go without.
            init = verbs.qp_init_attr(self.pv, self.cq, verbs.qp_cap(self.pv, self.send_wr, 0))
            qp = self.pv.qp.QP(self.pd, init)
        self.inline_bytes = int(init.max_inline_data)  # written back with what was granted
        return qp

    @property
    def buf(self) -> int:
        return int(self.mr.buf)

    def conninfo(self) -> ConnInfo:
        port, gid = self.sel.port, self.sel.gid.entry
        return ConnInfo(
            qpn=int(self.qp.qp_num),
            psn=self.psn,
            lid=port.lid,
            gid=gid.gid,
            gid_index=gid.index,
            gid_type=gid.gid_type,
            link_layer=port.link_layer,
            mtu=port.active_mtu,
            rkey=int(self.mr.rkey),
            addr=self.buf,
            length=self.length,
            recv_offset=self.recv_offset,
            bulk_offset=self.bulk_offset,
            bulk_bytes=self.bulk_bytes,
            max_rd_atomic=self.sel.device.max_qp_init_rd_atom,
            max_dest_rd_atomic=self.sel.device.max_qp_rd_atom,
            more_qps=tuple((int(qp.qp_num), psn) for qp, psn in self.more_qps),
        )

    @property
    def all_qps(self) -> list[Any]:
        """Every QP, the ping-pong's first."""
        return [self.qp, *(qp for qp, _psn in self.more_qps)]

    def connect(self, peer: ConnInfo) -> None:
        """RESET -> INIT -> RTR -> RTS against ``peer``, every QP with the peer's QP of the
        same place. Raises ProbeError in plain words."""
        port, gid = self.sel.port, self.sel.gid.entry
        check_peer(gid, port.link_layer, peer.gid, peer.gid_type, peer.link_layer)
        if len(peer.more_qps) < len(self.more_qps):
            raise ProbeError(
                f"the peer opened {1 + len(peer.more_qps)} QP(s), {1 + len(self.more_qps)} "
                "asked (an agent older than fetch profiles over RDMA?)"
            )
        self.path_mtu = min(port.active_mtu, peer.mtu)
        # We may have as many READs in flight as we can initiate and the peer can serve.
        self.rd_atomic = max(1, min(self.sel.device.max_qp_init_rd_atom, peer.max_dest_rd_atomic))
        self._connect_qp(self.qp, peer, peer.qpn, peer.psn, self.psn)
        for (qp, psn), (peer_qpn, peer_psn) in zip(self.more_qps, peer.more_qps, strict=False):
            self._connect_qp(qp, peer, peer_qpn, peer_psn, psn)
        self.path_mtu = self._queried_path_mtu()

    def _connect_qp(self, qp: Any, peer: ConnInfo, peer_qpn: int, peer_psn: int, psn: int) -> None:
        port, gid = self.sel.port, self.sel.gid.entry
        pv = self.pv
        attr = verbs.qp_attr(pv, port.num, self.path_mtu)
        attr.pkey_index = 0
        attr.qp_access_flags = (
            verbs.ACCESS_LOCAL_WRITE | verbs.ACCESS_REMOTE_WRITE | verbs.ACCESS_REMOTE_READ
        )
        self._transition("INIT", qp.to_init, attr)
        ethernet = port.link_layer is LinkLayer.ETHERNET
        attr.ah_attr = verbs.ah_attr(
            pv,
            port.num,
            dlid=peer.lid,
            dgid=peer.gid if ethernet else None,
            sgid_index=gid.index,
            traffic_class=0,
        )
        attr.dest_qp_num = peer_qpn
        attr.rq_psn = peer_psn
        attr.max_dest_rd_atomic = self.sel.device.max_qp_rd_atom
        attr.min_rnr_timer = QP_MIN_RNR_TIMER
        self._transition("RTR", qp.to_rtr, attr)
        attr.timeout = self.qp_timeout
        attr.retry_cnt = QP_RETRY_CNT
        attr.rnr_retry = QP_RNR_RETRY
        attr.sq_psn = psn
        attr.max_rd_atomic = self.rd_atomic
        self._transition("RTS", qp.to_rts, attr)

    def completion_error(self, what: str, status: int, vendor_err: int) -> ProbeError:
        """A failed completion on one of these QPs, with the ACK timeout they ran under."""
        return completion_error(what, status, vendor_err, ack=(self.qp_timeout, QP_RETRY_CNT))

    def _queried_path_mtu(self) -> int:
        """The path MTU the device holds for the QP (what it really uses), not what we asked."""
        try:
            qp_attr, _init = self.qp.query(verbs.QP_ATTR_PATH_MTU)
        except self.pv.error:
            return self.path_mtu  # a provider that cannot answer: keep the negotiated value
        return int(qp_attr.path_mtu)

    def _transition(self, state: str, step: Any, attr: Any) -> None:
        try:
            step(attr)
        except self.pv.error as err:
            raise transition_error(
                state, verbs.error_code(err), self.sel.port.link_layer.value
            ) from err

    def close(self) -> list[str]:
        """Destroy QP, CQ, MR, PD, Context (children first); never raises. Returns problems."""
        problems = []
        more, self.more_qps = self.more_qps, []
        for qp, _psn in more:
            try:
                qp.close()
            except Exception as err:  # teardown must go on whatever one object says
                problems.append(f"closing qp: {err}")
        for name in ("qp", "cq", "mr", "pd", "ctx"):
            obj = getattr(self, name)
            setattr(self, name, None)
            if obj is None:
                continue
            try:
                obj.close()
            except Exception as err:  # teardown must go on whatever one object says
                problems.append(f"closing {name}: {err}")
        return problems

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
