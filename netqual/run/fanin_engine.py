"""The fan-in sweep through the fetch engine (``run --fanin --engine``, docs/fanin.md
"Through the fetch engine"): at each level, the storage node's agent runs one engine
target and each reader's agent one initiator worker (``netqual.agent.engine_request``)
that READs the fan-in chunk from it, one chunk after another.

The readers start together: each reader's agent answers ``engine.ready`` once its worker
is connected and has read one chunk; when every reader has (or failed), the coordinator
sends each ``engine.go``, and only then are the READs timed. So the engines' start-up
(seconds) never staggers the readers, and the level's aggregate is taken while they all
read, as the probe's levels are (``analysis.fanin_engine``). A worker that fails, or a
target that cannot start, is the level's data (its ``errors``), never the run's failure.

It runs after the probe's sweep, one storage node and one level at a time, bounded: at
most ``MAX_CHUNKS`` chunks per reader a round, at most ``run.fanin.MAX_ROUNDS`` rounds of a
level the knee rule leaves undecided (as the probe's), each exchange within the engines'
start, barrier and operation timeouts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from netqual.agent.engine_request import (
    EngineSpec,
    InitiateRequest,
    InitiatorReply,
    TargetReady,
    expect,
)
from netqual.agent.engine_serve import BARRIER_S, START_S
from netqual.agent.wire.protocol import Channel
from netqual.analysis import engine as engine_rules
from netqual.analysis import fanin, fanin_engine
from netqual.analysis.fanin_engine import ReaderRead
from netqual.base.errors import NetqualError, PeerError
from netqual.model.engine import EngineName, EngineOp, EnginePlan, EngineTransport
from netqual.model.fanin import EngineFaninLevel, FaninConfig, FaninLevel, FaninResult
from netqual.model.node import Node
from netqual.model.path import RawBulk
from netqual.run import engine_cells
from netqual.run.fanin import MAX_ROUNDS, readers_order

MAX_CHUNKS = engine_cells.MAX_OPS  # READs per reader per level (--fanin-chunks, at most)
SLACK_S = 30.0  # beyond an agent's own bounds, before the coordinator gives up on it


@dataclass(frozen=True)
class EngineSweep:
    """What the engine's levels need of the run."""

    plan: EnginePlan  # the engine, the transport it is held to, the operations' timeout
    token: bytes | None
    rdma_device: str | None = None  # the run's --rdma-device (the engine's device filter)


def sweep(
    nodes: Sequence[Node],
    cfg: FaninConfig,
    ctx: EngineSweep,
    probe: Sequence[FaninResult],
    on_level: Callable[[str, EngineFaninLevel], None] | None = None,
    done: Mapping[tuple[str, int], EngineFaninLevel] | None = None,
) -> tuple[FaninResult, ...]:
    """Each storage node's probe sweep with its levels through the engine beside it
    (``FaninResult.engine``); ``done``: levels a resumed run has."""
    order = readers_order(nodes)
    by_name = {n.name: n for n in nodes}
    out = []
    for result in probe:
        storage = by_name[result.storage]
        levels: list[EngineFaninLevel] = []
        version = None
        for k in cfg.levels:
            if k > len(order):
                skipped = FaninLevel(k, None, skipped=f"only {len(order)} compute nodes")
                levels.append(EngineFaninLevel(skipped))
                continue
            kept = (done or {}).get((storage.name, k))
            if kept is not None and kept.configuration is None:  # a refused one: again
                levels.append(kept)
                continue
            base = next((b.level for b in levels if b.level.chunk is not None), None)
            lv, said = measure_level(storage, order[:k], cfg, ctx, base, result.knee_factor)
            version = version or said
            levels.append(lv)
            if on_level is not None:
                on_level(storage.name, lv)
        engine = fanin_engine.judge(ctx.plan.name, version, result, levels)
        out.append(dataclasses.replace(result, engine=engine))
    return tuple(out)


@dataclass
class _Reader:
    """A reader whose worker is ready at the barrier: its open session and request."""

    node: Node
    ch: Channel
    request: InitiateRequest
    ready_s: float


def _spec(name: EngineName, me: Node, peer: Node, cfg: FaninConfig, ctx: EngineSweep) -> EngineSpec:
    want = ctx.plan.want if ctx.plan.want is not EngineTransport.SHM else EngineTransport.TCP
    return EngineSpec(
        engine=name,
        address=me.address,
        peer_address=peer.address,
        chunk_bytes=cfg.chunk_bytes,
        depths=(1,),  # a fan-in rank asks its next chunk when the last has arrived
        timeout_s=ctx.plan.timeout_s,
        want=want,
        rdma_device=engine_cells.device_filter(me, ctx.rdma_device),
    )


def measure_level(
    storage: Node,
    readers: Sequence[Node],
    cfg: FaninConfig,
    ctx: EngineSweep,
    base: FaninLevel | None = None,
    knee_factor: float = 2.0,
) -> tuple[EngineFaninLevel, str | None]:
    """One level: a round (the storage node's target, every reader's worker started and
    connected, then released together); while the knee rule cannot call the level against
    ``base`` (the engine's first measured level) and more chunks could, another round, up
    to ``fanin.MAX_ROUNDS``, pooled, as the probe's levels are (``run.fanin``). With
    ``--engine-require``, a level whose engines fell back is not measured (configuration).
    (The level, the engine's version as its target said.)"""
    name, want = ctx.plan.name, ctx.plan.expected
    rounds: list[list[ReaderRead]] = []
    moved: list[Mapping[str, int]] = []
    version = None
    while True:
        reads, bye_moved, said = _round(storage, readers, cfg, ctx)
        version = version or said
        rounds.append(reads)
        moved.append(bye_moved or {})
        lv = fanin_engine.level_of_rounds(storage, readers, rounds, want, moved)
        if base is None or len(rounds) >= MAX_ROUNDS or lv.level.errors or lv.fallback:
            break
        if not fanin.more_decides(base, lv.level, knee_factor):
            break
    return fanin_engine.refused(lv, name, ctx.plan.require), version


