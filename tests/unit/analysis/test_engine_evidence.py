"""Fetch engine cells as decision evidence (netqual.analysis.evidence.engine): a fallback or
a cell slower than the policy's line holds its path at marginal and blocks "go" with an
action; a failed cell cannot judge; healthy cells pass and say so."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from factories import make_results

from netqual.analysis.decision import decide
from netqual.model.decision import EvidenceKind
from netqual.model.engine import EngineCell, EngineName, EngineOp, EngineTransport
from netqual.model.verdict import Verdict
from netqual.table.run import Results

KIB64 = 64 << 10


def cell(**over: object) -> EngineCell:
    base = EngineCell(
        EngineName.MOONCAKE, "0.3.13", EngineOp.READ, KIB64, 1, EngineTransport.TCP, "eth1",
        200, 30.0, 90.0, 5.0, 400.0, 1.5,
    )  # fmt: skip
    return dataclasses.replace(base, **over)  # type: ignore[arg-type]


def with_cells(results: Results, cells: Mapping[int, tuple[EngineCell, ...]]) -> Results:
    table = results.paths
    return dataclasses.replace(
        results, paths=table.with_engine({table.key(i): c for i, c in cells.items()})
    )


def safe_run() -> Results:
    return make_results(4, all_safe=True)


def engine_evidence(results: Results, row: int) -> list[tuple[Verdict | None, str]]:
    path = results.paths.row(row)
    return [(e.verdict, e.detail) for e in path.evidence if e.kind is EvidenceKind.ENGINE]


def test_healthy_cells_pass_and_the_run_says_what_was_judged() -> None:
    before = safe_run()
    rows = dict.fromkeys(range(len(before.paths)), (cell(), cell(op=EngineOp.WRITE)))
    decided = decide(with_cells(before, rows))
    assert decided.decision is not None
    assert decided.decision.answer.value == "go"
    summary = next(e for e in decided.decision.evidence if e.kind is EvidenceKind.ENGINE)
    assert summary.verdict is Verdict.SAFE
    assert "every cell on the transport and NIC asked, within 3x" in summary.detail


def test_a_fallback_or_a_slow_cell_holds_its_path_at_marginal_and_blocks() -> None:
    before = safe_run()
    cells = {
        0: (cell(fallback="moved over tcp, not rdma (installed transport: tcp)"),),
        1: (cell(vs_probe=4.5),),
        2: (cell(),),
    }
    decided = decide(with_cells(before, cells))
    assert decided.decision is not None
    assert decided.decision.answer.value == "conditional"
    assert decided.paths.row(0).verdict is Verdict.MARGINAL
    assert engine_evidence(decided, 0) == [
        (Verdict.MARGINAL, "mooncake read: moved over tcp, not rdma (installed transport: tcp)")
    ]
    assert decided.paths.row(1).verdict is Verdict.MARGINAL
    [(verdict, detail)] = engine_evidence(decided, 1)
    assert verdict is Verdict.MARGINAL and "4.5x slower than the fabric here" in detail
    assert decided.paths.row(2).verdict is Verdict.SAFE and engine_evidence(decided, 2) == []
    blocking = [b for b in decided.decision.blocking if b.kind is EvidenceKind.ENGINE]
    assert sum(b.paths for b in blocking) == 2
    # both sit on one node: one subject holds them, led by the fallback and its action
    actions = " ".join(b.action for b in blocking)
    assert "UCX_TLS and UCX_NET_DEVICES" in actions


def test_a_failed_engine_cannot_judge_its_path() -> None:
    before = safe_run()
    failed = cell(error="initiator on n01: worker silent past its deadline", completion_p50_us=None)
    decided = decide(with_cells(before, {0: (failed,)}))
    [(verdict, detail)] = engine_evidence(decided, 0)
    assert verdict is None and "worker silent" in detail
    assert decided.paths.row(0).verdict is Verdict.MARGINAL  # never offload-safe unjudged


def test_a_run_without_engine_cells_says_so() -> None:
    decided = decide(safe_run())
    assert decided.decision is not None
    summary = next(e for e in decided.decision.evidence if e.kind is EvidenceKind.ENGINE)
    assert summary.verdict is None and "no fetch engine ran" in summary.detail
    assert decided.decision.answer.value == "go"  # an engine not asked for blocks nothing
