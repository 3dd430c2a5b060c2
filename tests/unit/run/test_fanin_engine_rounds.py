"""The rounds of a fan-in level read through the fetch engine (``run.fanin_engine
.measure_level``): a level the knee rule leaves undecided against the engine's first level,
that more chunks could decide (``analysis.fanin.more_decides``), is read again and pooled,
up to ``run.fanin.MAX_ROUNDS``, as the probe's levels are; a decided level, a failed one or
one whose engines fell back is read once. With ``--engine-require`` the fallback makes the
level not measured (configuration). The round itself (agents, engine workers) is faked:
this is the loop's rule, one layer."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from netqual.analysis import fanin, fanin_engine
from netqual.analysis.fanin_engine import ReaderRead
from netqual.model.engine import EngineName, EnginePlan, EngineTransport
from netqual.model.fanin import Call, FaninConfig, FaninLevel
from netqual.model.node import Node, Role
from netqual.model.path import RawBulk
from netqual.run import fanin_engine as run_fe
from netqual.run.fanin import MAX_ROUNDS

ST = Node("st1", "10.0.0.1", role=Role.STORAGE)
READERS = [Node("c0", "10.0.1.1"), Node("c1", "10.0.1.2")]
KIB = 1024
US = 1_000  # ns


def cell(times_us: Sequence[float], start_ms: float = 0.0) -> RawBulk:
    done = (np.asarray(times_us) * US).astype(np.int64)
    return RawBulk(256 * KIB, 1, done, int(done.sum()), started_ns=int(start_ms * 1e6))


def read(node: Node, times_us: Sequence[float], **over: object) -> ReaderRead:
    moved = {"to-sw": 256 * KIB * len(times_us)}
    kw: dict[str, object] = {"transport": EngineTransport.TCP, "moved": moved, "intended": None}
    kw.update(over)
    return ReaderRead(node.name, cell(times_us), None, **kw)  # type: ignore[arg-type]


BASE = fanin_engine.level(ST, READERS[:1], [read(READERS[0], [1000.0] * 200)], EngineTransport.TCP)
# two of a hundred chunks a reader at 3 ms, the rest at 1.9 ms: the p99 sits just under 2x
# the first level's 1 ms, its interval reaches past it: undecided, and more chunks decide
CLOSE = [1900.0] * 98 + [3000.0] * 2
SWEEP = run_fe.EngineSweep(EnginePlan(EngineName.MOONCAKE, 256 * KIB, (1,)), None)
CFG = FaninConfig((1, 2), chunk_bytes=256 * KIB, chunks=100)


def fake_rounds(
    monkeypatch: pytest.MonkeyPatch, per_round: Sequence[list[ReaderRead]]
) -> list[int]:
    """``_round`` answers the given rounds in turn; returns the list it counts them in."""
    calls: list[int] = []

    def one(
        storage: Node, readers: Sequence[Node], cfg: FaninConfig, ctx: run_fe.EngineSweep
    ) -> tuple[list[ReaderRead], Mapping[str, int] | None, str | None]:
        calls.append(len(calls))
        reads = per_round[len(calls) - 1]
        return reads, {"to-sw": sum(r.moved.get("to-sw", 0) for r in reads)}, "m 0.3"

    monkeypatch.setattr(run_fe, "_round", one)
    return calls


def test_an_undecided_level_is_read_again_up_to_the_probes_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = fanin_engine.level(
        ST, READERS, [read(READERS[0], CLOSE), read(READERS[1], CLOSE)], EngineTransport.TCP
    )
    assert fanin.call_levels([BASE.level, first.level], 2.0)[1].call is Call.UNDECIDED
    assert fanin.more_decides(BASE.level, first.level, 2.0)
    rounds = [[read(READERS[0], CLOSE), read(READERS[1], CLOSE)] for _ in range(MAX_ROUNDS + 2)]
    calls = fake_rounds(monkeypatch, rounds)
    lv, version = run_fe.measure_level(ST, READERS, CFG, SWEEP, BASE.level, 2.0)
    assert len(calls) == MAX_ROUNDS == lv.level.rounds and version == "m 0.3"
    assert lv.level.chunk is not None and lv.level.chunk.samples == MAX_ROUNDS * 200
    assert lv.storage_carried_by == "to-sw" and lv.configuration is None


def test_a_decided_level_the_first_level_and_a_failed_one_are_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = [[read(READERS[0], [1100.0] * 100), read(READERS[1], [1100.0] * 100)]] * 3
    calls = fake_rounds(monkeypatch, fast)
    lv, _ = run_fe.measure_level(ST, READERS, CFG, SWEEP, BASE.level, 2.0)
    assert len(calls) == 1 and lv.level.rounds == 1  # surely within: decided
    calls = fake_rounds(monkeypatch, [[read(READERS[0], CLOSE)]] * 3)
    lv, _ = run_fe.measure_level(ST, READERS[:1], CFG, SWEEP, None, 2.0)
    assert len(calls) == 1  # the first level: nothing to call it against
    failed = [[read(READERS[0], CLOSE), ReaderRead("c1", None, "worker crashed")]] * 3
    calls = fake_rounds(monkeypatch, failed)
    lv, _ = run_fe.measure_level(ST, READERS, CFG, SWEEP, BASE.level, 2.0)
    assert len(calls) == 1 and lv.level.errors == ("c1: worker crashed",)


def test_with_engine_require_a_level_that_fell_back_is_read_once_and_not_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = EnginePlan(
        EngineName.MOONCAKE, 256 * KIB, (1,), want=EngineTransport.RDMA,
        require=EngineTransport.RDMA,
    )  # fmt: skip
    sweep = run_fe.EngineSweep(plan, None)
    tcp = [[read(READERS[0], CLOSE, claimed=("installed transport: tcp",)),
            read(READERS[1], CLOSE)]] * 3  # fmt: skip
    calls = fake_rounds(monkeypatch, tcp)
    lv, _ = run_fe.measure_level(ST, READERS, CFG, sweep, BASE.level, 2.0)
    assert len(calls) == 1
    assert lv.configuration == (
        "--engine-require rdma: mooncake read on c0: moved over tcp, not rdma (installed "
        "transport: tcp)"
    )
    assert lv.level == FaninLevel(
        2, None, nodes=("c0", "c1"), skipped=f"not measured (configuration): {lv.configuration}"
    )
    # the same fallback without --engine-require: measured, the fallback its evidence
    calls = fake_rounds(monkeypatch, tcp)
    asked = run_fe.EngineSweep(EnginePlan(EngineName.MOONCAKE, 256 * KIB, (1,),
                                          want=EngineTransport.RDMA), None)  # fmt: skip
    lv, _ = run_fe.measure_level(ST, READERS, CFG, asked, BASE.level, 2.0)
    assert lv.configuration is None and lv.level.chunk is not None
    assert lv.fallback is not None and lv.fallback.startswith("c0: moved over tcp, not rdma")


def test_a_resumed_sweep_keeps_measured_levels_and_reads_a_refused_one_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--resume: a level the journal holds is kept; one not measured (configuration) is read
    again, as a path refused for its configuration is (its cells are not journalled)."""
    one = fanin_engine.level(ST, READERS[:1], [read(READERS[0], [1000.0] * 100)],
                             EngineTransport.TCP)  # fmt: skip
    fell = fanin_engine.level(
        ST, READERS, [read(READERS[0], CLOSE), read(READERS[1], CLOSE)], EngineTransport.RDMA
    )
    refused = fanin_engine.refused(fell, EngineName.MOONCAKE, EngineTransport.RDMA)
    assert refused.configuration is not None
    probe = fanin.judge("st1", "plain", 256 * KIB, 2.0, [])
    calls = fake_rounds(monkeypatch, [[read(READERS[0], [1100.0] * 100),
                                       read(READERS[1], [1100.0] * 100)]])  # fmt: skip
    heard: list[int] = []
    (got,) = run_fe.sweep(
        [ST, *READERS], CFG, SWEEP, [probe], lambda s, lv: heard.append(lv.readers),
        {("st1", 1): one, ("st1", 2): refused},
    )  # fmt: skip
    assert len(calls) == 1 and heard == [2]  # level 1 kept, level 2 read again
    assert got.engine is not None
    assert got.engine.levels[0].level == dataclasses.replace(one.level, call=Call.BASE)
    assert got.engine.levels[1].configuration is None and got.engine.levels[1].level.chunk