def _round(
    storage: Node, readers: Sequence[Node], cfg: FaninConfig, ctx: EngineSweep
) -> tuple[list[ReaderRead], Mapping[str, int] | None, str | None]:
    """One round of a level: (each reader's reads, the storage node's counters over them,
    the engine's version as its target said). A target that never started fails every
    reader."""
    name = ctx.plan.name
    t0 = time.monotonic()
    t_spec = _spec(name, storage, readers[0], cfg, ctx)
    try:
        target = engine_cells.open_channel(storage, ctx.token)
    except (NetqualError, OSError) as err:
        return _no_target(storage, readers, f"agent: {err}"), None, None
    with target:
        try:
            target.set_timeout(START_S + SLACK_S)
            target.send("engine.target", t_spec.to_body())
            ready = TargetReady.decode(
                expect(target, "engine.descriptor"),
                _spec(name, readers[0], storage, cfg, ctx),
                storage.name,
            )
        except PeerError as err:
            return _no_target(storage, readers, err.message), None, None
        except (NetqualError, OSError, TimeoutError) as err:
            return _no_target(storage, readers, str(err)), None, None
        chunks = min(cfg.chunks, MAX_CHUNKS)

        def start(r: Node) -> _Reader | str:
            spec = _spec(name, r, storage, cfg, ctx)
            req = InitiateRequest(spec, 0, chunks, ready.descriptor, (EngineOp.READ,), True)
            try:
                ch = engine_cells.open_channel(r, ctx.token)
            except (NetqualError, OSError) as err:
                return str(err)
            try:
                ch.set_timeout(START_S + SLACK_S)
                ch.send("engine.initiate", req.to_body())
                expect(ch, "engine.ready")
                return _Reader(r, ch, req, time.monotonic() - t0)
            except PeerError as err:
                ch.close()
                return err.message
            except (NetqualError, OSError, TimeoutError) as err:
                ch.close()
                return str(err)

        with ThreadPoolExecutor(max_workers=len(readers)) as pool:
            started = list(pool.map(start, readers))
            released = [_go(s) if isinstance(s, _Reader) else s for s in started]
            answers = list(pool.map(_answer, released))
        bye = engine_cells.stop_target(target, storage.name)
    reads = [
        _read(r, a, s.ready_s if isinstance(s, _Reader) else None, cfg.chunk_bytes, name)
        for r, s, a in zip(readers, started, answers, strict=True)
    ]
    return reads, (bye.moved if bye is not None else None), ready.descriptor.version


def _go(r: _Reader) -> _Reader | str:
    """Release one ready reader (every reader is ready or failed by now)."""
    try:
        r.ch.send("engine.go")
        return r
    except (NetqualError, OSError) as err:
        r.ch.close()
        return f"not released: {err}"


def _answer(r: _Reader | str) -> InitiatorReply | str:
    """A released reader's answer, or why it has none."""
    if isinstance(r, str):
        return r
    with r.ch as ch:
        try:
            ch.set_timeout(BARRIER_S + r.request.spec.timeout_s + SLACK_S)
            reply = InitiatorReply.receive(ch, expect(ch, "engine.result"), r.request)
            with contextlib.suppress(NetqualError, OSError):
                ch.send("bye")
            return reply
        except PeerError as err:
            return err.message
        except (NetqualError, OSError, TimeoutError) as err:
            return str(err)


def _read(
    node: Node,
    answer: InitiatorReply | str,
    ready_s: float | None,
    chunk_bytes: int,
    name: EngineName,
) -> ReaderRead:
    """One reader's part of the level: its READs placed on this clock, and its evidence."""
    if isinstance(answer, str):
        return ReaderRead(node.name, None, answer, ready_s=ready_s)
    o = next((o for o in answer.ops if o.op is EngineOp.READ and o.depth == 1), None)
    if o is None:
        return ReaderRead(node.name, None, answer.error or "no READ reported", ready_s=ready_s)
    started = None if o.ended_ns is None else o.ended_ns - o.elapsed_ns
    cell = RawBulk(chunk_bytes, 1, o.completion_ns, o.elapsed_ns, o.error, started)
    error = o.error
    if error is None and o.data_ok is False:
        error = "the data check failed (the bytes that arrived are not the target's)"
    if error is None and not len(o.completion_ns):
        error = answer.error or "no READ completed"
    claimed = tuple(o.lanes) if name is EngineName.NIXL else answer.claimed
    transport = o.transport
    carried = engine_rules.carrier(o.moved, chunk_bytes * len(o.completion_ns))
    if transport is EngineTransport.UNKNOWN and carried and not carried.startswith("rdma:"):
        transport = EngineTransport.TCP  # the engine said nothing; an IP interface moved it
    return ReaderRead(node.name, cell, error, transport, claimed, o.moved, answer.intended, ready_s)


def _no_target(storage: Node, readers: Sequence[Node], why: str) -> list[ReaderRead]:
    """A round whose target never started: every reader failed for it."""
    return [ReaderRead(r.name, None, f"target on {storage.name}: {why}") for r in readers]
