"""A path's fetch engine cells (``--engine``, docs/engines.md): the three exchanges with
its two agents (``netqual.agent.engine_request``), and the cells built from what came back,
judged for fallback and set beside netqual's own bulk cell (``vs_probe``).

A failed engine is data (a cell with ``error``); an engine a node lacks, or a fallback
from ``--engine-require``, is a configuration failure of the path (``configuration``): the
run lists the pair as not measured, never as an unsafe path.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.agent.engine_request import (
    EngineSpec,
    InitiateRequest,
    InitiatorReply,
    OpReply,
    TargetBye,
    TargetReady,
    expect,
)
from netqual.agent.engine_serve import START_S, STOP_S
from netqual.agent.wire.protocol import Channel, connect
from netqual.analysis import engine as judge
from netqual.analysis.stats import bulk_stats
from netqual.base.errors import ErrorCode, NetqualError, PeerError
from netqual.model.engine import (
    EngineCell,
    EngineEvidence,
    EngineName,
    EngineOp,
    EnginePlan,
    EngineTransport,
)
from netqual.model.node import Node
from netqual.model.path import RawBulk
from netqual.model.plan import ProbePlan
from netqual.model.stats import BulkStats
from netqual.model.workload import Workload

MAX_OPS = 500  # kept operations per cell: an engine's time per chunk is ms on TCP
CONNECT_S = 10.0


def plan_for(
    name: EngineName,
    plan: ProbePlan,
    want: EngineTransport,
    require: EngineTransport | None = None,
    workload: Workload | None = None,
    pin: bool = False,
) -> EnginePlan:
    """The engine cells of a run: the workload's chunk (else the first ``--chunk``) at each
    ``--depth``; as many operations as the probe's bulk cell reads, at most ``MAX_OPS``,
    a tenth of them (at least 4) as warm-up, within the plan's timeout."""
    chunk = workload.chunk_bytes if workload is not None else plan.chunks_bytes[0]
    ops = min(plan.reads_for(chunk), MAX_OPS)
    return EnginePlan(
        name, chunk, tuple(dict.fromkeys(plan.depths))[:8], want, require,
        max(4, ops // 10), ops, plan.timeout_s, pin,
    )  # fmt: skip


@dataclass(frozen=True)
class EngineOutcome:
    """The cells of one path, or why the path is not measured (configuration)."""

    cells: tuple[EngineCell, ...] = ()
    configuration: str | None = None


def _spec(eplan: EnginePlan, me: Node, peer: Node, device: str | None) -> EngineSpec:
    return EngineSpec(
        engine=eplan.name,
        address=me.address,
        peer_address=peer.address,
        chunk_bytes=eplan.chunk_bytes,
        depths=eplan.depths,
        timeout_s=eplan.timeout_s,
        want=eplan.want if eplan.want is not EngineTransport.SHM else EngineTransport.TCP,
        pin=eplan.pin,
        rdma_device=device,
    )


def open_channel(node: Node, token: bytes | None) -> Channel:
    """A session with ``node``'s agent, for one engine exchange."""
    ch, _ = connect(
        node.control_address, node.port, token, node.name, CONNECT_S, expect_name=node.identity
    )
    return ch


def measure(
    src: Node,
    dst: Node,
    eplan: EnginePlan,
    token: bytes | None,
    bulk: Sequence[BulkStats] = (),
    rdma_device: str | None = None,
) -> EngineOutcome:
    """The engine cells of the path ``src`` -> ``dst``: ``dst`` is the target (the data's
    home, as the probe's responder), ``src`` reads and writes it. ``bulk``: the path's own
    bulk cells (``vs_probe``)."""
    t_spec = _spec(eplan, dst, src, device_filter(dst, rdma_device))
    i_spec = _spec(eplan, src, dst, device_filter(src, rdma_device))
    try:
        target = open_channel(dst, token)
    except NetqualError as err:
        return _failed(eplan, f"target agent {dst.name}: {err}")
    with target:
        try:
            target.set_timeout(START_S + 30.0)
            target.send("engine.target", t_spec.to_body())
            ready = TargetReady.decode(expect(target, "engine.descriptor"), i_spec, dst.name)
        except PeerError as err:
            return _refused(eplan, err) or _failed(eplan, f"target on {dst.name}: {err.message}")
        except (NetqualError, OSError, TimeoutError) as err:
            return _failed(eplan, f"target on {dst.name}: {err}")
        request = InitiateRequest(i_spec, eplan.warmup, eplan.ops, ready.descriptor)
        reply: InitiatorReply | None = None
        failure: str | None = None
        try:
            with open_channel(src, token) as ch:
                ch.set_timeout(START_S + eplan.timeout_s + 30.0)
                ch.send("engine.initiate", request.to_body())
                reply = InitiatorReply.receive(ch, expect(ch, "engine.result"), request)
                with contextlib.suppress(NetqualError, OSError):
                    ch.send("bye")
        except PeerError as err:
            if (refused := _refused(eplan, err)) is not None:
                return refused
            failure = f"initiator on {src.name}: {err.message}"
        except (NetqualError, OSError, TimeoutError) as err:
            failure = f"initiator on {src.name}: {err}"
        bye = stop_target(target, dst.name)
    if reply is None:
        return _failed(eplan, failure or "no result")
    cells = build_cells(eplan, reply, ready, bye, src, dst, bulk)
    return EngineOutcome(cells, required(eplan, cells))


def device_filter(node: Node, run_device: str | None) -> str | None:
    """The RDMA device filter: the NIC's device (``--rails``), else the run's
    ``--rdma-device``, else none (the engine looks for itself)."""
    if node.nic is not None and node.nic.device:
        return node.nic.device
    return run_device


def stop_target(target: Channel, name: str) -> TargetBye | None:
    try:
        target.set_timeout(STOP_S + 10.0)
        target.send("engine.stop")
        bye = TargetBye.decode(expect(target, "engine.bye"), name)
        with contextlib.suppress(NetqualError, OSError):
            target.send("bye")
        return bye
    except (NetqualError, OSError, TimeoutError):
        return None  # its counters and the WRITE check are missing; the cells stand


def _refused(eplan: EnginePlan, err: PeerError) -> EngineOutcome | None:
    """An engine the node lacks (or an address it does not have): configuration."""
    if err.code is ErrorCode.UNAVAILABLE:
        return EngineOutcome(configuration=f"engine {eplan.name.value}: {err.message}")
    return None


def _failed(eplan: EnginePlan, why: str) -> EngineOutcome:
    """Every cell of the plan, failed for ``why`` (an engine failure is evidence)."""
    return EngineOutcome(
        tuple(
            EngineCell(
                eplan.name,
                None,
                op,
                eplan.chunk_bytes,
                depth,
                EngineTransport.UNKNOWN,
                None,
                error=why,
            )
            for op in EngineOp
            for depth in eplan.depths
        )
    )


def required(eplan: EnginePlan, cells: Sequence[EngineCell]) -> str | None:
    """With ``--engine-require``: the first cell that fell back from it, as the reason the
    path is not measured (configuration); None when every measured cell kept to it."""
    if eplan.require is None:
        return None
    for c in cells:
        if c.fallback is not None:
            return (
                f"--engine-require {eplan.require.value}: {c.name.value} {c.op.value} {c.fallback}"
            )
    return None


def build_cells(
    eplan: EnginePlan,
    reply: InitiatorReply,
    ready: TargetReady,
    bye: TargetBye | None,
    src: Node,
    dst: Node,
    bulk: Sequence[BulkStats] = (),
) -> tuple[EngineCell, ...]:
    """One cell per (operation, depth) asked: what the initiator reported, its evidence
    from both ends' counters, its fallback, and its ratio to the probe."""
    per_op = (eplan.warmup + eplan.ops + 1) * eplan.chunk_bytes  # first op + warm-up + kept
    total = per_op * len(reply.ops)
    peer_carrier = judge.carrier(bye.moved, total) if bye is not None else None
    intended = src.nic.name if eplan.pin and src.nic is not None else reply.intended
    peer_intended = dst.nic.name if eplan.pin and dst.nic is not None else ready.intended
    cells = []
    got = {(o.op, o.depth): o for o in reply.ops}
    for op in EngineOp:
        for depth in eplan.depths:
            o = got.get((op, depth))
            if o is None:
                why = reply.error or "the initiator did not report it"
                cells.append(
                    EngineCell(
                        eplan.name,
                        reply.version,
                        op,
                        eplan.chunk_bytes,
                        depth,
                        EngineTransport.UNKNOWN,
                        None,
                        error=why,
                    )
                )
                continue
            cells.append(
                _cell(
                    eplan, reply, ready, bye, o, per_op, intended, peer_intended, peer_carrier, bulk
                )
            )
    return tuple(cells)


def _cell(
    eplan: EnginePlan,
    reply: InitiatorReply,
    ready: TargetReady,
    bye: TargetBye | None,
    o: OpReply,
    need: int,
    intended: str | None,
    peer_intended: str | None,
    peer_carrier: str | None,
    bulk: Sequence[BulkStats],
) -> EngineCell:
    carried = judge.carrier(o.moved, need)
    split = judge.carriers(o.moved, need)
    transport = o.transport
    if transport is EngineTransport.UNKNOWN and carried and not carried.startswith("rdma:"):
        transport = EngineTransport.TCP  # the engine said nothing; an IP interface moved it
    device = carried or _lanedevice_filter(o.lanes)
    data_ok = o.data_ok if o.op is EngineOp.READ else (bye.written if bye else None)
    error = o.error
    if error is None and data_ok is False:
        error = f"{o.op.value}: the data check failed (the bytes that arrived are not the sent)"
    claimed = tuple(o.lanes) if eplan.name is EngineName.NIXL else reply.claimed
    fallback = judge.fallback(
        eplan.expected, transport, claimed or ready.descriptor.claimed, carried, intended,
        split if len(split) > 1 else (),
    )  # fmt: skip
    stats = None
    if len(o.completion_ns):
        stats = bulk_stats(RawBulk(eplan.chunk_bytes, o.depth, o.completion_ns, o.elapsed_ns))
    cell = EngineCell(
        name=eplan.name,
        version=reply.version,
        op=o.op,
        chunk_bytes=eplan.chunk_bytes,
        depth=o.depth,
        transport=transport,
        device=device,
        ops=len(o.completion_ns),
        completion_p50_us=stats.completion_p50_us if stats else None,
        completion_p99_us=stats.completion_p99_us if stats else None,
        goodput_gbps=stats.goodput_gbps if stats and stats.goodput_gbps > 0 else None,
        first_op_us=None if o.first_op_ns is None else o.first_op_ns / 1e3,
        fallback=fallback,
        error=error,
        evidence=EngineEvidence(
            claimed=claimed,
            carried_by=carried,
            peer_carried_by=peer_carrier,
            intended=intended,
            peer_intended=peer_intended,
            bytes_moved=need,
            settings=reply.settings,
            start_s=reply.start_s,
            peer_start_s=ready.descriptor.start_s,
            connect_us=reply.connect_us,
            data_ok=data_ok,
            worker_exit=reply.exit_note,
        ),
    )
    return dataclasses.replace(cell, vs_probe=judge.vs_probe(cell, bulk))


def _lanedevice_filter(lanes: Sequence[str]) -> str | None:
    from netqual.engines.ucxinfo import LANE

    devices = dict.fromkeys(m.group(2) for lane in lanes for m in LANE.finditer(lane))
    return "+".join(devices) or None
