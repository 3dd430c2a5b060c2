"""Fan-in levels read through a fetch engine (analysis.fanin_engine, docs/fanin.md
"Through the fetch engine"): each reader's READs reduced exactly as a probe rank's (the
aggregate while every reader read, busy time, per-reader spans), a failed worker kept as
the level's data, the evidence of what the engines used, the ratio to the probe's level,
the knee rule over the engine's own levels; and the records through results.json and
results.jsonl. Known answers, no agents."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from factories import make_results, write_results

from netqual.analysis import fanin, fanin_engine, fanin_table
from netqual.analysis.fanin_engine import ReaderRead
from netqual.model.engine import EngineName, EngineTransport
from netqual.model.fanin import Call, EngineFaninLevel, FaninLevel, FaninResult
from netqual.model.node import Node, Role
from netqual.model.path import RawBulk
from netqual.results import journal, load
from netqual.results.fanin_codec import from_list, to_list

MS = 1_000_000  # ns
MIB = 1 << 20
ST = Node("st1", "10.0.0.1", role=Role.STORAGE, rack="s1")
READERS = [Node(f"c{i}", f"10.0.1.{i}", rack="r1") for i in range(3)]


def reads(start_ms: float, end_ms: float, chunks: int = 100, slow_every: int = 0) -> RawBulk:
    """A reader's READs of 1 MiB chunks, one after another, between two instants on the
    coordinator's clock; every ``slow_every``-th chunk takes 5x the others."""
    done = np.ones(chunks)
    if slow_every:
        done[::slow_every] = 5.0
    done = (done / done.sum() * (end_ms - start_ms) * MS).astype(np.int64)
    return RawBulk(MIB, 1, done, int(done.sum()), started_ns=int(start_ms * MS))


def reader(i: int, cell: RawBulk | None, **over: object) -> ReaderRead:
    base = ReaderRead(
        READERS[i].name, cell, None, EngineTransport.TCP, ("installed transport: tcp",),
        {"to-sw": MIB * 101}, "to-sw", 0.8,
    )  # fmt: skip
    return dataclasses.replace(base, **over)  # type: ignore[arg-type]


def test_readers_released_together_give_the_aggregate_while_all_read() -> None:
    """Two readers of 100 MiB each, 0-100 ms and 10-100 ms: both read from 10 to 100 ms,
    when all of the second's 100 MiB and 90 of the first's arrived: 190 MiB over 90 ms."""
    lv = fanin_engine.level(
        ST, READERS[:2], [reader(0, reads(0, 100)), reader(1, reads(10, 100))],
        EngineTransport.TCP, {"to-sw": 200 * MIB},
    )  # fmt: skip
    assert lv.readers == 2 and lv.level.errors == ()
    assert lv.level.all_reading_s == pytest.approx(0.090)
    assert lv.level.aggregate_gbps == pytest.approx(190 * MIB * 8 / (90 * MS), rel=1e-3)
    assert lv.level.goodput_gbps_per_reader == pytest.approx(190 * MIB * 8 / (90 * MS) / 2)
    assert [r.node for r in lv.level.ranks] == ["c0", "c1"]
    spans = [x for r in lv.level.ranks for x in (r.start_s, r.end_s)]
    assert spans == pytest.approx([0.0, 0.1, 0.01, 0.1])
    assert lv.level.chunk is not None and lv.level.chunk.samples == 200
    # the same reduction as a probe level of the same cells: one rule for both
    same = fanin.level(ST, READERS[:2], [[reads(0, 100)], [reads(10, 100)]], [], False)
    assert lv.level == same
    assert lv.transports == ("tcp",) and lv.carried_by == ("to-sw",)
    assert lv.storage_carried_by == "to-sw" and lv.fallback is None
    assert lv.ready_s == 0.8


