"""Fan-in levels read through a fetch engine (``run --fanin --engine``, docs/fanin.md
"Through the fetch engine"): each reader's READs reduced exactly as a probe rank's
(``analysis.fanin.level``: chunk completion, busy time, the aggregate while every reader
was reading), the evidence of what the engines used, the level's ratio to the probe's
level at the same readers, and the knee rule over the levels.

Pure functions over records: the coordinator (``run.fanin_engine``) builds one
``ReaderRead`` per reader from what its agent answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from netqual.analysis import engine as engine_rules
from netqual.analysis import fanin
from netqual.model.engine import EngineName, EngineTransport
from netqual.model.fanin import Call, EngineFanin, EngineFaninLevel, FaninLevel, FaninResult
from netqual.model.node import Node
from netqual.model.path import RawBulk


@dataclass(frozen=True)
class ReaderRead:
    """One reader's engine worker at a level. ``cell``: its timed READs (depth 1, one
    chunk after another) placed on the coordinator's clock; None when it failed before
    any (``error`` says why). ``moved``: its interfaces' byte counters over the READs."""

    node: str
    cell: RawBulk | None
    error: str | None = None
    transport: EngineTransport = EngineTransport.UNKNOWN
    claimed: tuple[str, ...] = ()
    moved: Mapping[str, int] = dataclasses.field(default_factory=dict)
    intended: str | None = None  # the reader's interface towards the storage node
    ready_s: float | None = None  # the level's first request -> this reader ready


def level(
    storage: Node,
    readers: Sequence[Node],
    reads: Sequence[ReaderRead],
    want: EngineTransport,
    storage_moved: Mapping[str, int] | None = None,
    failed: Sequence[str] = (),
) -> EngineFaninLevel:
    """One level from its readers' reads (``reads[i]`` is ``readers[i]``'s); ``failed``:
    why the whole level failed (its target), beside each reader's own error."""
    return level_of_rounds(storage, readers, [reads], want, [storage_moved or {}], failed)


def level_of_rounds(
    storage: Node,
    readers: Sequence[Node],
    rounds: Sequence[Sequence[ReaderRead]],
    want: EngineTransport,
    storage_moved: Sequence[Mapping[str, int]] = (),
    failed: Sequence[str] = (),
) -> EngineFaninLevel:
    """One level read in one or more rounds (``rounds[r][i]``: reader i's reads in round
    r), pooled as the probe's rounds are (``analysis.fanin.level_of_rounds``); the
    evidence of every round, the storage node's counters of every round added up."""
    per_round = [
        [[r.cell] if r.cell is not None and r.error is None else [] for r in reads]
        for reads in rounds
    ]
    every = [r for reads in rounds for r in reads]
    errors = [*failed, *(f"{r.node}: {r.error}" for r in every if r.error is not None)]
    lv = fanin.level_of_rounds(storage, readers, per_round, errors, ranks_in_step=False)
    answered = [r for r in every if r.cell is not None and r.error is None]
    fallback = None
    carried: list[str] = []
    for r in answered:
        assert r.cell is not None
        need = r.cell.chunk_bytes * len(r.cell.completion_ns)
        by = engine_rules.carrier(r.moved, need)
        split = engine_rules.carriers(r.moved, need)
        if by is not None:
            carried.append(by)
        why = engine_rules.fallback(
            want, r.transport, r.claimed, by, r.intended, split if len(split) > 1 else ()
        )
        if why is not None and fallback is None:
            fallback = f"{r.node}: {why}"
    total = sum(len(r.cell.completion_ns) * r.cell.chunk_bytes for r in answered if r.cell)
    moved: dict[str, int] = {}
    for m in storage_moved:
        for k, v in m.items():
            moved[k] = moved.get(k, 0) + v
    ready = [r.ready_s for r in every if r.ready_s is not None]
    return EngineFaninLevel(
        level=lv,
        transports=tuple(dict.fromkeys(r.transport.value for r in answered)),
        carried_by=tuple(dict.fromkeys(carried)),
        storage_carried_by=engine_rules.carrier(moved, total),
        fallback=fallback,
        ready_s=max(ready) if ready else None,
    )


NOT_MEASURED = "not measured (configuration)"


