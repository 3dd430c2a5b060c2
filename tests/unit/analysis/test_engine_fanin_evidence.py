"""Fan-in through the fetch engine as decision evidence (netqual.analysis.evidence.engine,
docs/engines.md "Findings and the decision"): the engine's own "safe up to" against the
compute nodes that would read a storage node, an engine level far slower than the probe's
at as many readers, a level not measured (configuration) under --engine-require, and a
level the knee rule could not call each hold the storage node's paths below offload-safe,
name the engine, block "go", and reach the gate through the decision (``no_blocking`` and
``min_fanin_readers``). Typed records, no agents."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence

import numpy as np
from factories import make_results

from netqual.analysis import fanin, fanin_engine
from netqual.analysis.decision import decide
from netqual.gate.evaluate import evaluate
from netqual.gate.fanin import MinFaninReaders
from netqual.gate.model import GateContext, Scope, Status
from netqual.gate.profile import parse_profile_text
from netqual.model.decision import Answer, Evidence, EvidenceKind, FaninHold, SubjectKind
from netqual.model.engine import EngineName, EngineTransport
from netqual.model.fanin import ChunkStats, EngineFaninLevel, FaninLevel, FaninResult
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.table.run import Results

KIB256 = 256 * 1024
TODAY = datetime.date(2026, 12, 1)
READERS = ("gpu01", "gpu02", "gpu03", "gpu04")  # the compute nodes of healthy()


def healthy() -> Results:
    """Six nodes, stor01 and stor02 storage, every path offload-safe by its RTT."""
    return make_results(6, all_safe=True, storage_every=3)


def stats(p50_us: float, p99_us: float) -> ChunkStats:
    """A level's chunk completion whose p99 is known to within 3%."""
    return ChunkStats(2_000, p50_us, p99_us, p99_us * 1.2, (), (p99_us * 0.97, p99_us * 1.03))


def level(k: int, p50_us: float, p99_us: float) -> FaninLevel:
    return FaninLevel(k, stats(p50_us, p99_us), nodes=READERS[:k])


def probe_holds_four() -> FaninResult:
    """stor01 through netqual's probe: chunk p99 200 us at 1, 2 and 4 readers: no knee."""
    levels = [level(k, 100.0, 200.0) for k in (1, 2, 4)]
    return fanin.judge("stor01", "plain", KIB256, 2.0, levels)


def through(levels: Sequence[EngineFaninLevel], probe: FaninResult | None = None) -> Results:
    """healthy() with stor01's sweep and its levels through mooncake."""
    p = probe or probe_holds_four()
    e = fanin_engine.judge(EngineName.MOONCAKE, "0.3.13.post1", p, levels)
    return dataclasses.replace(healthy(), fanin=(dataclasses.replace(p, engine=e),))


def tcp(lv: FaninLevel) -> EngineFaninLevel:
    return EngineFaninLevel(lv, transports=("tcp",), carried_by=("eth0",))


def stor01_rows(res: Results) -> np.ndarray:
    return np.array(["stor01" in key for key in res.paths.keys()])  # noqa: SIM118


def engine_blocking(res: Results) -> list[tuple[str, Verdict | None, str, str]]:
    assert res.decision is not None
    return [
        (b.subject.name, b.verdict, b.detail, b.action)
        for b in res.decision.blocking
        if b.kind is EvidenceKind.ENGINE
    ]


def engine_summary(res: Results) -> Evidence:
    assert res.decision is not None
    return next(e for e in res.decision.evidence if e.kind is EvidenceKind.ENGINE)


def gate(res: Results, limits: str) -> dict[str, tuple[Status, str]]:
    report = evaluate(res, parse_profile_text(limits, "p.toml"), today=TODAY)
    return {o.rule: (o.status, o.message) for o in report.outcomes}


