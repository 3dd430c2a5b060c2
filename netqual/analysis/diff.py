"""Compare two runs: paths that changed class, metric deltas, new and missing paths.

"Worse" means what the re-qualification gate fails: a path that dropped a class, or whose
p99 rose by more than ``increase_pct`` percent and at least ``min_delta_us`` (the gate's
``max_p99_increase_pct`` and ``min_delta_us``; ``p99_rises`` is the one test both use).
That rise judges p99 whatever the policy's metric (the gate's key names it); the deltas,
the class changes and their noise use the new run's policy metric, and the p99 rises are
shown with p99's values and p99's intervals. A change whose old and new 95% confidence
intervals (of the metric shown) overlap lies within the run-to-run noise of the two runs
and is marked so.

Paths match by (src, dst) in either direction, so a re-run that measured a pair from the
other end still lines up.

A 1,024-node mesh is half a million common paths, so the comparison is a join of the two
runs' ``PathTable`` columns (int64 keys ``src * N + dst``, sorted and searched) and every
verdict change, delta and noise test is an array; a ``PathChange`` record is built only for
a path that is shown (``Changes`` is a lazy sequence of them), and ``diffjson.diff_json``
writes the every-path JSON straight from the columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import overload

import numpy as np

from netqual.analysis import rise
from netqual.analysis.comparable import Difference, note
from netqual.analysis.narrative import preliminary_note
from netqual.analysis.rise import DEFAULT_INCREASE_PCT, DEFAULT_MIN_DELTA_US, overlapping
from netqual.model.path import PathResult, path_label
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.table.join import NOT_FOUND, PairIndex
from netqual.table.paths import (
    BoolArray,
    FloatArray,
    IntArray,
    PathTable,
    union_names,
    verdict_counts,
)
from netqual.table.run import Results

# within_noise as a column: the two CIs overlap, do not, or a run has no CI for the metric
NOISE_UNKNOWN, NOISE_NO, NOISE_YES = -1, 0, 1


@dataclass(frozen=True)
class PathChange:
    old: PathResult
    new: PathResult
    metric: Metric

    @property
    def label(self) -> str:
        return path_label(self.new.src, self.new.dst)

    @property
    def old_us(self) -> float | None:
        return self.old.rtt.value(self.metric) if self.old.rtt else None

    @property
    def new_us(self) -> float | None:
        return self.new.rtt.value(self.metric) if self.new.rtt else None

    @property
    def delta_us(self) -> float | None:
        if self.old_us is None or self.new_us is None:
            return None
        return self.new_us - self.old_us

    @property
    def delta_pct(self) -> float | None:
        if self.delta_us is None or not self.old_us:
            return None
        return 100.0 * self.delta_us / self.old_us

    @property
    def class_change(self) -> int:
        """> 0: worse class now, < 0: better, 0: same."""
        return self.new.verdict.rank - self.old.verdict.rank

    @property
    def within_noise(self) -> bool | None:
        """Both runs' 95% CIs of the metric overlap (None: a run has no CI for it)."""
        a = None if self.old.rtt is None else self.old.rtt.ci95.of(self.metric)
        b = None if self.new.rtt is None else self.new.rtt.ci95.of(self.metric)
        if a is None or b is None:
            return None
        return a[0] <= b[1] and b[0] <= a[1]


# -- the common paths as columns -----------------------------------------------------


def _ci_bounds(t: PathTable, rows: IntArray, metric: Metric) -> tuple[FloatArray, FloatArray]:
    """Low and high of each row's CI of ``metric``, NaN where it has none."""
    return t.ci95_low_us[metric][rows], t.ci95_high_us[metric][rows]


