"""The responder's side of an RDMA session (``rdma.connect`` after its checks): open the
device, connect the QP (or a fetch profile's QPs), answer ``rdma.connected``, echo the
ping-pong, then wait for ``rdma.close`` while the initiator READs the bulk area (no CPU
here). The conversation is described in transport.py.
"""

from __future__ import annotations

import logging

from netqual.agent.wire.protocol import Channel
from netqual.base.errors import ErrorCode, NetqualError, ProbeError
from netqual.transports import integrity
from netqual.transports.rdma import devices, pingpong, verbs
from netqual.transports.rdma import tags as rdma_tags
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.gid import GidSelectionError, ip_family
from netqual.transports.rdma.options import RdmaOptions
from netqual.transports.rdma.session import SessionPlan, local_ip_of, say_stopped

CLOSE_TIMEOUT_S = 10.0
log = logging.getLogger("netqual.transports.rdma.transport")  # where the session's go


def serve(
    channel: Channel,
    node_name: str,
    *,
    pv: verbs.Pyverbs,
    found: tuple[devices.DeviceInfo, ...],
    options: RdmaOptions,
    peer: ConnInfo,
    cells: SessionPlan,
    deadline: float,
    tags: rdma_tags.Tags,
) -> None:
    local_ip = local_ip_of(channel)
    try:
        sel = devices.choose(
            found,
            options,
            local_ip=local_ip,
            family=ip_family(local_ip),
            want_type=peer.gid_type,
        )
        ep = Endpoint(
            pv,
            sel,
            msg_bytes=cells.size_bytes,
            bulk_bytes=cells.max_chunk_bytes,
            send_wr=64,
            qps=cells.qps,
            qp_timeout=options.qp_timeout,  # the run's, over this agent's own
        )
    except (GidSelectionError, ProbeError) as err:
        channel.send_error(ErrorCode.RDMA, f"rdma on {node_name}: {err}")
        return
    rounds = 0
    try:
        rdma_tags.fill_bulk(tags, ep.buf + ep.bulk_offset)  # what its READs return
        try:
            ep.connect(peer)
        except (GidSelectionError, ProbeError) as err:
            channel.send_error(ErrorCode.RDMA, f"rdma on {node_name}: {err}")
            return
        channel.send(
            "rdma.connected",
            {
                "conninfo": ep.conninfo().to_json(),
                "details": {
                    "node": node_name,
                    "device": sel.device.name,
                    "port": sel.port.num,
                    "gid_index": sel.gid.entry.index,
                    "gid_type": sel.gid.entry.gid_type.value,
                    "active_mtu_bytes": sel.port.mtu_bytes,
                    "qp_timeout": ep.qp_timeout,
                    "pingpong_loop": pingpong.loop_name(ep),
                },
            },
        )
        try:
            rounds = pingpong.respond(
                ep,
                peer,
                rounds=cells.rounds,
                size=cells.size_bytes,
                deadline=deadline,
                abort=channel.sock,
                tags=tags,
            )
        except (ProbeError, pv.error) as err:
            # Tell the initiator at once: it spins on its receive byte and would
            # otherwise wait for a reply that never comes until its own deadline.
            log.info("rdma responder for %s stopped: %s", channel.peer, err)
            say_stopped(channel, err)
            rounds = -1
        _await_close(channel, deadline, rounds, tags)
    finally:
        ep.close()


def _await_close(channel: Channel, deadline: float, rounds: int, tags: rdma_tags.Tags) -> None:
    """After a full ping-pong, the initiator's ``rdma.pingpong.end`` (the tagged rounds'
    challenges compared); bulk reads need no CPU here: wait for ``rdma.close``, then let
    the caller tear down."""
    try:
        channel.set_deadline(deadline + CLOSE_TIMEOUT_S)
        msg = channel.recv()
        if msg.kind == rdma_tags.END:
            got = tags.got.tobytes()
            integrity.answer_end(channel, rdma_tags.END, got, "rdma ping-pong", msg)
            msg = channel.recv()
    except (NetqualError, OSError):
        return
    if msg.kind == "rdma.close":
        channel.send("rdma.closed", {"rounds": rounds})
    else:
        channel.send_error(ErrorCode.PROTOCOL, f"expected 'rdma.close', got {msg.kind!r}")