def test_the_engines_knee_below_the_readers_holds_the_storage_node_where_the_probe_does_not() -> (
    None
):
    """The fabric holds 4 readers of stor01; through mooncake a chunk's p99 is 3x at 2
    readers: the deployment's fetches hold 1. Its paths are marginal on the engine's
    evidence, the blocking names the storage node and the engine, the action says the data
    mover, not the fabric, is the limit; both gate rules see it through the decision."""
    levels = [tcp(level(1, 150.0, 300.0)), tcp(level(2, 280.0, 900.0)),
              tcp(level(4, 290.0, 950.0))]  # fmt: skip
    got = decide(through(levels))
    mine = stor01_rows(got)
    assert (got.paths.verdict[mine] == Verdict.MARGINAL.rank).all()
    assert (got.paths.verdict[~mine] == Verdict.SAFE.rank).all()
    assert got.decision is not None and got.decision.answer is Answer.CONDITIONAL
    [(subject, verdict, detail, action)] = engine_blocking(got)
    assert subject == "stor01" and verdict is Verdict.MARGINAL
    assert detail.startswith("through mooncake: safe up to 1 concurrent reader (")
    assert detail.endswith("; 4 compute nodes would read it")
    assert action.startswith(
        "mooncake's data mover, not the fabric, limits stor01 to 1 reader (netqual's probe holds 4)"
    )
    row = got.paths.row(int(np.flatnonzero(mine)[0]))
    [ev] = [e for e in row.evidence if e.kind is EvidenceKind.ENGINE]
    assert ev.subject.kind is SubjectKind.STORAGE and ev.detail == detail
    assert row.reasons[0] == f"engine: {detail}"
    assert got.decision.fanin == (
        FaninHold("stor01", None, 4, None, got.fanin[0].verdict),
        FaninHold("stor01", "mooncake", 1, None, got.fanin[0].engine.verdict),  # type: ignore[union-attr]
    )
    summary = engine_summary(got)
    assert summary.verdict is Verdict.MARGINAL
    assert summary.detail == (
        "mooncake (0.3.13.post1): under fan-in 1 of 1 storage node swept through it fall "
        "short (a level not measured, not holding their readers, or slower than 3x the "
        "probe's level)"
    )
    outcomes = gate(got, "[limits]\nno_blocking = true\nmin_fanin_readers = 2\n")
    status, message = outcomes["no_blocking"]
    assert status is Status.FAIL and "stor01 (engine): through mooncake: safe up to 1" in message
    status, message = outcomes["min_fanin_readers"]
    assert status is Status.FAIL
    assert "first stor01: through mooncake: safe up to 1 concurrent reader" in message
    # the probe alone passes the same rule: it is the engine's levels that fail it
    assert gate(got, '[limits]\nno_blocking = ["fanin"]\n')["no_blocking"][0] is Status.PASS
    alone = dataclasses.replace(got, fanin=(dataclasses.replace(got.fanin[0], engine=None),))
    assert gate(alone, "[limits]\nmin_fanin_readers = 4\n")["min_fanin_readers"][0] is Status.PASS


def test_an_engine_level_far_slower_than_the_probes_is_a_configuration_finding() -> None:
    """No knee through the engine, but at 2 readers its chunk p50 is 11.7x the probe's at 2
    (limit 3x): marginal, naming the engine, the ratio and the likely cause."""
    levels = [tcp(level(1, 146.0, 300.0)), tcp(level(2, 1170.0, 320.0))]
    probe = fanin.judge("stor01", "plain", KIB256, 2.0, [level(k, 100.0, 200.0) for k in (1, 2)])
    # 2 readers swept, 4 would read: the probe's own sweep cannot judge 4 (fan-in evidence);
    # the engine's is held to the same readers
    got = decide(through(levels, probe))
    blocking = engine_blocking(got)
    slow = [b for b in blocking if "slower than the fabric" in b[2]]
    [(subject, verdict, detail, action)] = slow
    assert subject == "stor01" and verdict is Verdict.MARGINAL
    assert detail == (
        "the connector's data mover (mooncake read) is 11.7x slower than the fabric at 2 "
        "readers of stor01 (chunk p50 1.2 ms against netqual's probe's 100 us; limit 3x): "
        "configuration; likely cause: the engine's own TCP path (mooncake): the fabric is "
        "not the limit"
    )
    assert "the connector's data mover, not the fabric, limits this path" in action
    # the policy's line decides: at 12x nothing is slow
    lax = dataclasses.replace(
        got.run, policy=dataclasses.replace(got.run.policy, max_engine_vs_probe=12.0)
    )
    again = decide(dataclasses.replace(got, run=lax))
    assert not [b for b in engine_blocking(again) if "slower than the fabric" in b[2]]


