"""Judging paths by a workload on the ``PathTable``'s columns: the one definition.

A run judges each pair as it finishes (``judge.judged``: a one-row table), and
``report --workload`` and ``gate --workload`` re-judge a whole run: a 1,024-node full mesh
is half a million paths, so here the cells, fetch times, speedups, verdicts and break-even
RTTs are numpy over the bulk CSR columns, and only the reasons (per-path text by contract)
are built per path, by ``Wording``. tests/support/workload_oracle.py keeps the per-path version
the columns must agree with.
"""

from __future__ import annotations

import math
import operator
from itertools import repeat

import numpy as np

from netqual.model.ttft import break_even_from_cell_us, fetch_from_cell_us
from netqual.model.verdict import Verdict
from netqual.model.workload import Workload
from netqual.table.paths import (
    VERDICTS,
    BoolArray,
    BulkColumns,
    FloatArray,
    IntArray,
    PathTable,
    WorkloadColumns,
)
from netqual.workload.wording import Wording, cell_label

NONE = -1  # "no such cell" in a per-path cell index


def speedup_ranks(w: Workload, speedup: FloatArray) -> IntArray:
    """The verdict rank of each speedup (budget / chunk fetch p99): offload-safe from
    ``safe_speedup`` up, unsafe below ``unsafe_speedup`` or without one (NaN), marginal
    between. The one speedup -> class of paths, tiers and the report."""
    ranks = np.full(len(speedup), Verdict.UNSAFE.rank, dtype=np.int64)
    ranks[speedup >= w.safe_speedup] = Verdict.SAFE.rank
    ranks[(speedup < w.safe_speedup) & (speedup >= w.unsafe_speedup)] = Verdict.MARGINAL.rank
    return ranks


def speedup_verdict(w: Workload, speedup: float | None) -> Verdict:
    """``speedup_ranks`` of one speedup (None: unsafe)."""
    value = math.nan if speedup is None else speedup
    return VERDICTS[int(speedup_ranks(w, np.array([value], dtype=np.float64))[0])]


def _is_none(values: tuple[object, ...]) -> BoolArray:
    return np.fromiter(map(operator.is_, values, repeat(None)), np.bool_, len(values))


def _or_none(values: FloatArray, present: BoolArray) -> list[float | None]:
    """Python floats, None where not ``present`` (as a record holds them)."""
    col = values.astype(object)
    col[~present] = None
    out: list[float | None] = col.tolist()
    return out


def _first_per_path(cells: IntArray, owner: IntArray, n: int) -> IntArray:
    """Per path, the first of ``cells`` that it owns (NONE where it owns none); ``cells``
    must be grouped by owner, the wanted one first in its group."""
    own = owner[cells]
    first = np.ones(len(cells), dtype=np.bool_)
    first[1:] = own[1:] != own[:-1]
    out = np.full(n, NONE, dtype=np.int64)
    out[own[first]] = cells[first]
    return out


def _best(cells: IntArray, owner: IntArray, n: int, *keys: IntArray) -> IntArray:
    """Per path, the cell of ``cells`` that ``min`` over ``keys`` picks (most significant
    key last, as np.lexsort reads them): the smallest, the earliest cell on a tie."""
    order = np.lexsort((cells, *(k[cells] for k in keys), owner[cells]))
    return _first_per_path(cells[order], owner, n)