@dataclass(frozen=True, eq=False)
class Matched:
    """Every common path as columns: pair i is old row ``old_rows[i]`` and new row
    ``new_rows[i]``, pairs in the new run's row order."""

    old: PathTable
    new: PathTable
    metric: Metric
    old_rows: IntArray
    new_rows: IntArray

    def __len__(self) -> int:
        return len(self.new_rows)

    @cached_property
    def old_us(self) -> FloatArray:
        """The metric in the old run, NaN where that path has no RTT."""
        return self.old.values(self.metric)[self.old_rows]

    @cached_property
    def new_us(self) -> FloatArray:
        return self.new.values(self.metric)[self.new_rows]

    @cached_property
    def delta_us(self) -> FloatArray:
        """NaN where either side has no RTT (``PathChange.delta_us`` None)."""
        return self.new_us - self.old_us

    @cached_property
    def class_change(self) -> IntArray:
        """> 0: worse class now, < 0: better, 0: same."""
        return self.new.verdict[self.new_rows] - self.old.verdict[self.old_rows]

    @cached_property
    def noise(self) -> IntArray:
        """``PathChange.within_noise`` as -1 (unknown), 0 (apart) or 1 (CIs overlap)."""
        a_lo, a_hi = _ci_bounds(self.old, self.old_rows, self.metric)
        b_lo, b_hi = _ci_bounds(self.new, self.new_rows, self.metric)
        known = ~(np.isnan(a_lo) | np.isnan(a_hi) | np.isnan(b_lo) | np.isnan(b_hi))
        overlap = overlapping(a_lo, a_hi, b_lo, b_hi)
        return np.where(known, np.where(overlap, NOISE_YES, NOISE_NO), NOISE_UNKNOWN)

    def judging(self, metric: Metric) -> Matched:
        """The same pairs with another metric's values, deltas and noise."""
        if metric is self.metric:
            return self
        return Matched(self.old, self.new, metric, self.old_rows, self.new_rows)

    @cached_property
    def largest_first(self) -> IntArray:
        """Pair positions, largest absolute change first (no value on a side: first of all),
        then by label; ties keep the new run's row order (lexsort is stable)."""
        size = np.where(np.isnan(self.delta_us), np.inf, np.abs(self.delta_us))
        order: IntArray = np.lexsort((self.label_order, -size))
        return order

    def worse(self, pct: float, min_delta_us: float) -> BoolArray:
        """Per pair, ``rise.worse``: a worse class or a p99 rise (whatever the metric)."""
        return rise.worse(
            self.old.verdict[self.old_rows], self.new.verdict[self.new_rows],
            self.old.values(Metric.P99)[self.old_rows], self.new.values(Metric.P99)[self.new_rows],
            pct, min_delta_us,
        )  # fmt: skip

    @cached_property
    def label_order(self) -> IntArray:
        """A sort key per pair that orders as the "src -> dst" labels (new's names) do."""
        return _label_keys(self.new, self.new_rows)

    def change(self, i: int) -> PathChange:
        """Pair i as a record, for showing it."""
        return PathChange(
            self.old.row(int(self.old_rows[i])), self.new.row(int(self.new_rows[i])), self.metric
        )


def _label_keys(t: PathTable, rows: IntArray) -> IntArray:
    """int64 keys that sort rows as their "src -> dst" strings sort.

    Where no node name contains " -> ", comparing two labels is comparing ``src + " -> "``
    and then ``dst``: two different ``src + " -> "`` differ before either ends. Otherwise
    (a name with an arrow in it) the labels themselves are ranked."""
    names = t.names
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    if any(" -> " in n for n in names):
        labels = [
            path_label(names[a], names[b])
            for a, b in zip(t.src[rows].tolist(), t.dst[rows].tolist(), strict=True)
        ]
        rank = {s: i for i, s in enumerate(sorted(set(labels)))}
        return np.array([rank[s] for s in labels], dtype=np.int64)
    n = len(names)
    src_rank = np.empty(n, dtype=np.int64)
    src_rank[sorted(range(n), key=lambda k: names[k] + " -> ")] = np.arange(n)
    dst_rank = np.empty(n, dtype=np.int64)
    dst_rank[sorted(range(n), key=names.__getitem__)] = np.arange(n)
    keys: IntArray = src_rank[t.src[rows]] * n + dst_rank[t.dst[rows]]
    return keys


class Changes(Sequence[PathChange]):
    """Some of the matched pairs, in order: a sequence of ``PathChange`` whose records are
    built only when indexed or iterated (the shown ones), with the pairs' columns for
    whatever runs over all of them."""

    def __init__(self, matched: Matched, positions: IntArray) -> None:
        self.matched = matched
        self.positions = positions  # into matched

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> PathChange: ...
    @overload
    def __getitem__(self, i: slice) -> Changes: ...
    def __getitem__(self, i: int | slice) -> PathChange | Changes:
        if isinstance(i, slice):
            return Changes(self.matched, self.positions[i])
        return self.matched.change(int(self.positions[i]))

    def __iter__(self) -> Iterator[PathChange]:
        return (self.matched.change(k) for k in self.positions.tolist())

    def where(self, keep: BoolArray) -> Changes:
        """The pairs of this sequence where ``keep`` (a column over all matched pairs)."""
        return Changes(self.matched, self.positions[keep[self.positions]])

    def __add__(self, other: Changes) -> Changes:
        return Changes(self.matched, np.concatenate((self.positions, other.positions)))


class Rows(Sequence[PathResult]):
    """Some rows of a table, in order, as ``PathResult`` records built when read."""

    def __init__(self, table: PathTable, rows: IntArray) -> None:
        self.table = table
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, i: int) -> PathResult: ...
    @overload
    def __getitem__(self, i: slice) -> Rows: ...
    def __getitem__(self, i: int | slice) -> PathResult | Rows:
        if isinstance(i, slice):
            return Rows(self.table, self.rows[i])
        return self.table.row(int(self.rows[i]))

    def __iter__(self) -> Iterator[PathResult]:
        return (self.table.row(k) for k in self.rows.tolist())


