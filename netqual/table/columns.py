"""The parts of ``PathTable`` (netqual.table.paths) that are not the table: the array types,
the shapes a row source must have, the column groups of a path's variable parts (bulk
cells, workload verdicts, NICs, confidence intervals) with their CSR helpers, and the
array helpers every columnar rule shares (``worst_per_group``, ``union_names``).

Conventions (as ``PathTable``'s): a float column holds NaN for "absent", an integer column
-1 where -1 cannot be a value; variable-length parts are CSR, path i owning
``offsets[i]:offsets[i + 1]``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

import msgspec
import numpy as np
import numpy.typing as npt

from netqual.model.path import Tier, WorkloadResult
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

VERDICTS: tuple[Verdict, ...] = (Verdict.SAFE, Verdict.MARGINAL, Verdict.UNSAFE)
TIERS: tuple[Tier, ...] = tuple(Tier)
_get = operator.attrgetter
NO_HOPS = -1
_EMPTY: tuple[str, ...] = ()
_NAN = math.nan


def opt_float(x: float) -> float | None:
    return None if math.isnan(x) else x


def floats_column(values: Iterable[float | None]) -> FloatArray:
    """A float column, None -> NaN; the common all-None and no-None cases at C speed."""
    items = list(values)
    nones = items.count(None)
    if nones == len(items):
        return np.full(len(items), _NAN)
    if not nones:
        return np.array(items, dtype=np.float64)
    return np.fromiter((_NAN if v is None else v for v in items), np.float64, len(items))


# -- the shapes a row source must have (PathResult, or the decoder's typed wire records) --


class RttLike(Protocol):
    @property
    def samples(self) -> int: ...
    @property
    def untrusted(self) -> Sequence[str]: ...
    @property
    def ci95(self) -> Any: ...  # Ci95, or a record with its fields (p50, ...: (low, high))
    @property
    def histogram_bins(self) -> tuple[float, float] | None: ...
    @property
    def histogram_counts(self) -> Sequence[int]: ...


class BulkLike(Protocol):
    @property
    def chunk_bytes(self) -> int: ...
    @property
    def depth(self) -> int: ...
    @property
    def reads(self) -> int: ...
    @property
    def goodput_gbps(self) -> float: ...
    @property
    def completion_p50_us(self) -> float: ...
    @property
    def completion_p99_us(self) -> float: ...
    @property
    def completion_max_us(self) -> float: ...
    @property
    def error(self) -> str | None: ...


class WorkloadLike(Protocol):
    @property
    def verdict(self) -> Verdict: ...
    @property
    def reasons(self) -> Sequence[str]: ...
    @property
    def budget_us(self) -> float: ...
    @property
    def fetch_p50_us(self) -> float | None: ...
    @property
    def fetch_p99_us(self) -> float | None: ...
    @property
    def speedup(self) -> float | None: ...
    @property
    def break_even_rtt_us(self) -> float | None: ...
    @property
    def interpolated(self) -> bool: ...


class PathLike(Protocol):
    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def transport(self) -> str: ...
    @property
    def verdict(self) -> Verdict: ...
    @property
    def reasons(self) -> Sequence[str]: ...
    @property
    def rtt(self) -> Any: ...  # RttLike | None, plus the statistics by f"{name}_us"
    @property
    def bulk(self) -> Sequence[Any]: ...  # BulkLike
    @property
    def hops(self) -> int | None: ...
    @property
    def tier(self) -> Tier | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def started_at(self) -> str | None: ...
    @property
    def duration_s(self) -> float | None: ...
    @property
    def details(self) -> Mapping[str, object] | None: ...
    @property
    def workload(self) -> Any: ...  # WorkloadLike | None


@dataclass(frozen=True, eq=False)
class BulkColumns:
    """Bulk cells of all paths, flat; path i owns rows ``offsets[i]:offsets[i + 1]``."""

    offsets: IntArray
    chunk_bytes: IntArray
    depth: IntArray
    reads: IntArray
    goodput_gbps: FloatArray
    p50_us: FloatArray
    p99_us: FloatArray
    max_us: FloatArray
    error: tuple[str | None, ...]

    def take(self, rows: IntArray) -> BulkColumns:
        cells = csr_rows(self.offsets, rows)
        return BulkColumns(
            offsets=csr_offsets(self.offsets, rows),
            chunk_bytes=self.chunk_bytes[cells],
            depth=self.depth[cells],
            reads=self.reads[cells],
            goodput_gbps=self.goodput_gbps[cells],
            p50_us=self.p50_us[cells],
            p99_us=self.p99_us[cells],
            max_us=self.max_us[cells],
            error=tuple(self.error[k] for k in cells.tolist()),
        )


@dataclass(frozen=True, eq=False)
class WorkloadColumns:
    """Per-path workload verdicts (docs/workload.md); ``verdict`` -1 where a path has none."""

    verdict: IntArray
    reasons: tuple[tuple[str, ...], ...]
    budget_us: FloatArray
    fetch_p50_us: FloatArray
    fetch_p99_us: FloatArray
    speedup: FloatArray
    break_even_rtt_us: FloatArray
    interpolated: BoolArray

    def take(self, rows: IntArray) -> WorkloadColumns:
        idx = rows.tolist()
        return WorkloadColumns(
            verdict=self.verdict[rows],
            reasons=tuple(self.reasons[i] for i in idx),
            budget_us=self.budget_us[rows],
            fetch_p50_us=self.fetch_p50_us[rows],
            fetch_p99_us=self.fetch_p99_us[rows],
            speedup=self.speedup[rows],
            break_even_rtt_us=self.break_even_rtt_us[rows],
            interpolated=self.interpolated[rows],
        )


@dataclass(frozen=True, eq=False)
class NicColumns:
    """The NICs each path ran between and their rail (docs/rails.md); ``rail`` -1 where a
    path has none."""

    src_nic: tuple[str | None, ...]
    dst_nic: tuple[str | None, ...]
    rail: IntArray

    def take(self, rows: IntArray) -> NicColumns:
        idx = rows.tolist()
        return NicColumns(
            src_nic=tuple(self.src_nic[i] for i in idx),
            dst_nic=tuple(self.dst_nic[i] for i in idx),
            rail=self.rail[rows],
        )

    def rails(self) -> list[int]:
        """The rails present, in order."""
        return sorted(set(self.rail[self.rail >= 0].tolist()))


class DetailsColumn(Sequence[Mapping[str, object] | None]):
    """Per-path ``details`` (free-form, read one path at a time: a report's path, a CSV line,
    counter evidence) kept as compact JSON. Half a million small dicts take ~800 bytes
    each, their JSON ~300; a path's dict is decoded when it is read."""

    __slots__ = ("_items",)

    def __init__(self, items: Sequence[bytes | None]) -> None:
        self._items = tuple(items)

    @classmethod
    def of(cls, values: Iterable[Mapping[str, object] | None]) -> DetailsColumn:
        """An empty or absent dict is None."""
        enc = msgspec.json.encode
        return cls([enc(d) if d else None for d in values])

    @classmethod
    def concat(cls, columns: Iterable[DetailsColumn]) -> DetailsColumn:
        return cls([x for c in columns for x in c._items])

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> Mapping[str, object] | None: ...
    @overload
    def __getitem__(self, i: slice) -> DetailsColumn: ...
    def __getitem__(self, i: int | slice) -> Mapping[str, object] | DetailsColumn | None:
        if isinstance(i, slice):
            return DetailsColumn(self._items[i])
        raw = self._items[i]
        if raw is None:
            return None
        got: dict[str, object] = msgspec.json.decode(raw)
        return got

    def take(self, rows: Sequence[int]) -> DetailsColumn:
        items = self._items
        return DetailsColumn([items[i] for i in rows])

    def count_key(self, key: str) -> int:
        """How many paths' details have ``key`` at the top level: the raw JSON is searched
        first, and only a row that holds the text is decoded."""
        token = msgspec.json.encode(key) + b":"
        return sum(
            1
            for raw in self._items
            if raw is not None and token in raw and key in msgspec.json.decode(raw)
        )