def test_a_worker_that_failed_is_the_levels_data_and_keeps_it_from_within() -> None:
    """One of three readers' workers failed: its chunks are missing, the level says who
    and why, and the knee rule never calls it within (its readers did not all read)."""
    why = "worker silent past its deadline: killed (last phase: connect)"
    failed = reader(2, None, error=why, ready_s=None)
    lv = fanin_engine.level(
        ST, READERS, [reader(0, reads(0, 100)), reader(1, reads(0, 100)), failed],
        EngineTransport.TCP,
    )  # fmt: skip
    assert lv.level.errors == (f"c2: {why}",)
    assert lv.level.chunk is not None and lv.level.chunk.samples == 200
    assert [r.node for r in lv.level.ranks] == ["c0", "c1"]
    assert lv.ready_s == 0.8  # the barrier released the readers that got there
    base = fanin_engine.level(ST, READERS[:1], [reader(0, reads(0, 50))], EngineTransport.TCP)
    probe = FaninResult("st1", "plain", MIB, 2.0, (), None, None, "not judged")
    judged = fanin_engine.judge(EngineName.MOONCAKE, "m 1", probe, [base, lv])
    assert judged.levels[1].level.call is Call.UNDECIDED
    assert "1 of its ranks failed" in judged.verdict
    # a target that never started fails every reader, the level stands with its reasons
    none = fanin_engine.level(
        ST, READERS[:2], [reader(i, None, error="target on st1: refused") for i in range(2)],
        EngineTransport.TCP,
    )  # fmt: skip
    assert none.level.chunk is None and len(none.level.errors) == 2


def test_a_reader_whose_engine_fell_back_is_named() -> None:
    """Asked for RDMA, one reader's engine moved its bytes over TCP; another's left through
    another interface than its own."""
    lv = fanin_engine.level(
        ST, READERS[:2],
        [reader(0, reads(0, 100), claimed=("installed transport: tcp", "RDMA devices found: 0")),
         reader(1, reads(0, 100), transport=EngineTransport.RDMA,
                moved={"rdma:mlx5_1/1": 101 * MIB}, intended="rdma:mlx5_0/1")],
        EngineTransport.RDMA,
    )  # fmt: skip
    assert lv.transports == ("tcp", "rdma")
    assert lv.fallback == (
        "c0: moved over tcp, not rdma (installed transport: tcp; RDMA devices found: 0)"
    )
    other = fanin_engine.level(
        ST,
        READERS[1:2],
        [
            reader(
                1,
                reads(0, 100),
                transport=EngineTransport.RDMA,
                moved={"rdma:mlx5_1/1": 101 * MIB},
                intended="rdma:mlx5_0/1",
            )
        ],
        EngineTransport.RDMA,
    )
    assert other.fallback == "c1: left through rdma:mlx5_1/1, not the path's NIC rdma:mlx5_0/1"


def probe_sweep() -> FaninResult:
    """A probe sweep of 1 and 2 readers, chunk p50 about 1 ms and 2 ms."""
    levels = [
        fanin.level(ST, READERS[:1], [[reads(0, 100)]], [], False),
        fanin.level(ST, READERS[:2], [[reads(0, 200)], [reads(0, 200)]], [], False),
    ]
    return fanin.judge("st1", "plain", MIB, 2.0, levels)


def test_each_engine_level_is_set_beside_the_probes_and_judged_by_the_same_rule() -> None:
    probe = probe_sweep()
    engine = [
        fanin_engine.level(ST, READERS[:1], [reader(0, reads(0, 300))], EngineTransport.TCP),
        fanin_engine.level(
            ST, READERS[:2], [reader(0, reads(0, 1800, slow_every=2)),
                              reader(1, reads(0, 1800, slow_every=2))], EngineTransport.TCP,
        ),
        EngineFaninLevel(FaninLevel(4, None, skipped="only 3 compute nodes")),
    ]  # fmt: skip
    got = fanin_engine.judge(EngineName.NIXL, "nixl-cu12 1.5.1", probe, engine)
    assert [lv.readers for lv in got.levels] == [1, 2, 4]
    assert got.levels[0].vs_probe == pytest.approx(3.0, rel=1e-3)  # 3 ms against 1 ms
    e2, p2 = got.levels[1].level.chunk, probe.levels[1].chunk
    assert e2 is not None and p2 is not None
    assert got.levels[1].vs_probe == pytest.approx(e2.p50_us / p2.p50_us)
    assert got.levels[2].vs_probe is None and got.levels[2].level.skipped
    # the knee rule over the engine's own levels, its first the base: 18 ms x 5 slow
    # chunks at 2 readers are far past 2x the 3 ms at 1
    assert [lv.level.call for lv in got.levels] == [Call.BASE, Call.BEYOND, None]
    assert got.knee == 2 and got.safe_up_to == 1
    alone = fanin.judge("st1", "plain", MIB, 2.0, [lv.level for lv in engine])
    assert got.verdict == alone.verdict and got.verdict.startswith("safe up to 1 ")
    assert got.engine is EngineName.NIXL and got.version == "nixl-cu12 1.5.1"


