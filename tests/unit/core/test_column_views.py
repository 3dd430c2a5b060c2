"""The shared views (terminal groups and matrix, verdict sentence, waivers, localisation's
columns) work on PathTable columns; these pin them to what the per-path definitions say."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import statistics
from pathlib import Path

import numpy as np
from factories import make_results
from rich.console import Console

from netqual.analysis.localise import columns, suspects
from netqual.analysis.matrix import (
    STATISTICS,
    GroupRow,
    build_matrix,
    group_paths,
    hop_groups,
    rack_pair_groups,
    tier_groups,
)
from netqual.analysis.narrative import verdict_sentence, waiver_problem
from netqual.model.path import PathResult, Tier
from netqual.model.policy import Waiver
from netqual.model.suspects import SuspectKind
from netqual.model.verdict import Verdict
from netqual.render.terminal import print_results
from netqual.report.csv import write_csv
from netqual.report.waivers import waiver_notes
from netqual.run import retest
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.workload import load_workload
from netqual.workload.impact import tier_impacts, workload_counts
from netqual.workload.judge import apply as apply_workload


def _rows_by_hand(paths: list[PathResult], key: dict[tuple[str, str], str]) -> dict[str, GroupRow]:
    """The groups as the per-path definition computes them (statistics.median, max)."""
    out = {}
    for k in sorted(set(key.values())):
        members = [p for p in paths if key[p.key] == k]
        rtts = [p.rtt for p in members if p.rtt is not None]
        out[k] = GroupRow(
            key=k,
            paths=len(members),
            median_p50_us=statistics.median(r.p50_us for r in rtts) if rtts else None,
            worst_p99_us=max(r.p99_us for r in rtts) if rtts else None,
            safe=sum(p.verdict is Verdict.SAFE for p in members),
            marginal=sum(p.verdict is Verdict.MARGINAL for p in members),
            unsafe=sum(p.verdict is Verdict.UNSAFE for p in members),
        )
    return out


def _with_unknown_hops(r: Results, every: int) -> Results:
    paths = [
        dataclasses.replace(p, hops=None) if i % every == 0 else p for i, p in enumerate(r.paths)
    ]
    return dataclasses.replace(r, paths=PathTable.from_paths(paths, [n.name for n in r.nodes]))


def test_groups_agree_with_the_per_path_medians_counts_and_worst() -> None:
    r = _with_unknown_hops(
        make_results(21, rack_size=4, slow_nodes=["gpu05"], marginal_fraction=0.2, error_paths=5),
        every=7,
    )
    paths = list(r.paths)
    rack = {n.name: n.rack or "-" for n in r.nodes}
    by_racks = {p.key: " <-> ".join(sorted((rack[p.src], rack[p.dst]))) for p in paths}
    by_hops = {p.key: "?" if p.hops is None else str(p.hops) for p in paths}
    by_tier = {p.key: p.tier.value for p in paths}
    for grouping, key in (
        (rack_pair_groups(r.nodes, r.paths), by_racks),
        (hop_groups(r.paths), by_hops),
        (tier_groups(r.paths), by_tier),
    ):
        got = group_paths(r.paths, grouping)
        assert {g.key: g for g in got} == _rows_by_hand(paths, key)
    # hop counts in numeric order, unknown last
    assert [g.key for g in group_paths(r.paths, hop_groups(r.paths))] == ["2", "4", "?"]


def test_a_large_run_prints_rack_pairs_and_tiers_not_a_matrix() -> None:
    r = make_results(40, rack_size=8, slow_rack_pairs=[("r01", "r03")])
    buf = io.StringIO()
    print_results(Console(file=buf, width=120, color_system=None), r)
    text = buf.getvalue()
    assert "row = source" not in text
    assert "by rack pair (us)" in text and "by tier (where a path runs: " in text
    (row,) = [line for line in text.splitlines() if "r01 <-> r03" in line]
    assert "64" in row.split("│")[2]  # 8 x 8 paths between the two racks


def test_matrix_cell_shows_its_own_direction_and_the_reverse_only_when_unmeasured() -> None:
    r = make_results(3)
    first = r.paths[0]
    assert first.rtt is not None and first.verdict is Verdict.SAFE
    back = dataclasses.replace(
        first,
        src=first.dst,
        dst=first.src,
        verdict=Verdict.UNSAFE,
        rtt=dataclasses.replace(first.rtt, p99_us=999.0),
    )
    table = PathTable.from_paths([*r.paths, back])
    m = build_matrix(r.nodes, table, STATISTICS["p99"].value)
    i, j = m.names.index(first.src), m.names.index(first.dst)
    # row = source, column = destination: both directions' own values (issue 36)
    assert m.values[i][j] == first.rtt.p99_us != 999.0 and m.verdicts[i][j] is Verdict.SAFE
    assert m.values[j][i] == 999.0 and m.verdicts[j][i] is Verdict.UNSAFE
    assert m.verdicts[i][i] is None
    # a pair measured one way fills both cells from that path
    other = r.paths[1]
    k, n = m.names.index(other.src), m.names.index(other.dst)
    assert m.values[k][n] == m.values[n][k] is not None
    # two paths of one direction: the worse verdict
    table = PathTable.from_paths(
        [*r.paths, dataclasses.replace(back, src=first.src, dst=first.dst)]
    )
    m = build_matrix(r.nodes, table, STATISTICS["p99"].value)
    assert m.values[i][j] == m.values[j][i] == 999.0


def test_path_rows_find_the_last_repeat_and_nothing_for_unknown_keys() -> None:
    r = make_results(4)
    table = PathTable.from_paths([*r.paths, r.paths[1]])
    assert table.rows_of([r.paths[1].key, ("gpu01", "nobody"), r.paths[0].key]) == [
        len(r.paths),
        None,
        0,
    ]


def test_verdict_sentence_names_the_worst_path_of_each_class() -> None:
    r = make_results(8, slow_paths=[("gpu02", "stor01", 777.0)])
    assert verdict_sentence(r).endswith("1 unsafe: gpu02 -> stor01, p99 777.0 us")


def test_waivers_are_checked_against_the_columns() -> None:
    r = make_results(4)
    a, b = r.paths[0].key
    until = dt.date(2099, 1, 1)
    reverse = Waiver(src=b, dst=a, until=until, reason="r", owner="o")
    unmeasured = Waiver(src=a, dst=a, until=until, reason="r", owner="o")
    stranger = Waiver(src="gpu99", dst=a, until=until, reason="r", owner="o")
    assert waiver_problem(r, reverse) is None
    assert waiver_problem(r, unmeasured) == "names a path this run did not measure"
    assert "'gpu99', not a node of this run" in (waiver_problem(r, stranger) or "")
    notes = waiver_notes(r, [reverse, unmeasured], dt.date(2026, 1, 1))
    assert [n.verdict for n in notes] == [r.paths[0].verdict.value, "not measured"]


def test_columns_put_unlisted_nodes_last_and_count_sample_limited_paths_safe() -> None:
    r = make_results(6, samples=500, slow_nodes=["gpu02"])
    r = dataclasses.replace(r, nodes=tuple(n for n in r.nodes if n.name != "gpu01"))
    c = columns(r, r.run.policy.metric)
    assert c.node_names[-1] == "gpu01" and c.node_rack[-1] == -1
    names = [c.node_names[s] for s in c.src.tolist()]
    assert names == [p.src for p in r.paths]
    # too few samples everywhere: only the slow node's paths are bad for localisation
    slow = np.array(["gpu02" in p.key for p in r.paths])
    assert (c.verdict > 0).tolist() == slow.tolist()
    assert all(p.verdict is not Verdict.SAFE for p in r.paths)
    assert [(s.kind, s.subject) for s in suspects(r)] == [(SuspectKind.NODE, "gpu02")]


def test_tier_table_is_left_out_when_no_path_has_a_tier() -> None:
    r = make_results(18)
    paths = [dataclasses.replace(p, tier=Tier.UNKNOWN) for p in r.paths]
    r = dataclasses.replace(r, paths=PathTable.from_paths(paths))
    buf = io.StringIO()
    print_results(Console(file=buf, width=120, color_system=None), r)
    assert "by tier" not in buf.getvalue() and "by hops" in buf.getvalue()


def test_csv_rows_match_each_path_record(tmp_path: Path) -> None:
    r = make_results(6, error_paths=2)
    paths = list(r.paths)
    # one path measured only the smaller bulk cell: the other cell's columns are blank
    paths[3] = dataclasses.replace(paths[3], bulk=paths[3].bulk[:1], hops=None)
    r = dataclasses.replace(r, paths=PathTable.from_paths(paths))
    write_csv(r, tmp_path / "r.csv")
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert [(row["src"], row["dst"]) for row in rows] == [p.key for p in paths]
    for row, p in zip(rows, paths, strict=True):
        assert row["verdict"] == p.verdict.value and row["error"] == (p.error or "")
        assert row["samples"] == ("" if p.rtt is None else str(p.rtt.samples))
        assert row["p99_us"] == ("" if p.rtt is None else repr(p.rtt.p99_us))
        assert row["hops"] == ("" if p.hops is None else str(p.hops))
        shown = [k for k in row if k.startswith("bulk_") and k.endswith("goodput_gbps")]
        filled = [k for k in shown if row[k]]
        assert len(filled) == len(p.bulk)
    assert sum(1 for row in rows if row["error"]) == 2


def test_tier_impacts_are_medians_over_the_judged_paths() -> None:
    r = make_results(12, rack_size=4, slow_nodes=["gpu02"])
    w = load_workload("llama-3.1-70b-tp8")
    judged = apply_workload(r, w)
    impacts = {t.tier: t for t in tier_impacts(judged, w)}
    assert list(impacts) == ["same-rack", "cross-rack"]
    for tier, t in impacts.items():
        members = [p for p in judged.paths if p.tier.value == tier and p.workload is not None]
        speedups = [p.workload.speedup for p in members if p.workload and p.workload.speedup]
        rtts = [p.rtt.p99_us for p in members if p.rtt is not None]
        assert t.paths == len(members)
        assert t.speedup == statistics.median(speedups) and t.worst_speedup == min(speedups)
        assert t.rtt_p99_us == statistics.median(rtts)
    assert sum(workload_counts(judged).values()) == len(judged.paths)


def test_retest_selects_paths_by_verdict_in_file_order() -> None:
    r = make_results(8, slow_paths=[("gpu05", "gpu06", 700.0), ("gpu01", "gpu03", 300.0)])
    assert retest.select(r, frozenset({Verdict.UNSAFE})) == (("gpu05", "gpu06"),)
    both = retest.select(r, frozenset({Verdict.UNSAFE, Verdict.MARGINAL}))
    assert both == (("gpu01", "gpu03"), ("gpu05", "gpu06"))
