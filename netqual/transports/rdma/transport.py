"""``RdmaTransport``: ping-pong and bulk read over one RC QP, set up over the control channel.

Conversation (initiator -> responder, on the agents' authenticated channel):

1. ``rdma.connect`` {conninfo, plan, deadline_s, options?} -> responder checks it and
   answers ``rdma.accepted`` at once (a responder that does not is silent: the initiator
   gives up after ``ACCEPT_TIMEOUT_S``, ``PeerSilentError``, and the run drops that node),
   then opens its device, connects its QP (RTS) and answers ``rdma.connected`` {conninfo,
   details}, then spins on its side of the ping-pong.
2. The initiator connects its QP, runs ping-pong, then the bulk reads (the responder's CPU
   is idle: RDMA READ needs none).
3. ``rdma.close`` -> ``rdma.closed`` {rounds}; the responder tears everything down. If the
   initiator sends ``rdma.close`` early, the spinning responder notices and stops. If the
   responder stops early, it sends ``rdma.stopped`` {reason} at once; the initiator, which
   checks the channel between byte polls, stops with that reason instead of its deadline.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel
from netqual.base.errors import (
    BadRequestError,
    ErrorCode,
    LimitError,
    NetqualError,
    PeerError,
    PeerSilentError,
    ProbeError,
    TransportUnavailableError,
)
from netqual.model.fetchprofile import profile
from netqual.model.path import path_label
from netqual.model.plan import ProbePlan
from netqual.transports import integrity
from netqual.transports.interface import (
    AgentLimits,
    BufferBudget,
    RawBulk,
    RawProbe,
    Transport,
    accepted,
)
from netqual.transports.rdma import bulk, devices, fetch, pingpong, responder, verbs, writer
from netqual.transports.rdma import tags as rdma_tags
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.gid import GidSelectionError, ip_family
from netqual.transports.rdma.options import RdmaOptions
from netqual.transports.rdma.responder import CLOSE_TIMEOUT_S
from netqual.transports.rdma.session import (
    SessionPlan,
    local_ip_of,
    responder_stopped,
    unavailable_message,
)

log = logging.getLogger(__name__)


class RdmaTransport(Transport):
    """RDMA over pyverbs. ``options`` are this node's overrides (default: environment);
    ``peer_options`` are sent to the responder and override its own."""

    name: ClassVar[str] = "rdma"

    def __init__(
        self,
        options: RdmaOptions | None = None,
        peer_options: RdmaOptions | None = None,
        node_name: str | None = None,
    ) -> None:
        self.options = options if options is not None else RdmaOptions.from_env()
        self.peer_options = peer_options
        self.node_name = node_name or socket.gethostname()

    def check_available(self) -> None:
        pv = verbs.load()
        try:
            found = pv.device.get_device_list()
        except pv.error as err:
            found, detail = [], str(err)
        else:
            detail = ""
        if not found:
            problem = (
                verbs.NO_DEVICE_PROBLEM if not verbs.rdma_sysfs_devices() else "no RDMA device"
            )
            if detail and verbs.rdma_sysfs_devices():
                problem += f" ({detail})"
            raise TransportUnavailableError("rdma", problem, verbs.NO_DEVICE_HINT)

    # -- initiator -------------------------------------------------------------------------
    def initiate(
        self, channel: Channel, plan: ProbePlan, deadline: float, peer_address: str
    ) -> RawProbe:
        """Failures come out as ProbeError (or the responder's PeerError), never raw pyverbs."""
        try:
            pv = verbs.load()
            found = devices.scan(pv)
        except TransportUnavailableError as err:
            raise ProbeError(unavailable_message(self.node_name, err)) from err
        local_ip = local_ip_of(channel)
        family = ip_family(peer_address) or ip_family(local_ip)
        try:
            sel = devices.choose(found, self.options, local_ip=local_ip, family=family)
            return self._session(channel, pv, sel, plan, deadline)
        except GidSelectionError as err:
            raise ProbeError(f"rdma {path_label(self.node_name, channel.peer)}: {err}") from err
        except pv.error as err:  # a verbs call we did not expect to fail
            raise ProbeError(f"rdma {path_label(self.node_name, channel.peer)}: {err}") from err

    def _session(
        self,
        channel: Channel,
        pv: verbs.Pyverbs,
        sel: devices.Selection,
        plan: ProbePlan,
        deadline: float,
    ) -> RawProbe:
        cells = SessionPlan.from_plan(plan)
        rd_cap = sel.device.max_qp_init_rd_atom  # refined after the exchange
        prof = profile(plan.fetch_profile) if plan.fetch_profile else None
        ep = Endpoint(
            pv,
            sel,
            msg_bytes=plan.size_bytes,
            bulk_bytes=fetch.landing_bytes(prof, cells.chunks_bytes)
            if prof
            else bulk.landing_bytes(cells.chunks_bytes, cells.depths, rd_cap),
            send_wr=max(64, 2 * rd_cap + writer.SIGNAL_EVERY),
            qps=cells.qps,
            qp_timeout=self.options.qp_timeout,
        )
        closed = False
        try:
            nonce = integrity.new_nonce()
            body: dict[str, Any] = {
                "conninfo": ep.conninfo().to_json(),
                "plan": cells.to_json(),
                "deadline_s": max(0.0, deadline - time.monotonic()),
                "nonce": nonce.hex(),
            }
            if self.peer_options is not None and not self.peer_options.empty:
                body["options"] = self.peer_options.to_json()
            try:
                # Accepted at once by a real agent (before it opens its device): a silent
                # one costs ACCEPT_TIMEOUT_S, not the probe's whole deadline.
                accepted(channel, "rdma.connect", body, deadline, reply="rdma.accepted")
                reply = channel.expect("rdma.connected")
            except (PeerError, PeerSilentError):
                closed = True  # the responder holds nothing (or never listened): pass it on
                raise
            peer = ConnInfo.from_json(reply.get("conninfo", {}), channel.peer)
            ep.connect(peer)
            loop: dict[str, Any] = {}
            tags = rdma_tags.for_initiator(cells.rounds, plan.size_bytes)
            rtt = pingpong.initiate(
                ep,
                peer,
                iterations=plan.iterations,
                warmup=plan.warmup,
                size=plan.size_bytes,
                deadline=deadline,
                channel=channel.sock,
                notice=lambda: responder_stopped(channel),
                info=loop,
                tags=tags,
            )
            rdma_tags.check(channel, tags, nonce, cells.rounds, plan.size_bytes, deadline)
            check = rdma_tags.BulkCheck(channel, nonce, cells.max_chunk_bytes)
            if prof is None:
                cells_out = bulk.read_cells(ep, peer, cells, deadline, check)
            else:  # a fetch profile's slices (fetch.py), one cell per chunk size
                cells_out = fetch.fetch_cells(ep, peer, prof, plan, deadline, check, channel)
                loop["fetch"] = fetch.details(prof, plan, ep)
            rounds = self._close(channel, deadline)
            closed = True
            details = self._details(
                pv=pv,
                ep=ep,
                peer=peer,
                peer_details=reply.get("details", {}),
                plan=plan,
                cells=cells_out,
            )
            details.update(loop)
            details["responder_rounds"] = rounds
            return RawProbe(
                rtt_ns=rtt, warmup_discarded=plan.warmup, bulk=cells_out, details=details
            )
        finally:
            if not closed:
                self._close_quietly(channel, deadline)
            ep.close()

    def _close(self, channel: Channel, deadline: float) -> int:
        channel.set_deadline(max(deadline, time.monotonic() + 1.0))
        body = channel.request("rdma.close", {}, reply="rdma.closed")
        rounds = body.get("rounds", 0)
        return rounds if isinstance(rounds, int) else 0

    @staticmethod
    def _close_quietly(channel: Channel, deadline: float) -> None:
        """Best effort, bounded: at most CLOSE_TIMEOUT_S, and 1 s once the deadline passed."""
        try:
            channel.set_timeout(max(1.0, min(CLOSE_TIMEOUT_S, deadline - time.monotonic())))
            channel.request("rdma.close", {}, reply="rdma.closed")
        except (NetqualError, OSError):
            pass  # the responder tears down on its own deadline or when the channel drops

    def _details(
        self,
        *,
        pv: verbs.Pyverbs,
        ep: Endpoint,
        peer: ConnInfo,
        peer_details: Any,
        plan: ProbePlan,
        cells: tuple[RawBulk, ...],
    ) -> dict[str, Any]:
        sel = ep.sel
        details: dict[str, Any] = {
            "device": sel.device.name,
            "port": sel.port.num,
            "gid_index": sel.gid.entry.index,
            "gid": sel.gid.entry.gid,
            "gid_type": sel.gid.entry.gid_type.value,
            "gid_reason": sel.gid.reason,
            "link_layer": sel.port.link_layer.value,
            "lid": sel.port.lid,
            "active_mtu_bytes": sel.port.mtu_bytes,
            "path_mtu_bytes": verbs.MTU_BYTES.get(ep.path_mtu, 0),
            "max_rd_atomic": ep.rd_atomic,
            "qp_timeout": ep.qp_timeout,  # what a retry-exceeded error was measured under
            "bulk_depth_cap": ep.rd_atomic,
            "bulk_depth_effective": {
                str(c.depth): bulk.effective_depth(c.depth, ep.rd_atomic) for c in cells
            },
            "pyverbs_version": pv.version,
            "pyverbs_location": pv.location,
            "peer_qpn": peer.qpn,
        }
        details.update(pingpong.pingpong_details(ep, plan.size_bytes))
        if isinstance(peer_details, Mapping):
            details["peer"] = {str(k): v for k, v in peer_details.items()}
        return details

    # -- responder -------------------------------------------------------------------------
    def respond(
        self,
        channel: Channel,
        kind: str,
        body: Mapping[str, Any],
        limits: AgentLimits,
        buffers: BufferBudget | None = None,
    ) -> None:
        if kind == "rdma.close":
            channel.send("rdma.closed", {"rounds": 0})  # nothing is held outside a session
            return
        if kind != "rdma.connect":
            raise BadRequestError(channel.peer, "kind", f"unknown rdma request {kind[:40]!r}")
        f = Fields(body, "rdma.connect", channel.peer)
        nonce = f.hex("nonce", integrity.NONCE_BYTES)
        cells = SessionPlan.from_json(body.get("plan"), channel.peer)
        peer = ConnInfo.from_json(body.get("conninfo", {}), channel.peer)
        options = RdmaOptions.decode(f.obj("options", None)).over(self.options)
        if (over := cells.over_limits(limits)) is not None:
            raise LimitError(channel.peer, over)
        duration_s = f.number("deadline_s", 1e-3, 1e9, 60.0)
        deadline = time.monotonic() + min(duration_s, limits.max_duration_s)
        budget = buffers or BufferBudget(limits.max_buffer_bytes)
        tag_bytes = 2 * cells.rounds * rdma_tags.tag_width(cells.size_bytes)  # tags, challenges
        # the bulk area and its keyed content, two messages, the tags and challenges
        with budget.hold(2 * cells.max_chunk_bytes + 2 * cells.size_bytes + tag_bytes):
            channel.send("rdma.accepted")  # checked; the device set-up may take a while
            tags = rdma_tags.for_responder(
                channel, nonce, cells.rounds, cells.size_bytes, cells.max_chunk_bytes
            )
            self._respond_on_device(channel, options, peer, cells, deadline, tags)

    def _respond_on_device(
        self,
        channel: Channel,
        options: RdmaOptions,
        peer: ConnInfo,
        cells: SessionPlan,
        deadline: float,
        tags: rdma_tags.Tags,
    ) -> None:
        try:
            self.check_available()
            pv = verbs.load()
            found = devices.scan(pv)
        except TransportUnavailableError as err:
            channel.send_error(ErrorCode.UNAVAILABLE, unavailable_message(self.node_name, err))
            return
        responder.serve(
            channel, self.node_name, pv=pv, found=found, options=options, peer=peer,
            cells=cells, deadline=deadline, tags=tags,
        )  # fmt: skip


def transport_for_agent(
    node_name: str,
    run: RdmaOptions | None = None,
    agent_options: RdmaOptions | None = None,
    peer: RdmaOptions | None = None,
) -> RdmaTransport:
    """The RdmaTransport an agent should use for one request.

    ``agent_options``: the agent's own ``--rdma-device/--rdma-port/--gid-index/
    --rdma-qp-timeout`` (default: ``NETQUAL_RDMA_*``). ``run``: the run's options from the
    probe request (``probe``/``run`` flags, already decoded): they override this agent's
    own and are sent to the responder.
    ``peer``: the responder's choices when they differ from ours (per-NIC probes).
    """
    base = agent_options if agent_options is not None else RdmaOptions.from_env()
    if peer is not None:  # a probe between two NICs: each side opens its own device
        own = base if run is None else run.over(base)
        return RdmaTransport(options=own, peer_options=peer, node_name=node_name)
    if run is None or run.empty:
        return RdmaTransport(options=base, peer_options=None, node_name=node_name)
    return RdmaTransport(options=run.over(base), peer_options=run, node_name=node_name)


__all__ = ["RdmaTransport", "transport_for_agent"]