class _Fetch:
    """Fetch times of the paths that have one: the workload's own cell where measured, else
    an estimate from the path's other good cells, path for path."""

    def __init__(self, b: BulkColumns, n: int, w: Workload) -> None:
        self.b, self.n, self.w = b, n, w
        self.owner: IntArray = np.repeat(np.arange(n, dtype=np.int64), np.diff(b.offsets))
        self.own_cell: BoolArray = (b.chunk_bytes == w.chunk_bytes) & (b.depth == w.ranks_per_node)
        self.good: BoolArray = _is_none(b.error) & (b.goodput_gbps > 0)
        self.p50: FloatArray = np.full(n, math.nan)
        self.p99: FloatArray = np.full(n, math.nan)
        self.basis: dict[int, str] = {}  # row -> cells an estimate came from

    def failed_cell(self) -> IntArray:
        """Per path, its first own cell that failed (NONE: none did)."""
        broken = np.fromiter(map(bool, self.b.error), np.bool_, len(self.b.error))
        return _first_per_path(np.flatnonzero(self.own_cell & broken), self.owner, self.n)

    def has_good(self) -> BoolArray:
        got: BoolArray = np.bincount(self.owner[self.good], minlength=self.n) > 0
        return got

    def measure(self, rows: BoolArray) -> BoolArray:
        """Fill the fetch of ``rows``; True where it is an estimate (no good own cell)."""
        exact = _first_per_path(np.flatnonzero(self.own_cell & self.good), self.owner, self.n)
        measured = rows & (exact >= 0)
        self.p50[measured] = self.b.p50_us[exact[measured]]
        self.p99[measured] = self.b.p99_us[exact[measured]]
        estimated = rows & ~measured
        if estimated.any():
            self._estimate(estimated)
        return estimated

    def _estimate(self, rows: BoolArray) -> None:
        """A linear estimate in bytes in flight, per path: between the nearest cells below
        and above the target, else the nearest cell scaled at its goodput. On equal bytes in
        flight the cell at the workload's depth wins, then the earlier cell."""
        b, owner, n = self.b, self.owner, self.n
        inflight: IntArray = b.chunk_bytes * b.depth
        target = self.w.chunk_bytes * self.w.ranks_per_node
        other_depth = (b.depth != self.w.ranks_per_node).astype(np.int64)
        cells = np.flatnonzero(self.good & rows[owner])
        below = cells[inflight[cells] <= target]
        above = cells[inflight[cells] >= target]
        # max over (inflight, depth == d) below; min over (inflight, depth != d) above
        lo = _best(below, owner, n, other_depth, -inflight)[rows]
        hi = _best(above, owner, n, other_depth, inflight)[rows]
        # only one side: the nearest in log(bytes in flight), i.e. the largest below or the
        # smallest above (the log is monotonic on one side, so no log is needed)
        near = np.where(lo >= 0, _best(below, owner, n, -inflight)[rows], NONE)
        near = np.where(hi >= 0, _best(above, owner, n, inflight)[rows], near)
        both = (lo >= 0) & (hi >= 0)
        span = both & (inflight[lo] != inflight[hi])
        p50, p99 = b.p50_us, b.p99_us
        t = (target - inflight[lo]) / np.where(span, inflight[hi] - inflight[lo], 1)
        extra = (target - inflight[near]) * 8 / (b.goodput_gbps[near] * 1e3)
        s50, s99 = p50[near] + extra, p99[near] + extra
        self.p50[rows] = np.where(
            span,
            p50[lo] + t * (p50[hi] - p50[lo]),
            np.where(both, p50[lo], np.where(s50 > 0, s50, 0.0)),
        )
        self.p99[rows] = np.where(
            span,
            p99[lo] + t * (p99[hi] - p99[lo]),
            np.where(both, p99[lo], np.where(s99 > 0, s99, 0.0)),
        )
        gbps = b.goodput_gbps[near].tolist()
        self.basis = {
            i: (
                f"{a} and {z} cells"
                if s
                else f"{a} cell"
                if both_
                else f"{m} cell (scaled at its {g:.1f} Gbit/s)"
            )
            for i, a, z, m, g, s, both_ in zip(
                np.flatnonzero(rows).tolist(),
                _labels(b, lo),
                _labels(b, hi),
                _labels(b, near),
                gbps,
                span.tolist(),
                both.tolist(),
                strict=True,
            )
        }