@dataclass(frozen=True, eq=False)
class RunDiff:
    metric: Metric
    old_source: str
    new_source: str
    old_started_at: str
    new_started_at: str
    old_counts: Mapping[Verdict, int]
    new_counts: Mapping[Verdict, int]
    changed_class: Changes  # worse first, then better; each by delta
    deltas: Changes  # every common path, largest absolute metric change first
    new_paths: Rows
    missing_paths: Rows
    worse_p99: Changes  # same class, but p99 up beyond the thresholds; p99's values
    increase_pct: float = DEFAULT_INCREASE_PCT
    min_delta_us: float = DEFAULT_MIN_DELTA_US
    # compared anyway (--allow-incomparable): what the two runs do not share
    incomparable: tuple[Difference, ...] = ()
    # narrative.preliminary_note of each run that kept fewer samples than its policy needs
    old_preliminary: str | None = None
    new_preliminary: str | None = None

    @property
    def incomparable_note(self) -> str | None:
        """What every output says when the runs were compared anyway; None otherwise."""
        return note(self.incomparable, "the old run") if self.incomparable else None

    @property
    def worse(self) -> Changes:
        """What the re-qualification gate fails (``rise.worse``): the class drops first, then
        the p99 rises within a class or a better one."""
        m = self.deltas.matched
        drops = m.worse(self.increase_pct, self.min_delta_us) & (m.class_change > 0)
        rises = Changes(m, self.worse_p99.positions)  # in the run's metric
        return self.changed_class.where(drops) + rises

    @property
    def noise(self) -> Changes:
        """Changes whose two 95% confidence intervals overlap."""
        return self.deltas.where(self.deltas.matched.noise == NOISE_YES)

    @property
    def judged(self) -> int:
        """How many changes both runs have a confidence interval for."""
        return int(np.count_nonzero(self.deltas.matched.noise != NOISE_UNKNOWN))

    @property
    def measured(self) -> Changes:
        """The common paths with the metric on both sides, largest change first."""
        return self.deltas.where(~np.isnan(self.deltas.matched.delta_us))

    @property
    def better(self) -> Changes:
        return self.changed_class.where(self.deltas.matched.class_change < 0)


@dataclass(frozen=True)
class _Join:
    """Which old row each new row matches (-1: new path), and which old rows matched."""

    old_row: IntArray  # per new row
    old_matched: BoolArray  # per old row: its key was matched (not missing)
    before: IntArray  # one old row per matched key (the one a new row matched)


def _join(old: PathTable, new: PathTable) -> _Join:
    """Match new rows to old ones by (src, dst), else (dst, src). Where old has one key
    twice, its last row is the one matched (a dict of the rows keeps the last)."""
    names = union_names(old.names, new.names)
    index = PairIndex.of(old, names)
    pos = index.match(new)
    found = pos != NOT_FOUND
    hit = np.zeros(len(index.keys), dtype=np.bool_)
    hit[pos[found]] = True
    old_row = np.full(len(new), -1, dtype=np.int64)
    old_row[found] = index.last[pos[found]]
    return _Join(
        old_row=old_row,
        old_matched=hit[index.position(old.pair_keys(names))],
        before=index.last[hit],
    )


def diff_runs(
    old: Results,
    new: Results,
    *,
    old_source: str = "old",
    new_source: str = "new",
    increase_pct: float = DEFAULT_INCREASE_PCT,
    min_delta_us: float = DEFAULT_MIN_DELTA_US,
    incomparable: tuple[Difference, ...] = (),
) -> RunDiff:
    """Judge with the new run's policy metric (the one its verdicts came from)."""
    metric = new.run.policy.metric
    j = _join(old.paths, new.paths)
    paired = j.old_row >= 0
    m = Matched(old.paths, new.paths, metric, j.old_row[paired], np.flatnonzero(paired))
    by_delta = m.largest_first
    size = np.where(np.isnan(m.delta_us), np.inf, np.abs(m.delta_us))
    moved = np.flatnonzero(m.class_change != 0)
    by_class = moved[np.lexsort((m.label_order[moved], -size[moved], -m.class_change[moved]))]
    deltas = Changes(m, by_delta)
    # A re-test measures only the suspects: the other paths are not missing, just not
    # re-tested, and "before" counts only the re-tested ones.
    retest = new.retest_of is not None
    missing = np.zeros(0, dtype=np.int64) if retest else np.flatnonzero(~j.old_matched)
    before = old.paths.verdict[j.before] if retest else old.paths.verdict
    return RunDiff(
        metric=metric,
        old_source=old_source,
        new_source=new_source,
        old_started_at=old.run.started_at,
        new_started_at=new.run.started_at,
        old_counts=verdict_counts(before),
        new_counts=verdict_counts(new.paths.verdict),
        changed_class=Changes(m, by_class),
        deltas=deltas,
        new_paths=Rows(new.paths, np.flatnonzero(~paired)),
        missing_paths=Rows(old.paths, missing),
        worse_p99=_p99_rises(m, increase_pct, min_delta_us),
        increase_pct=increase_pct,
        min_delta_us=min_delta_us,
        incomparable=incomparable,
        old_preliminary=preliminary_note(old) if old.preliminary else None,
        new_preliminary=preliminary_note(new) if new.preliminary else None,
    )


def _p99_rises(m: Matched, increase_pct: float, min_delta_us: float) -> Changes:
    """Same class, p99 up beyond the thresholds: p99's values and intervals, largest p99
    change first (the run's metric may be another)."""
    p99 = m.judging(Metric.P99)
    up = m.worse(increase_pct, min_delta_us) & (m.class_change <= 0)
    return Changes(p99, p99.largest_first).where(up)