def refused(
    lv: EngineFaninLevel, engine: EngineName, require: EngineTransport | None
) -> EngineFaninLevel:
    """With ``--engine-require``, a level whose readers' engines fell back is not measured
    (configuration), as a path's engine cells make their path: its chunks are dropped (the
    engine did not move them as the deployment must), its evidence and errors kept, and
    ``configuration`` names the fallback. Without it, or without a fallback: as it was."""
    if require is None or lv.fallback is None:
        return lv
    why = f"--engine-require {require.value}: {engine.value} read on {lv.fallback}"
    old = lv.level
    gone = FaninLevel(
        old.readers, None, nodes=old.nodes, shared_uplinks=old.shared_uplinks,
        errors=old.errors, skipped=f"{NOT_MEASURED}: {why}", rounds=old.rounds,
    )  # fmt: skip
    return dataclasses.replace(lv, level=gone, vs_probe=None, configuration=why)


def vs_probe(engine_level: FaninLevel, probe: Sequence[FaninLevel]) -> float | None:
    """The engine level's chunk p50 over the probe's level with as many readers (None when
    either has no chunk)."""
    same = next((p for p in probe if p.readers == engine_level.readers), None)
    if same is None or same.chunk is None or engine_level.chunk is None:
        return None
    if same.chunk.p50_us <= 0:
        return None
    return engine_level.chunk.p50_us / same.chunk.p50_us


def judge(
    engine: EngineName,
    version: str | None,
    probe: FaninResult,
    levels: Sequence[EngineFaninLevel],
) -> EngineFanin:
    """The engine's levels judged by the knee rule (``analysis.fanin.judge``, the probe's
    factor, the engine's own first level as the base), each set beside the probe's. A
    level not measured (configuration) ends "safe up to" below it, and the verdict says so
    first."""
    alone = fanin.judge(
        probe.storage, probe.profile, probe.chunk_bytes, probe.knee_factor,
        [lv.level for lv in levels],
    )  # fmt: skip
    called = tuple(
        dataclasses.replace(lv, level=c, vs_probe=vs_probe(c, probe.levels))
        for lv, c in zip(levels, alone.levels, strict=True)
    )
    gone = [lv for lv in called if lv.configuration is not None]
    if not gone:
        return EngineFanin(engine, version, called, alone.knee, alone.safe_up_to, alone.verdict)
    first = min(lv.readers for lv in gone)
    safe = alone.safe_up_to
    if safe is not None and safe >= first:
        below = [
            lv.readers
            for lv in called
            if lv.readers < first and lv.level.call in (Call.BASE, Call.WITHIN)
        ]
        safe = max(below, default=None)
    knee = alone.knee if alone.knee is not None and alone.knee < first else None
    at = ", ".join(str(lv.readers) for lv in gone)
    verdict = f"{NOT_MEASURED} at {at} reader{'s' if at != '1' else ''}: {gone[0].configuration}"
    if any(lv.level.chunk is not None for lv in called):
        verdict += f"; the levels measured: {alone.verdict}"
    return EngineFanin(engine, version, called, knee, safe, verdict)


def as_sweep(r: FaninResult) -> FaninResult | None:
    """The storage node's levels through the engine as a sweep of their own (the engine's
    levels, knee, "safe up to" and verdict), for the rules that judge a sweep (the
    decision's, ``analysis.evidence.fanin.judge_sweep``); None without them."""
    e = r.engine
    if e is None:
        return None
    return dataclasses.replace(
        r, levels=tuple(lv.level for lv in e.levels), knee=e.knee, safe_up_to=e.safe_up_to,
        verdict=e.verdict, uplinks_cleared_by=None, uplinks_implicated_by=(), engine=None,
    )  # fmt: skip


def slowest(e: EngineFanin, limit: float) -> tuple[EngineFaninLevel, int] | None:
    """The engine level furthest above ``limit`` x the probe's chunk p50 at as many readers,
    and how many levels are above it; None when none is."""
    over = [lv for lv in e.levels if lv.vs_probe is not None and lv.vs_probe > limit]
    if not over:
        return None
    return max(over, key=lambda lv: lv.vs_probe or 0.0), len(over)


def level_cause(lv: EngineFaninLevel, engine: EngineName) -> str:
    """The most specific cause a slow engine level's evidence shows (a path's cell:
    ``analysis.engine.likely_cause``)."""
    if lv.fallback:
        return lv.fallback
    if lv.transports == (EngineTransport.TCP.value,):
        return f"the engine's own TCP path ({engine.value}): the fabric is not the limit"
    return "the engine's own cost per chunk, on the transport the probe measured"