def _labels(b: BulkColumns, cells: IntArray) -> list[str]:
    """Each cell's "chunk x depth" label, formatted once per distinct pair."""
    chunk, depth = b.chunk_bytes[cells], b.depth[cells]
    key = chunk * (int(depth.max(initial=0)) + 1) + depth
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    text = [
        cell_label(c, d) for c, d in zip(chunk[first].tolist(), depth[first].tolist(), strict=True)
    ]
    return [text[k] for k in inverse.ravel().tolist()]


def judge_columns(table: PathTable, w: Workload) -> WorkloadColumns:
    """Every path's workload verdict, as ``judge`` gives it path by path."""
    say = Wording(w)
    n = len(table)
    fetch = _Fetch(table.bulk, n, w)
    path_failed = ~_is_none(table.error)
    cell = fetch.failed_cell()
    cell_failed = ~path_failed & (cell >= 0)
    fetched = ~path_failed & ~cell_failed & fetch.has_good()
    interpolated = fetch.measure(fetched)
    p50, p99 = fetch.p50, fetch.p99
    has_rtt = fetched & table.has_rtt
    rtt_p99 = table.rtt["p99"]
    if say.extra_trips:  # the one TTFT model: the cell's round trip plus n - 1 more
        n_trips = w.round_trips_per_chunk
        for col, rtt in ((p50, table.rtt["p50"]), (p99, rtt_p99)):
            got = fetch_from_cell_us(col[has_rtt], rtt[has_rtt], n_trips)
            # fewer than one round trip a chunk (a batched connector): never below the bytes
            col[has_rtt] = np.maximum(got, col[has_rtt] - rtt[has_rtt])
    speedup = np.full(n, math.nan)
    pays = fetched & (p99 > 0)
    speedup[pays] = w.budget_us / p99[pays]
    speedup[fetched & ~pays] = math.inf
    verdict = speedup_ranks(w, speedup)  # NaN: not fetched
    room = break_even_from_cell_us(w.budget_us, p99, rtt_p99, w.round_trips_per_chunk)
    room = np.where(np.isinf(room), math.nan, room)  # no serial round trip: no line
    break_even = np.full(n, math.nan)
    positive = has_rtt & (room > 0)
    break_even[positive] = room[positive]
    return WorkloadColumns(
        verdict=verdict,
        reasons=_reasons(
            say, table, fetch, cell, path_failed, cell_failed, fetched, verdict, speedup, break_even
        ),
        budget_us=np.full(n, w.budget_us),
        fetch_p50_us=p50,
        fetch_p99_us=p99,
        speedup=speedup,
        break_even_rtt_us=break_even,
        interpolated=interpolated,
    )


def _reasons(
    say: Wording,
    table: PathTable,
    fetch: _Fetch,
    cell: IntArray,
    path_failed: BoolArray,
    cell_failed: BoolArray,
    fetched: BoolArray,
    verdict: IntArray,
    speedup: FloatArray,
    break_even: FloatArray,
) -> tuple[tuple[str, ...], ...]:
    """Per path, the reasons ``judge`` gives: one shared tuple for each path that has no
    fetch (failed, unmeasured), the path's own numbers in words for each that has one."""
    reasons = [say.unmeasured] * len(table)
    for i in np.flatnonzero(path_failed).tolist():
        reasons[i] = say.path_failed
    rows = np.flatnonzero(cell_failed)
    errors = table.bulk.error
    for i, k in zip(rows.tolist(), cell[rows].tolist(), strict=True):
        reasons[i] = say.cell_failed(errors[k])
    rows = np.flatnonzero(fetched)
    rtt = _or_none(table.rtt["p99"][rows], table.has_rtt[rows])
    basis = fetch.basis
    for i, v, p99, s, r, be in zip(
        rows.tolist(),
        verdict[rows].tolist(),
        fetch.p99[rows].tolist(),
        speedup[rows].tolist(),
        rtt,
        _or_none(break_even[rows], ~np.isnan(break_even[rows])),
        strict=True,
    ):
        reasons[i] = say.fetched(VERDICTS[v], p99, s, r, be, basis.get(i))
    return tuple(reasons)
