"""Paths kept as columns while they arrive (netqual.table.store): whatever way the rows are
cut into chunks and joined, every row comes back exactly as it went in; keyed paths behave
as the dict they replace; per-path details survive as compact JSON."""

from __future__ import annotations

import dataclasses
import random

import pytest
from factories import make_results

from netqual.model.path import PathResult, Tier, WorkloadResult
from netqual.model.verdict import Verdict
from netqual.planning.sampling import choose_sample, sample_size
from netqual.results import path_to_dict
from netqual.table.kinds import (
    DetailsColumn,
)
from netqual.table.paths import PathTable
from netqual.table.store import KeyedPaths, PathChunks, concat


def _paths() -> list[PathResult]:
    """A full mesh whose optional parts (workload, NICs, details, errors) appear in only
    some rows, so that chunks differ in which column groups they have."""
    base = list(make_results(8, error_paths=2, marginal_fraction=0.3).paths)
    wl = WorkloadResult(Verdict.MARGINAL, ("slow fetch",), 800.0, 400.0, None, 2.0, None, True)
    out = []
    for i, path in enumerate(base):
        p = path
        if i % 7 == 3:
            p = dataclasses.replace(p, workload=wl)
        if i % 11 == 5:
            p = dataclasses.replace(p, src_nic="eth1", dst_nic="eth2", rail=1)
        if i % 5 == 0:
            p = dataclasses.replace(p, details={"initiator": p.src, "windows": [0.5, 1.25]})
        out.append(p)
    return out


def _dicts(rows: object) -> list[dict[str, object]]:
    return [path_to_dict(p) for p in rows]  # type: ignore[attr-defined]


@pytest.mark.parametrize("chunk", [1, 3, 10, 1000])
def test_chunked_rows_equal_the_rows_of_one_table(chunk: int) -> None:
    paths = _paths()
    store = PathChunks(["n000", "n001"], chunk=chunk)
    assert [store.append(p) for p in paths] == list(range(len(paths)))
    assert len(store) == len(paths)
    # a row reads back before and after its chunk is packed
    assert path_to_dict(store.row(len(paths) - 1)) == path_to_dict(paths[-1])
    assert path_to_dict(store.row(0)) == path_to_dict(paths[0])
    whole = store.table()
    assert _dicts(whole) == _dicts(PathTable.from_paths(paths)) == _dicts(paths)
    assert whole.names[:2] == ("n000", "n001")
    assert store.table() is whole  # joined once


def test_concat_joins_tables_with_other_node_lists_and_transports() -> None:
    paths = _paths()
    left = PathTable.from_paths(paths[:9])
    right = PathTable.from_paths(
        [dataclasses.replace(p, transport="rdma") for p in reversed(paths[9:])]
    )
    assert left.names != right.names[: len(left.names)]
    joined = concat([left, right], ["zz"])
    assert joined.names[0] == "zz"
    assert _dicts(joined) == _dicts(left) + _dicts(right)
    assert joined.transports == ("tcp", "rdma")
    assert len(concat([], ["a"])) == 0 and concat([], ["a"]).names == ("a",)


def test_keyed_paths_behave_as_a_dict_and_compact_what_was_replaced() -> None:
    paths = _paths()
    keyed, plain = KeyedPaths(PathChunks(chunk=4)), {}
    for p in paths:
        keyed[p.key] = plain[p.key] = p
    again = dataclasses.replace(paths[2], verdict=Verdict.UNSAFE, reasons=("again",))
    keyed[again.key] = plain[again.key] = again
    assert list(keyed) == list(plain) and len(keyed) == len(plain)
    assert path_to_dict(keyed[again.key]) == path_to_dict(again)
    assert keyed.pop(paths[0].key).key == paths[0].key
    del plain[paths[0].key]
    assert paths[0].key not in keyed and keyed.pop(paths[0].key, None) is None
    assert keyed.stored == len(paths) + 1
    for p in paths[1:20]:  # more than half the rows dead: packed anew, values intact
        del keyed[p.key], plain[p.key]
    assert keyed.stored < len(paths) - 19 + 4
    assert _dicts(keyed.values()) == _dicts(plain.values())
    assert _dicts(keyed.table()) == _dicts(plain.values())
    wanted = {p.key for p in paths[25:27]}
    assert list(keyed.only(wanted)) == [k for k in plain if k in wanted]
    copied = keyed.copy()
    copied[paths[0].key] = paths[0]
    assert paths[0].key not in keyed


def test_details_are_kept_as_json_and_read_back_as_dicts() -> None:
    col = DetailsColumn.of([{"a": 1, "b": [0.1, 2e-7], "c": {"d": None}}, None, {}])
    assert len(col) == 3
    assert col[0] == {"a": 1, "b": [0.1, 2e-7], "c": {"d": None}}
    assert col[1] is None and col[2] is None  # an empty dict is no details
    assert list(col.take([2, 0])) == [None, col[0]]
    assert list(col[1:]) == [None, None]
    assert list(DetailsColumn.concat([col, col])) == [*col, *col]


def test_repeated_texts_are_one_object_in_a_table() -> None:
    paths = [
        PathResult(
            f"a{i}", "b", "tcp", Verdict.MARGINAL, ("p99 " + "x" * 40, "y"), tier=Tier.UNKNOWN
        )
        for i in range(4)
    ]
    t = PathTable.from_paths(paths)
    assert t.reasons[0] is t.reasons[3]
    assert t.reasons[0][0] is t.reasons[2][0]


def _sample_by_records(
    paths: list[PathResult], fraction: float, minimum: int, seed: int
) -> list[PathResult]:
    """The record-by-record definition the columnar sample replaced (netqual 0.x)."""
    ok = [p for p in paths if p.error is None and p.rtt is not None]
    rng = random.Random(seed)
    by_tier: dict[Tier, list[PathResult]] = {}
    for p in ok:
        by_tier.setdefault(p.tier or Tier.UNKNOWN, []).append(p)
    chosen = [rng.choice(by_tier[t]) for t in sorted(by_tier, key=lambda t: t.value)]
    taken = {p.key for p in chosen}
    rest = [p for p in ok if p.key not in taken]
    rng.shuffle(rest)
    return chosen + rest[: max(0, sample_size(len(ok), fraction, minimum) - len(chosen))]


def test_the_interference_sample_is_the_record_by_record_one() -> None:
    paths = [
        dataclasses.replace(p, tier=(Tier.SAME_RACK, Tier.CROSS_RACK, Tier.REMOTE)[i % 3])
        for i, p in enumerate(_paths())
    ]
    for seed in (1, 2, 3, 4):
        want = [p.key for p in _sample_by_records(paths, 0.2, 3, seed)]
        assert [p.key for p in choose_sample(PathTable.from_paths(paths), 0.2, 3, seed)] == want
        assert [p.key for p in choose_sample(paths, 0.2, 3, seed)] == want
        assert len(want) >= 3