class Shared:
    """One object per distinct text and per distinct tuple of texts, while a table is built:
    half a million paths repeat a few thousand reasons, and each decoded record holds its
    own copy of every string."""

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}

    def text(self, value: str | None) -> str | None:
        return self._seen.setdefault(value, value)

    def texts(self, items: Iterable[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
        keep = self._seen.setdefault
        return tuple(keep(t, t) for t in (tuple(map(keep, r, r)) for r in items))


def nic_columns(rows: Sequence[PathLike]) -> NicColumns | None:
    rails = [getattr(r, "rail", None) for r in rows]
    src = tuple(getattr(r, "src_nic", None) for r in rows)
    dst = tuple(getattr(r, "dst_nic", None) for r in rows)
    if all(x is None for x in rails) and not any(src) and not any(dst):
        return None
    return NicColumns(src, dst, np.array([-1 if x is None else x for x in rails], np.int64))


def csr_rows(offsets: IntArray, rows: IntArray) -> IntArray:
    """The flat indexes owned by ``rows`` (in that order)."""
    starts, ends = offsets[rows], offsets[rows + 1]
    lengths = ends - starts
    if not len(rows) or not int(lengths.sum()):
        return np.zeros(0, dtype=np.int64)
    # position k of row r -> starts[r] + k, without a Python loop over rows
    before = np.repeat(np.cumsum(lengths) - lengths, lengths)
    flat: IntArray = np.repeat(starts, lengths) + (np.arange(int(lengths.sum())) - before)
    return flat


def csr_offsets(offsets: IntArray, rows: IntArray) -> IntArray:
    lengths = offsets[rows + 1] - offsets[rows]
    return np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)


def ci95_columns(
    n: int, has_rtt: BoolArray, ci95: Sequence[Any]
) -> dict[Metric, tuple[FloatArray, FloatArray]]:
    """Per Metric, the low and high columns of the intervals (``ci95``: one record per path
    with an RTT, its fields named by the metrics); NaN where a path has no interval."""
    out = {}
    for m in Metric:
        got = list(map(_get(m.value), ci95))
        pairs = np.full((n, 2), _NAN)
        rows = np.flatnonzero(has_rtt)
        if got.count(None):  # older files kept one metric's interval, or none
            rows = rows[np.fromiter((g is not None for g in got), np.bool_, len(got))]
            got = [g for g in got if g is not None]
        pairs[rows] = np.array(got, dtype=np.float64).reshape(len(got), 2)
        out[m] = (pairs[:, 0].copy(), pairs[:, 1].copy())
    return out


def workload_columns(work: Sequence[WorkloadLike | None]) -> WorkloadColumns:
    def col(get: Any) -> FloatArray:
        return floats_column(None if w is None else get(w) for w in work)

    return WorkloadColumns(
        verdict=np.fromiter(
            (-1 if w is None else w.verdict.rank for w in work), np.int64, len(work)
        ),
        reasons=tuple(_EMPTY if w is None else tuple(w.reasons) for w in work),
        budget_us=col(lambda w: w.budget_us),
        fetch_p50_us=col(lambda w: w.fetch_p50_us),
        fetch_p99_us=col(lambda w: w.fetch_p99_us),
        speedup=col(lambda w: w.speedup),
        break_even_rtt_us=col(lambda w: w.break_even_rtt_us),
        interpolated=np.fromiter(
            (w is not None and w.interpolated for w in work), np.bool_, len(work)
        ),
    )


def workload_row(wl: WorkloadColumns, i: int) -> WorkloadResult:
    return WorkloadResult(
        verdict=VERDICTS[wl.verdict[i]],
        reasons=wl.reasons[i],
        budget_us=float(wl.budget_us[i]),
        fetch_p50_us=opt_float(float(wl.fetch_p50_us[i])),
        fetch_p99_us=opt_float(float(wl.fetch_p99_us[i])),
        speedup=opt_float(float(wl.speedup[i])),
        break_even_rtt_us=opt_float(float(wl.break_even_rtt_us[i])),
        interpolated=bool(wl.interpolated[i]),
    )


def worst_first(verdict: IntArray, value_us: FloatArray) -> IntArray:
    """How bad a path is, for "worst first" everywhere: indexes ordered by verdict class
    (unsafe first), then by the metric, highest first; a path without a value (NaN) is
    the slowest of its class; ties keep index order."""
    value = np.where(np.isnan(value_us), np.inf, value_us)
    order: IntArray = np.lexsort((np.arange(len(value)), -value, -verdict))
    return order


def verdict_counts(verdict: IntArray) -> dict[Verdict, int]:
    """How many of each verdict (ranks as ``VERDICTS`` numbers them)."""
    got = np.bincount(verdict, minlength=len(VERDICTS))
    return {v: int(got[v.rank]) for v in VERDICTS}


def worst_per_group(groups: IntArray, members: IntArray, ranked: IntArray, size: int) -> IntArray:
    """Per group 0..size-1, the row of its worst member, -1 where a group has none.
    ``members[k]`` is a row in group ``groups[k]`` (a row may sit in several groups);
    ``ranked`` holds every row, worst first (``PathTable.ranked``): the worst member is
    the one ranked first."""
    position = np.empty(len(ranked), dtype=np.int64)
    position[ranked] = np.arange(len(ranked))
    first = np.full(size, len(ranked), dtype=np.int64)
    np.minimum.at(first, groups, position[members])
    seen = first < len(ranked)
    worst = np.full(size, -1, dtype=np.int64)
    worst[seen] = ranked[first[seen]]
    return worst


def union_names(names: Sequence[str], more: Iterable[str]) -> tuple[str, ...]:
    """``names``, then any of ``more`` not in it (first-seen order): one code space for
    two tables."""
    return tuple(dict.fromkeys([*names, *more]))