def test_engine_levels_go_through_results_json_and_the_journal(tmp_path: Path) -> None:
    probe = probe_sweep()
    levels = [
        fanin_engine.level(ST, READERS[:1], [reader(0, reads(0, 300))], EngineTransport.TCP,
                           {"to-sw": 101 * MIB}),
        fanin_engine.level(ST, READERS[:2], [reader(0, reads(0, 300)),
                           reader(1, None, error="initiator on c1: NIXL_ERR_BACKEND")],
                           EngineTransport.TCP),
    ]  # fmt: skip
    result = dataclasses.replace(
        probe, engine=fanin_engine.judge(EngineName.MOONCAKE, "m 0.3", probe, levels)
    )
    doc = to_list((result,))
    e = doc[0]["engine"]
    assert e["name"] == "mooncake" and e["version"] == "m 0.3"
    assert [lv["readers"] for lv in e["levels"]] == [1, 2]
    first = e["levels"][0]
    assert first["transports"] == ["tcp"] and first["carried_by"] == ["to-sw"]
    assert first["storage_carried_by"] == "to-sw" and first["ready_s"] == 0.8
    assert first["vs_probe"] == pytest.approx(3.0, rel=1e-3) and first["call"] == "base"
    assert e["levels"][1]["errors"] == ["c1: initiator on c1: NIXL_ERR_BACKEND"]
    back = from_list(json.loads(json.dumps(doc)), "x")
    assert back[0].engine == result.engine and back[0].levels == result.levels
    # no engine: no key, as before
    assert "engine" not in to_list((probe,))[0]
    # a whole results file with it is schema-valid and loads
    res = dataclasses.replace(make_results(4), fanin=(result,))
    loaded = load(write_results(tmp_path / "results.json", res))
    assert loaded.fanin[0].engine == result.engine
    # results.jsonl: a level per record, read back by engine (another's is measured again)
    path = tmp_path / "results.jsonl"
    with path.open("w") as f:
        for lv in levels:
            journal.append_fanin_engine(f, "st1", EngineName.MOONCAKE, lv)
    held = journal.read(path)
    assert held.engine_levels(EngineName.MOONCAKE) == {("st1", 1): levels[0], ("st1", 2): levels[1]}
    assert held.engine_levels(EngineName.NIXL) == {}
    journal.rewrite(path, held)
    assert journal.read(path).fanin_engine == held.fanin_engine


def rdma_fell_back(i: int, cell: RawBulk | None) -> ReaderRead:
    """Asked for RDMA, the reader's engine moved the bytes over TCP (no RDMA device)."""
    return reader(i, cell, claimed=("installed transport: tcp", "RDMA devices found: 0"))


def test_with_engine_require_a_level_that_fell_back_is_not_measured_configuration() -> None:
    """`--engine-require rdma` under fan-in: as a path's cells make their path, a level
    whose readers' engines fell back to TCP is not measured (configuration), naming the
    fallback; its chunks are dropped, its evidence kept. Without --engine-require the same
    level is measured and the fallback is its evidence."""
    lv = fanin_engine.level(
        ST, READERS[:2], [rdma_fell_back(0, reads(0, 100)), rdma_fell_back(1, reads(0, 100))],
        EngineTransport.RDMA,
    )  # fmt: skip
    assert fanin_engine.refused(lv, EngineName.MOONCAKE, None) == lv  # evidence only
    gone = fanin_engine.refused(lv, EngineName.MOONCAKE, EngineTransport.RDMA)
    why = (
        "--engine-require rdma: mooncake read on c0: moved over tcp, not rdma (installed "
        "transport: tcp; RDMA devices found: 0)"
    )
    assert gone.configuration == why
    assert gone.level.chunk is None and gone.level.ranks == () and gone.vs_probe is None
    assert gone.level.skipped == f"not measured (configuration): {why}"
    assert gone.fallback == lv.fallback and gone.transports == ("tcp",)
    assert gone.level.nodes == ("c0", "c1")
    # a level that kept to the transport is as it was
    ok = fanin_engine.level(ST, READERS[:1], [reader(0, reads(0, 100))], EngineTransport.TCP)
    assert fanin_engine.refused(ok, EngineName.MOONCAKE, EngineTransport.TCP) == ok


