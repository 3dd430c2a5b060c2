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
from netqual.model.fanin import EngineFanin, EngineFaninLevel, FaninLevel, FaninResult
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
    per_node = [[r.cell] if r.cell is not None and r.error is None else [] for r in reads]
    errors = [*failed, *(f"{r.node}: {r.error}" for r in reads if r.error is not None)]
    lv = fanin.level(storage, readers, per_node, errors, ranks_in_step=False)
    answered = [r for r in reads if r.cell is not None and r.error is None]
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
    ready = [r.ready_s for r in reads if r.ready_s is not None]
    return EngineFaninLevel(
        level=lv,
        transports=tuple(dict.fromkeys(r.transport.value for r in answered)),
        carried_by=tuple(dict.fromkeys(carried)),
        storage_carried_by=engine_rules.carrier(storage_moved or {}, total),
        fallback=fallback,
        ready_s=max(ready) if ready else None,
    )


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
    factor, the engine's own first level as the base), each set beside the probe's."""
    alone = fanin.judge(
        probe.storage, probe.profile, probe.chunk_bytes, probe.knee_factor,
        [lv.level for lv in levels],
    )  # fmt: skip
    called = tuple(
        dataclasses.replace(lv, level=c, vs_probe=vs_probe(c, probe.levels))
        for lv, c in zip(levels, alone.levels, strict=True)
    )
    return EngineFanin(engine, version, called, alone.knee, alone.safe_up_to, alone.verdict)
