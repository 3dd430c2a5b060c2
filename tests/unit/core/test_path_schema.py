"""The path schema (netqual.table.schema): every column the declaration lists goes through
results.json and through the campaign store. The fields are enumerated from the
declaration, so a new one is covered without touching this file: it fails here until the
sample sets it, the results file's codec writes and reads it, and the store keeps it or
says why not."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import make_results, write_results

from netqual.analysis.decision import decide
from netqual.analysis.stats import BINS_PER_DECADE
from netqual.campaign.store import open_store
from netqual.campaign.stored import path_columns, stored_paths
from netqual.model.engine import EngineCell, EngineEvidence, EngineName, EngineOp, EngineTransport
from netqual.model.path import PathResult, Tier, WorkloadResult
from netqual.model.stats import BulkStats, Ci95, RttStats
from netqual.model.verdict import Verdict
from netqual.results import load
from netqual.results.summary import summarize
from netqual.table.columns import Histograms
from netqual.table.kinds import (
    Codes,
    DetailsColumn,
    Floats,
    NotStored,
    Stored,
    Text,
)
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.table.schema import (
    Columns,
    Leaf,
    kind_at,
    leaves,
    value_at,
)

NODES = ("gpu01", "gpu02", "gpu03")


def _path(k: int, src: str, dst: str) -> PathResult:
    """Every field set, none to its default; numbers distinct within the path (a codec that
    swaps two fields fails), three decimals at most (the file keeps nanoseconds), and
    plausible (netqual.analysis.plausible would rewrite an impossible path)."""
    x = 100.0 * k
    samples = 20_000 + k
    first_bin = 10 + k
    rtt = RttStats(
        samples=samples,
        min_us=x + 11.125,
        p50_us=x + 12.25,
        p90_us=x + 13.375,
        p99_us=x + 14.5,
        p999_us=x + 15.625,
        max_us=x + 16.75,
        mean_us=x + 12.875,
        stdev_us=1.5 + k,
        untrusted=(f"p999-{k}",),
        ci95=Ci95(
            p50=(x + 12.0, x + 12.5),
            p90=(x + 13.0, x + 13.75),
            p99=(x + 14.25, x + 14.875),
            p999=(x + 15.5, x + 16.0),
        ),
        histogram_edges_us=tuple(10 ** ((first_bin + i) / BINS_PER_DECADE) for i in range(4)),
        histogram_counts=(10 + k, samples - 30 - 2 * k, 20 + k),
    )
    bulk = (
        BulkStats(1 << 20, 4 + k, 128 + k, 9.5 + k, x + 700.25, x + 900.5, x + 950.75, f"e{k}"),
        BulkStats(8 << 20, 8 + k, 64 + k, 19.5 + k, x + 3000.25, x + 3500.5, x + 3900.75, "e"),
    )
    workload = WorkloadResult(
        verdict=Verdict.MARGINAL,
        reasons=(f"fetch {k}",),
        budget_us=x + 800.5,
        fetch_p50_us=x + 300.25,
        fetch_p99_us=x + 400.75,
        speedup=1.875 + k,
        break_even_rtt_us=x + 190.125,
        interpolated=True,
    )
    return PathResult(
        src=src,
        dst=dst,
        transport=("tcp", "rdma")[k % 2],
        verdict=(Verdict.MARGINAL, Verdict.UNSAFE)[k % 2],
        reasons=(f"reason {k}", "and another"),
        rtt=rtt,
        bulk=bulk,
        hops=3 + k,
        tier=(Tier.SAME_RACK, Tier.CROSS_RACK)[k % 2],
        error=f"error {k}",
        started_at=f"2027-01-0{k + 5}T10:00:00+00:00",
        duration_s=2.5 + k,
        # counters that lose packets: the decision's loss evidence, made again on load
        details={
            "retries": k + 1,
            "counters": {
                "src": {"interfaces": {"eth0": {"tx_packets": 1_000 + k}}, "tcp_retrans": 10 + k},
                "dst": {"interfaces": {"eth0": {"tx_packets": 1_000 + k}}, "tcp_retrans": 0},
            },
        },
        workload=workload,
        src_nic=f"eth{k}",
        dst_nic=f"eth{k + 1}",
        rail=k + 1,
        engine=(
            EngineCell(
                EngineName.NIXL,
                f"nixl-cu12 1.5.{k}",
                EngineOp.WRITE,
                1 << 20,
                2 + k,
                EngineTransport.TCP,
                f"eth{k}",
                100 + k,
                x + 40.5,
                x + 90.25,
                3.5 + k,
                x + 5000.125,
                1.25 + k,
                f"left through eth{k + 2}",
                f"err {k}",
                EngineEvidence(
                    (f"tcp/eth{k}",),
                    f"eth{k}",
                    f"eth{k + 1}",
                    f"eth{k + 2}",
                    f"eth{k + 3}",
                    (1 << 20) * (3 + k),
                    (f"UCX_TLS=tcp{k}",),
                    0.5 + k,
                    1.5 + k,
                    x + 60.75,
                    k % 2 == 0,
                    f"killed by SIG{k}",
                ),
            ),
        ),
    )


def _sample() -> PathTable:
    """Three paths in (src, dst) name order: the order the store reads a run back in;
    decided, as a run writes them (netqual.analysis.decision: the decision columns)."""
    pairs = [("gpu01", "gpu02"), ("gpu01", "gpu03"), ("gpu02", "gpu03")]
    raw = PathTable.from_paths([_path(k, s, d) for k, (s, d) in enumerate(pairs)], NODES)
    return decide(_results(raw)).paths


def _results(table: PathTable) -> Results:
    base = make_results(len(NODES))
    assert tuple(n.name for n in base.nodes) == NODES
    return dataclasses.replace(
        base, paths=table, summary=summarize(table, base.run.policy.metric), suspects=None
    )


def _plain(group: Columns, leaf: Leaf) -> Any:
    """A column as comparable Python values: codes as the values they stand for, NaN as
    None, a histogram as its parts."""
    col = value_at(group, leaf.path)
    kind = leaf.kind
    if isinstance(kind, Codes):
        owner = group
        for part in leaf.path.split(".")[:-1]:
            owner = getattr(owner, part)
        vocab = getattr(owner, kind.vocab)
        return [vocab[c] for c in col.tolist()]
    if isinstance(col, Histograms):
        return [_nan_none(getattr(col, f.name)) for f in dataclasses.fields(col)]
    if isinstance(col, DetailsColumn):
        return list(col)
    return _nan_none(col)


def _nan_none(col: Any) -> Any:
    if isinstance(col, tuple):
        col = list(col)
    if isinstance(col, np.ndarray):
        return [_nan_none(x) for x in col.tolist()] if col.ndim > 1 else _nan_none(col.tolist())
    if isinstance(col, list):
        return [None if isinstance(x, float) and math.isnan(x) else x for x in col]
    return col


def _absent(leaf: Leaf, n: int) -> Any:
    """The column as a table of n rows without it holds it."""
    empty = PathTable.from_leaves(n, {"names": NODES})
    return _plain(empty, leaf)


LEAVES = leaves(PathTable)


def test_the_declaration_says_what_the_store_keeps_of_every_column() -> None:
    """Every value column is listed, and a field that does not say what the campaign store
    keeps of it is refused."""
    paths = {leaf.path for leaf in LEAVES}
    assert {"src", "transport", "rtt_stats.p99_us", "rtt_stats.ci95.p99", "bulk.p50_us",
            "workload.verdict", "nics.rail", "details"} <= paths  # fmt: skip
    for leaf in LEAVES:
        if isinstance(leaf.campaign, NotStored):
            assert leaf.campaign.why, leaf.path

    @dataclasses.dataclass(frozen=True, eq=False)
    class Undecided(Columns):
        RECORD = dict
        value: Any = dataclasses.field(metadata={"column": Floats()})

    with pytest.raises(TypeError, match="say what the campaign store keeps"):
        leaves(Undecided)


@pytest.mark.parametrize("leaf", LEAVES, ids=lambda leaf: leaf.path)
def test_the_sample_sets_every_column(leaf: Leaf) -> None:
    """No path (no bulk cell) of the sample holds a column's absent value."""
    table = _sample()
    col = value_at(table, leaf.path)
    if isinstance(col, Histograms):
        assert not np.isnan(col.first_bin).any() and (np.diff(col.offsets) > 0).all()
        return
    got = _nan_none(col) if isinstance(leaf.kind, Codes) else _plain(table, leaf)
    none = leaf.kind.absent(1)
    none = _nan_none(list(none) if isinstance(none, DetailsColumn) else none)[0]
    assert len(got) in (len(table), len(table.bulk.chunk_bytes)), leaf.path
    assert all(g != none for g in got), f"{leaf.path}: the sample leaves it absent ({none!r})"