def rdma(i: int, cell: RawBulk) -> ReaderRead:
    """The reader's engine moved the bytes over RDMA through its own NIC."""
    return reader(
        i, cell, transport=EngineTransport.RDMA, claimed=("installed transport: rdma",),
        moved={"rdma:mlx5_0/1": 101 * MIB}, intended="rdma:mlx5_0/1",
    )  # fmt: skip


def test_the_engines_verdict_says_not_measured_and_safe_up_to_stops_below_it() -> None:
    """A level not measured (configuration) is never within: "safe up to" stops below it
    and the engine's verdict says so first, naming the fallback."""
    probe = probe_sweep()
    ok1 = fanin_engine.level(ST, READERS[:1], [rdma(0, reads(0, 100))], EngineTransport.RDMA)
    ok2 = fanin_engine.level(
        ST, READERS[:2], [rdma(0, reads(0, 100)), rdma(1, reads(0, 100))], EngineTransport.RDMA
    )
    assert ok1.fallback is None and ok2.fallback is None
    bad2 = fanin_engine.refused(
        fanin_engine.level(
            ST, READERS[:2], [rdma(0, reads(0, 100)), rdma_fell_back(1, reads(0, 100))],
            EngineTransport.RDMA,
        ),
        EngineName.MOONCAKE, EngineTransport.RDMA,
    )  # fmt: skip
    assert bad2.configuration is not None and "on c1: moved over tcp" in bad2.configuration
    assert fanin_engine.judge(EngineName.MOONCAKE, None, probe, [ok1, ok2]).safe_up_to == 2
    got = fanin_engine.judge(EngineName.MOONCAKE, None, probe, [ok1, bad2])
    assert got.safe_up_to is None and got.knee is None  # one level measured: not judged
    head = f"not measured (configuration) at 2 readers: {bad2.configuration}"
    assert got.verdict.startswith(head)
    assert got.verdict.endswith("; the levels measured: not judged: fewer than two levels measured")
    every = fanin_engine.judge(
        EngineName.MOONCAKE, None, probe,
        [fanin_engine.refused(lv, EngineName.MOONCAKE, EngineTransport.RDMA)
         for lv in (
             fanin_engine.level(ST, READERS[:1], [rdma_fell_back(0, reads(0, 100))],
                                EngineTransport.RDMA),
             fanin_engine.level(ST, READERS[:2], [rdma_fell_back(0, reads(0, 100)),
                                rdma_fell_back(1, reads(0, 100))], EngineTransport.RDMA),
         )],
    )  # fmt: skip
    assert every.verdict.startswith("not measured (configuration) at 1, 2 readers: ")
    assert "the levels measured" not in every.verdict and every.safe_up_to is None
    # through results.json and back, judged again the same way
    result = dataclasses.replace(probe, engine=got)
    table = fanin_table.engine_table(result)
    assert table is not None
    note = table.rows[1][-1]  # the terminal's and the report's row: named once
    assert note.startswith(f"not measured (configuration): {bad2.configuration}")
    assert note.count("moved over tcp") == 1 and table.rows[1][1] == "-"
    doc = to_list((result,))
    assert doc[0]["engine"]["levels"][1]["configuration"] == bad2.configuration
    assert doc[0]["engine"]["levels"][0]["configuration"] is None
    back = from_list(json.loads(json.dumps(doc)), "x")
    assert back[0].engine == got


def test_rounds_of_a_level_are_pooled_with_every_rounds_evidence() -> None:
    """An engine level read in two rounds: the chunks and ranks of both (the probe's rule,
    ``fanin.level_of_rounds``), the storage node's counters of both added up."""
    first = [reader(0, reads(0, 100)), reader(1, reads(0, 100))]
    second = [reader(0, reads(500, 600)), reader(1, reads(500, 600), ready_s=1.5)]
    lv = fanin_engine.level_of_rounds(
        ST, READERS[:2], [first, second], EngineTransport.TCP,
        [{"to-sw": 201 * MIB}, {"to-sw": 201 * MIB}],
    )  # fmt: skip
    same = fanin.level_of_rounds(
        ST, READERS[:2],
        [[[reads(0, 100)], [reads(0, 100)]], [[reads(500, 600)], [reads(500, 600)]]], [], False,
    )  # fmt: skip
    assert lv.level == same and lv.level.rounds == 2
    assert lv.level.chunk is not None and lv.level.chunk.samples == 400
    # 400 MiB read in all: the two rounds' counters together carried them (one alone not)
    assert lv.storage_carried_by == "to-sw" and lv.ready_s == 1.5
