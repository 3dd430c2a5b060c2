"""PathTable: rows come back exactly as they went in; the column operations (ranking, counts,
codes, take, slicing) agree with the record-by-record definitions they replace."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from factories import make_results, rank_key, write_results

from netqual.analysis.decision import decide
from netqual.model.path import PathResult, Tier, WorkloadResult
from netqual.model.stats import BulkStats, Ci95, Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.results import load, path_to_dict
from netqual.table.paths import PathTable


def _odd_paths() -> list[PathResult]:
    """Every optional part present or absent somewhere: no RTT, intervals of some metrics, bulk
    cells with an error, a workload verdict with a missing fetch, details, hops unknown."""
    rtt = RttStats(
        samples=5000,
        min_us=10.0,
        p50_us=12.5,
        p90_us=14.0,
        p99_us=30.25,
        p999_us=41.0,
        max_us=50.0,
        mean_us=13.0,
        stdev_us=2.5,
        untrusted=("p999",),
        ci95=Ci95(p50=(12.0, 13.0), p99=(28.0, 33.5)),
        histogram_edges_us=tuple(10 ** ((20 + k) / 20) for k in range(4)),
        histogram_counts=(10, 4980, 10),
    )
    bulk = (
        BulkStats(1 << 20, 8, 128, 11.5, 700.0, 900.0, 950.0),
        BulkStats(4 << 20, 1, 0, 0.0, 0.0, 0.0, 0.0, error="timeout"),
    )
    wl = WorkloadResult(Verdict.MARGINAL, ("slow fetch",), 800.0, 400.0, None, 2.0, None, True)
    return [
        PathResult("a", "b", "tcp", Verdict.SAFE, (), rtt, bulk, 2, Tier.SAME_RACK),
        PathResult("b", "c", "rdma", Verdict.UNSAFE, ("measurement failed: timeout",),
                   error="timeout", started_at="2026-11-30T00:00:00+00:00", duration_s=3.5),
        PathResult("c", "a", "tcp", Verdict.MARGINAL, ("x", "y"), rtt, (), None, Tier.REMOTE,
                   details={"retries": 2}, workload=wl),
    ]  # fmt: skip


def test_rows_come_back_as_they_went_in() -> None:
    paths = _odd_paths()
    table = PathTable.from_paths(paths, names=("z", "a"))
    assert table.names[:2] == ("z", "a")  # the node list fixes the first codes
    assert list(table) == paths
    assert table[-1] == paths[-1]
    assert table.keys() == [p.key for p in paths]
    assert table.rows_of([("c", "a"), ("a", "c")]) == [2, None]
    with pytest.raises(IndexError):
        table.row(3)


def test_take_and_slices_keep_every_column() -> None:
    paths = _odd_paths()
    table = PathTable.from_paths(paths)
    assert list(table.take(np.array([2, 0]))) == [paths[2], paths[0]]
    assert list(table[1:]) == paths[1:]
    assert list(table.take(np.array([], dtype=np.int64))) == []


def test_ranked_is_rank_key_worst_first_ties_in_row_order() -> None:
    res = make_results(12, slow_nodes=["gpu03"], marginal_fraction=0.2, error_paths=3)
    paths = list(res.paths)
    tied = dataclasses.replace(paths[5], src="x", dst="y")
    paths.append(tied)  # same verdict and metric as row 5: row 5 must come first
    table = PathTable.from_paths(paths)
    for metric in Metric:
        want = sorted(range(len(paths)), key=lambda i: rank_key(paths[i], metric), reverse=True)
        assert table.ranked(metric).tolist() == want
    counts = table.counts()
    assert counts == {v: sum(p.verdict is v for p in paths) for v in Verdict}
    assert counts[Verdict.UNSAFE] >= 3


def test_values_are_nan_where_no_rtt_and_codes_map_into_another_name_list() -> None:
    table = PathTable.from_paths(_odd_paths())
    p99 = table.values(Metric.P99)
    assert math.isnan(p99[1]) and p99[0] == 30.25
    src, dst = table.codes(["c", "b"])
    assert src.tolist() == [-1, 1, 0] and dst.tolist() == [1, 0, -1]


def test_a_results_file_loads_into_the_same_rows(tmp_path: Path) -> None:
    res = decide(make_results(10, slow_nodes=["gpu02"], error_paths=2))
    write_results(tmp_path / "r.json", res)
    back = load(tmp_path / "r.json")
    assert len(back.paths) == len(res.paths) == 45
    assert [path_to_dict(p) for p in back.paths] == [path_to_dict(p) for p in res.paths]
    assert back.summary == res.summary