def test_a_level_not_measured_for_its_configuration_cannot_judge_and_says_so() -> None:
    """--engine-require rdma on a host without RDMA: every engine level fell back and is not
    measured (configuration). The storage node's paths are not judged on it (never
    offload-safe, never unsafe), the decision names the fallback, both gate rules fail."""
    fell = EngineFaninLevel(
        level(1, 150.0, 300.0), transports=("tcp",),
        fallback="gpu01: moved over tcp, not rdma (installed transport: tcp; RDMA devices "
        "found: 0)",
    )  # fmt: skip
    gone = fanin_engine.refused(fell, EngineName.MOONCAKE, EngineTransport.RDMA)
    two = dataclasses.replace(gone, level=dataclasses.replace(gone.level, readers=2))
    got = decide(through([gone, two]))
    mine = stor01_rows(got)
    assert (got.paths.verdict[mine] == Verdict.MARGINAL.rank).all()
    assert got.summary.counts.get(Verdict.UNSAFE, 0) == 0
    [(subject, verdict, detail, action)] = engine_blocking(got)
    assert subject == "stor01" and verdict is None
    assert detail == (
        "through mooncake, not measured (configuration) at 1, 2 readers: --engine-require "
        "rdma: mooncake read on gpu01: moved over tcp, not rdma (installed transport: tcp; "
        "RDMA devices found: 0)"
    )
    assert "--engine-require makes a fallback a configuration failure" in action
    assert got.decision is not None and got.decision.answer is Answer.CONDITIONAL
    outcomes = gate(got, "[limits]\nno_blocking = true\nmin_fanin_readers = 1\n")
    assert outcomes["no_blocking"][0] is Status.FAIL
    assert "not measured (configuration) at 1, 2 readers" in outcomes["no_blocking"][1]
    status, message = outcomes["min_fanin_readers"]
    assert status is Status.FAIL
    assert "stor01: through mooncake: not measured (configuration) at 1, 2 readers" in message


def test_an_engine_level_the_knee_rule_could_not_call_is_preliminary_never_a_pass() -> None:
    """At 2 readers through the engine the p99's interval straddles 2x the first level's:
    preliminary. The decision cannot judge on it; min_fanin_readers says "preliminary"."""
    wide = dataclasses.replace(
        level(2, 150.0, 550.0),
        chunk=ChunkStats(120, 150.0, 550.0, 700.0, ("p999",), (400.0, 800.0)),
    )
    levels = [tcp(level(1, 150.0, 300.0)), tcp(wide)]
    probe = fanin.judge("stor01", "plain", KIB256, 2.0, [level(k, 100.0, 200.0) for k in (1, 2)])
    got = decide(through(levels, probe))
    [(subject, verdict, detail, _)] = engine_blocking(got)
    assert subject == "stor01" and verdict is None
    assert detail.startswith("through mooncake: preliminary at 2 readers, not judged: safe up to 1")
    assert got.decision is not None
    assert FaninHold("stor01", "mooncake", 1, 2, got.fanin[0].engine.verdict) in got.decision.fanin  # type: ignore[union-attr]
    ctx = GateContext({n.name: n for n in got.nodes}, Metric.P99, decision=got.decision)
    out = MinFaninReaders(Scope(), 2).check(got.paths, np.arange(len(got.paths)), ctx)
    assert out.status is Status.FAIL
    assert out.failing[0].detail.startswith(
        "preliminary at 2 readers, not judged safe: through mooncake: safe up to 1"
    )


def test_an_engine_that_holds_the_readers_within_the_probes_pace_blocks_nothing() -> None:
    levels = [tcp(level(k, 150.0, 300.0)) for k in (1, 2, 4)]
    got = decide(through(levels))
    assert engine_blocking(got) == []
    assert (got.paths.verdict == Verdict.SAFE.rank).all()
    assert got.decision is not None and got.decision.answer is Answer.GO
    summary = engine_summary(got)
    assert summary.verdict is Verdict.SAFE
    assert "under fan-in 1 storage node swept through it hold their readers" in summary.detail
    assert gate(got, "[limits]\nmin_fanin_readers = 4\n")["min_fanin_readers"] == (
        Status.PASS,
        "1 storage node(s) safe up to 4+ (and through mooncake)",
    )