def test_numbers_differ_between_columns_within_a_path() -> None:
    table = _sample()
    for i in range(len(table)):
        numbers = []
        for leaf in LEAVES:
            col = value_at(table, leaf.path)
            if isinstance(col, np.ndarray) and col.dtype.kind == "f" and len(col) == len(table):
                numbers += np.ravel(col[i]).tolist()
        assert len(numbers) == len(set(numbers)), numbers


@pytest.mark.parametrize("leaf", LEAVES, ids=lambda leaf: leaf.path)
def test_every_column_round_trips_through_results_json(tmp_path: Path, leaf: Leaf) -> None:
    table = _sample()
    back = load(write_results(tmp_path / "results.json", _results(table))).paths
    assert _plain(back, leaf) == _plain(table, leaf)


def test_rows_round_trip_through_results_json(tmp_path: Path) -> None:
    table = _sample()
    back = load(write_results(tmp_path / "results.json", _results(table))).paths
    assert list(back) == list(table)


@pytest.fixture(scope="module")
def from_store(tmp_path_factory: pytest.TempPathFactory) -> PathTable:
    """The sample, added to a campaign store and read back as the baseline rules read it."""
    tmp = tmp_path_factory.mktemp("store")
    store = open_store(tmp / "history.duckdb", create=True)
    try:
        added = store.add(_results(_sample()), source=tmp / "run", week=1)
        columns = [r[0] for r in store.con.execute("DESCRIBE paths").fetchall()]
        assert sorted(columns) == sorted(path_columns())
        return stored_paths(store.con, added.run.seq)
    finally:
        store.close()


@pytest.mark.parametrize("leaf", LEAVES, ids=lambda leaf: leaf.path)
def test_every_column_round_trips_through_the_campaign_store(
    from_store: PathTable, leaf: Leaf
) -> None:
    """A column the declaration keeps comes back as it went in (a flag: whether there was
    a value, named by the field); any other comes back absent."""
    table = _sample()
    got, sent = _plain(from_store, leaf), _plain(table, leaf)
    keep = leaf.campaign
    if isinstance(keep, Stored) and keep.back and keep.flag:
        assert isinstance(leaf.kind, Text)
        assert got == [None if x is None else leaf.kind.name for x in sent]
    elif isinstance(keep, Stored) and keep.back:
        assert got == sent
    else:
        assert got == _absent(leaf, len(table))


def test_the_store_keeps_transport_and_intervals(from_store: PathTable) -> None:
    """What campaign/stored.py lost before the schema was declared once."""
    table = _sample()
    assert [from_store.transports[c] for c in from_store.transport] == ["tcp", "rdma", "tcp"]
    for i in range(len(table)):
        assert from_store.ci95_row(i) == table.ci95_row(i)
    assert isinstance(kind_at(PathTable, "rtt_stats.ci95.p99").campaign, Stored)
