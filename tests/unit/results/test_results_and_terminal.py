"""Results file round trip, the verdict sentence, and golden terminal output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import check_golden
from rich.console import Console

from netqual.analysis.decision import decide
from netqual.analysis.narrative import verdict_sentence
from netqual.analysis.policy import judge
from netqual.analysis.stats import rtt_stats
from netqual.base.errors import ResultsFileError
from netqual.model.node import Node, Role
from netqual.model.path import PathResult, Tier
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode, RunMeta
from netqual.model.stats import BulkStats, Metric
from netqual.model.verdict import Verdict
from netqual.render.terminal import print_probe, print_results
from netqual.results import (
    journal,
    load,
    path_to_dict,
    results_to_dict,
    summarize,
    write_json,
)
from netqual.table.paths import PathTable
from netqual.table.run import Results

NODES = (
    Node("gpu01", "198.18.1.1", role=Role.COMPUTE, rack="r1", labels={"site": "dc"}),
    Node("gpu02", "198.18.1.2", role=Role.COMPUTE, rack="r1", labels={"site": "dc"}),
    Node("gpu03", "198.18.2.1", role=Role.COMPUTE, rack="r2", labels={"site": "dc"}),
    Node("stor01", "198.18.9.1", role=Role.STORAGE, rack="s1", labels={"site": "remote"}),
)


def path(src: str, dst: str, base_us: float, hops: int, tier: Tier) -> PathResult:
    # Deterministic exponential tail (inverse CDF on a grid): no RNG, stable across numpy.
    u = np.linspace(0.0, 0.9999, 10_000)
    samples = (base_us - np.log1p(-u) * base_us * 0.1) * 1000
    rtt = rtt_stats(samples.astype(np.int64))
    bulk = (BulkStats(8 << 20, 8, 32, 24.5, 2600.0, 2950.0, 3100.0),)
    verdict, reasons = judge(Policy(), rtt, bulk)
    return PathResult(src, dst, "tcp", verdict, reasons, rtt, bulk, hops, tier)


def sample_results() -> Results:
    paths = [
        path("gpu01", "gpu02", 20.0, 2, Tier.SAME_RACK),
        path("gpu01", "gpu03", 240.0, 4, Tier.CROSS_RACK),
        path("gpu02", "gpu03", 230.0, 4, Tier.CROSS_RACK),
        path("gpu01", "stor01", 900.0, 6, Tier.REMOTE),
        path("gpu02", "stor01", 880.0, 6, Tier.REMOTE),
    ]
    failed_reason = "stor01 (198.18.9.1:18515) unreachable from gpu03: connection refused"
    v, reasons = judge(Policy(), None, error=failed_reason)
    paths.append(
        PathResult(
            "gpu03", "stor01", "tcp", v, reasons, None, (), None, Tier.REMOTE, error=failed_reason
        )
    )
    meta = RunMeta(
        "2026-11-29T12:00:00.000+00:00",
        "2026-11-29T12:01:00.000+00:00",
        "tcp",
        Mode.FULL_MESH,
        Policy(),
        ProbePlan(),
        {"function": "time.perf_counter_ns"},
    )
    return Results(
        meta, NODES, PathTable.from_paths(paths), summarize(paths, Metric.P99), tool_version="0.1.0"
    )


def render(fn: object, *args: object) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=100, color_system=None, force_terminal=False)
    fn(console, *args)  # type: ignore[operator]
    return buf.getvalue()


def test_round_trip_through_results_json(tmp_path: Path) -> None:
    results = decide(sample_results())  # as a run writes it
    out = tmp_path / "results.json"
    write_json(out, results)
    again = load(out)
    assert again.nodes == results.nodes
    # The file keeps times to the nanosecond (the clock's resolution): a fixpoint.
    assert results_to_dict(again) == results_to_dict(results)
    for a, b in zip(again.paths, results.paths, strict=True):
        assert (a.key, a.verdict, a.reasons, a.hops, a.tier) == (
            b.key,
            b.verdict,
            b.reasons,
            b.hops,
            b.tier,
        )
        if a.rtt is not None and b.rtt is not None:
            assert a.rtt.p99_us == pytest.approx(b.rtt.p99_us, abs=5e-4)
            assert a.rtt.histogram_counts == b.rtt.histogram_counts
            assert a.rtt.histogram_edges_us == pytest.approx(b.rtt.histogram_edges_us)


def test_required_keys_present(tmp_path: Path) -> None:
    d = results_to_dict(sample_results())
    assert {"schema_version", "tool", "run", "nodes", "paths", "summary"} <= d.keys()
    assert {"started_at", "finished_at", "transport", "mode", "policy"} <= d["run"].keys()
    for n in d["nodes"]:
        assert {"name", "address", "role", "rack", "labels"} <= n.keys()
    for p in d["paths"]:
        assert {
            "src",
            "dst",
            "transport",
            "hops",
            "rtt_us",
            "bulk",
            "verdict",
            "reasons",
            "error",
        } <= p.keys()
        if p["rtt_us"]:
            assert {"samples", "min", "p50", "p90", "p99", "p999", "max", "mean", "stdev"} <= p[
                "rtt_us"
            ].keys()
        for b in p["bulk"]:
            assert {"chunk_bytes", "depth", "reads", "goodput_gbps", "completion_us"} <= b.keys()
            assert {"p50", "p99"} <= b["completion_us"].keys()
    assert d["summary"]["counts"] == {"offload-safe": 1, "marginal": 2, "unsafe": 3}


def test_worst_paths_put_unsafe_first() -> None:
    r = sample_results()
    first = r.summary.worst[0]
    assert first == ("gpu03", "stor01")  # failed path: unsafe with no RTT is worst
    verdicts = [next(p for p in r.paths if p.key == k).verdict for k in r.summary.worst]
    assert [v.rank for v in verdicts] == sorted((v.rank for v in verdicts), reverse=True)


def test_verdict_sentence() -> None:
    r = sample_results()
    marginal = next(p for p in r.paths if (p.src, p.dst) == ("gpu01", "gpu03"))
    assert marginal.rtt is not None
    assert verdict_sentence(r) == (
        "1 of 6 paths offload-safe; 3 unsafe (worst gpu03 -> stor01, stor01 (198.18.9.1:18515) "
        "unreachable from gpu03: connection refused); 2 marginal (worst gpu01 -> gpu03, p99 "
        f"{marginal.rtt.p99_us:.1f} us)"
    )


def test_truncated_and_wrong_version_files(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    write_json(out, sample_results())
    text = out.read_text()
    out.write_text(text[: len(text) // 2])
    with pytest.raises(ResultsFileError, match="not valid JSON"):
        load(out)
    d = json.loads(text)
    d["schema_version"] = "2"
    out.write_text(json.dumps(d))
    with pytest.raises(ResultsFileError, match="schema_version"):
        load(out)


def test_jsonl_survives_a_torn_last_line(tmp_path: Path) -> None:
    r = sample_results()
    out = tmp_path / "results.jsonl"
    with out.open("w") as f:
        for p in r.paths[:3]:
            journal.append_path(f, p)
        f.write('{"src": "gpu0')  # crash mid-write
    assert [path_to_dict(p) for p in journal.read(out).done.values()] == [
        path_to_dict(p) for p in r.paths[:3]
    ]


def test_jsonl_records_pair_phases_sample_and_alone(tmp_path: Path) -> None:
    """Each kind of record read back; a pair's finished record supersedes its ping-pong
    one, a repeated pair counts once, and a torn wrapped record is skipped."""
    a, b, c = list(sample_results().paths)[:3]
    out = tmp_path / "results.jsonl"
    with out.open("w") as f:
        journal.append_pingpong(f, a)
        journal.append_pingpong(f, b)
        journal.append_path(f, a)
        journal.append_path(f, a)  # a crash between write and rewrite: still once
        journal.append_sample(f, [a.key, c.key])
        journal.append_alone(f, a)
        f.write('{"record":"alone","path":{"src":"gp')
    held = journal.read(out)
    assert list(held.done) == [a.key] and list(held.pending) == [b.key]
    assert held.sample == (a.key, c.key) and list(held.alone) == [a.key]
    assert held.duplicates
    assert path_to_dict(held.pending[b.key]) == path_to_dict(b)
    shown = journal.measured_paths(held.done, held.pending)
    assert [p.key for p in shown] == [a.key, b.key]
    assert shown[1].reasons[0] == journal.PENDING_REASON
    assert shown[1].verdict is not Verdict.SAFE
    journal.rewrite(out, held)
    again = journal.read(out)
    assert held.duplicates == 1 and again.duplicates == 0 and again.records == 4
    # A record kind this version does not know is an error naming the line, not skipped.
    out.write_text('{"record":"later","x":1}\n' + out.read_text())
    with pytest.raises(ResultsFileError, match="line 1"):
        journal.read(out)


def test_terminal_golden() -> None:
    check_golden("terminal_results.txt", render(print_results, sample_results()))


def test_probe_table_golden() -> None:
    check_golden("terminal_probe.txt", render(print_probe, sample_results().paths[0]))


def test_matrix_shows_any_statistic() -> None:
    r = sample_results()
    hops = render(lambda c, res: print_results(c, res, "hops"), r)
    assert "hop count: row = source, column = destination" in hops
    assert "│ gpu01  │     - │     2 │     4 │      6 │" in hops
    goodput = render(lambda c, res: print_results(c, res, "goodput"), r)
    assert "goodput of the largest bulk cell (Gbit/s)" in goodput
    assert "24.50" in goodput


def test_report_rejects_an_unknown_statistic(tmp_path: Path) -> None:
    from netqual.cli import main

    out = tmp_path / "results.json"
    write_json(out, sample_results())
    assert main(["report", str(out), "--stat", "p42"]) == 2
    assert main(["report", str(out), "--stat", "p50"]) == 0
