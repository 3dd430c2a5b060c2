"""Paths as columns: ``PathTable`` holds one numpy array (or one row-aligned tuple) per field
of ``PathResult``, one row per path.

A 1,024-node full mesh is 523,776 paths: as records that is millions of Python objects and
gigabytes; as columns it is a few dozen arrays. Whatever runs over every path (the summary,
gate rules, diff, localisation, report aggregates) works on the columns with numpy; a row
comes back as a ``PathResult`` (``row``, indexing, iteration) only where one path is shown
or written (the worst paths, a gate finding, a CSV line).

Optional values follow one convention: a float column holds NaN for "absent" (JSON has no
NaN, so nothing measured is ever NaN), an integer column -1 where -1 cannot be a value.
Variable-length parts (histogram counts, bulk cells) are CSR: one flat array and per-path
offsets, path i owning ``offsets[i]:offsets[i + 1]``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

import numpy as np
import numpy.typing as npt

from netqual.models import (
    RTT_STATISTICS,
    BulkStats,
    Metric,
    PathResult,
    RttStats,
    Tier,
    Verdict,
    WorkloadResult,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

VERDICTS: tuple[Verdict, ...] = (Verdict.SAFE, Verdict.MARGINAL, Verdict.UNSAFE)
TIERS: tuple[Tier, ...] = tuple(Tier)
_TIER_CODE = {t: i for i, t in enumerate(TIERS)}
NO_HOPS = -1
_EMPTY: tuple[str, ...] = ()
_NAN = math.nan


def _opt(x: float) -> float | None:
    return None if math.isnan(x) else x


def _floats(values: Iterable[float | None]) -> FloatArray:
    return np.fromiter((_NAN if v is None else v for v in values), dtype=np.float64)


# -- the shapes a row source must have (PathResult, or the decoder's typed wire records) --


class RttLike(Protocol):
    @property
    def samples(self) -> int: ...
    @property
    def untrusted(self) -> Sequence[str]: ...
    @property
    def ci95_metric(self) -> str | None: ...
    @property
    def ci95_low_us(self) -> float | None: ...
    @property
    def ci95_high_us(self) -> float | None: ...
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
        cells = _csr_rows(self.offsets, rows)
        return BulkColumns(
            offsets=_csr_offsets(self.offsets, rows),
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


def _csr_rows(offsets: IntArray, rows: IntArray) -> IntArray:
    """The flat indexes owned by ``rows`` (in that order)."""
    starts, ends = offsets[rows], offsets[rows + 1]
    lengths = ends - starts
    if not len(rows) or not int(lengths.sum()):
        return np.zeros(0, dtype=np.int64)
    # position k of row r -> starts[r] + k, without a Python loop over rows
    before = np.repeat(np.cumsum(lengths) - lengths, lengths)
    flat: IntArray = np.repeat(starts, lengths) + (np.arange(int(lengths.sum())) - before)
    return flat


def _csr_offsets(offsets: IntArray, rows: IntArray) -> IntArray:
    lengths = offsets[rows + 1] - offsets[rows]
    return np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)


@dataclass(frozen=True, eq=False)
class PathTable:
    """Every path of a run as columns; see the module docstring for the conventions."""

    names: tuple[str, ...]  # node names; src and dst index into it
    src: IntArray
    dst: IntArray
    transports: tuple[str, ...]
    transport: IntArray  # index into transports
    verdict: IntArray  # Verdict.rank: 0 offload-safe, 1 marginal, 2 unsafe
    tier: IntArray  # index into TIERS
    hops: IntArray  # NO_HOPS where unknown
    reasons: tuple[tuple[str, ...], ...]
    error: tuple[str | None, ...]
    has_rtt: BoolArray
    samples: IntArray  # 0 where no RTT
    rtt: Mapping[str, FloatArray]  # RTT_STATISTICS -> column (microseconds), NaN = no RTT
    untrusted: tuple[tuple[str, ...], ...]
    ci95_metric: tuple[str | None, ...]
    ci95_low_us: FloatArray
    ci95_high_us: FloatArray
    hist_first_bin: FloatArray  # NaN where no histogram
    hist_bins_per_decade: FloatArray
    hist_offsets: IntArray
    hist_counts: IntArray
    bulk: BulkColumns
    started_at: tuple[str | None, ...]
    duration_s: FloatArray
    details: tuple[Mapping[str, object] | None, ...]
    workload: WorkloadColumns | None  # None: no path was judged by a workload

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_paths(cls, paths: Iterable[PathLike], names: Sequence[str] = ()) -> PathTable:
        """Columns from records: ``PathResult`` or any object of the same shape (the results
        decoder's typed wire records). ``names`` fixes the first node codes (the node list);
        a path to a node not in it appends the name."""
        rows = paths if isinstance(paths, Sequence) else list(paths)
        index: dict[str, int] = {}
        for name in names:
            index.setdefault(name, len(index))

        def code(name: str) -> int:
            got = index.get(name)
            if got is None:
                got = index[name] = len(index)
            return got

        transports: dict[str, int] = {}
        rtts = [p.rtt for p in rows]
        with_rtt = [r for r in rtts if r is not None]
        has_rtt = np.fromiter((r is not None for r in rtts), dtype=np.bool_, count=len(rtts))
        stats: dict[str, FloatArray] = {}
        for name in RTT_STATISTICS:
            col = np.full(len(rows), _NAN)
            col[has_rtt] = np.fromiter(
                (getattr(r, f"{name}_us") for r in with_rtt), np.float64, len(with_rtt)
            )
            stats[name] = col

        def on_rtt(get: Any, fill: Any, dtype: Any = object) -> Any:
            if dtype is object:
                return tuple(fill if r is None else get(r) for r in rtts)
            return np.fromiter((fill if r is None else get(r) for r in rtts), dtype, len(rtts))

        def ci_value(r: RttLike, which: str) -> float:
            v = getattr(r, which)
            return _NAN if v is None else float(v)

        bins = [None if r is None else r.histogram_bins for r in rtts]
        hist_lengths = [0 if r is None else len(r.histogram_counts) for r in rtts]
        hist_counts = [c for r in with_rtt for c in r.histogram_counts]
        bulk_rows: list[BulkLike] = [b for p in rows for b in p.bulk]
        bulk_lengths = [len(p.bulk) for p in rows]
        work = [p.workload for p in rows]
        src = np.fromiter((code(p.src) for p in rows), np.int64, len(rows))
        dst = np.fromiter((code(p.dst) for p in rows), np.int64, len(rows))
        transport = np.fromiter(
            (transports.setdefault(p.transport, len(transports)) for p in rows),
            np.int64,
            len(rows),
        )
        return cls(
            names=tuple(index),
            src=src,
            dst=dst,
            transports=tuple(transports),
            transport=transport,
            verdict=np.fromiter((p.verdict.rank for p in rows), np.int8, len(rows)).astype(
                np.int64
            ),
            tier=np.fromiter(
                (_TIER_CODE[p.tier or Tier.UNKNOWN] for p in rows), np.int8, len(rows)
            ).astype(np.int64),
            hops=np.fromiter(
                (NO_HOPS if p.hops is None else p.hops for p in rows), np.int64, len(rows)
            ),
            reasons=tuple(tuple(p.reasons) if p.reasons else _EMPTY for p in rows),
            error=tuple(p.error for p in rows),
            has_rtt=has_rtt,
            samples=on_rtt(lambda r: r.samples, 0, np.int64),
            rtt=stats,
            untrusted=on_rtt(lambda r: tuple(r.untrusted) if r.untrusted else _EMPTY, _EMPTY),
            ci95_metric=on_rtt(lambda r: r.ci95_metric, None),
            ci95_low_us=on_rtt(lambda r: ci_value(r, "ci95_low_us"), _NAN, np.float64),
            ci95_high_us=on_rtt(lambda r: ci_value(r, "ci95_high_us"), _NAN, np.float64),
            hist_first_bin=_floats(None if b is None else b[0] for b in bins),
            hist_bins_per_decade=_floats(None if b is None else b[1] for b in bins),
            hist_offsets=np.concatenate(([0], np.cumsum(hist_lengths, dtype=np.int64))),
            hist_counts=np.array(hist_counts, dtype=np.int64),
            bulk=BulkColumns(
                offsets=np.concatenate(([0], np.cumsum(bulk_lengths, dtype=np.int64))),
                chunk_bytes=np.array([b.chunk_bytes for b in bulk_rows], dtype=np.int64),
                depth=np.array([b.depth for b in bulk_rows], dtype=np.int64),
                reads=np.array([b.reads for b in bulk_rows], dtype=np.int64),
                goodput_gbps=np.array([b.goodput_gbps for b in bulk_rows], dtype=np.float64),
                p50_us=np.array([b.completion_p50_us for b in bulk_rows], dtype=np.float64),
                p99_us=np.array([b.completion_p99_us for b in bulk_rows], dtype=np.float64),
                max_us=np.array([b.completion_max_us for b in bulk_rows], dtype=np.float64),
                error=tuple(b.error for b in bulk_rows),
            ),
            started_at=tuple(p.started_at for p in rows),
            duration_s=_floats(p.duration_s for p in rows),
            details=tuple(p.details or None for p in rows),
            workload=_workload_columns(work) if any(w is not None for w in work) else None,
        )

    @classmethod
    def empty(cls, names: Sequence[str] = ()) -> PathTable:
        return cls.from_paths((), names)

    # -- rows -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.src)

    def __bool__(self) -> bool:
        return len(self.src) > 0

    def __iter__(self) -> Iterator[PathResult]:
        return (self.row(i) for i in range(len(self)))

    @overload
    def __getitem__(self, i: int) -> PathResult: ...
    @overload
    def __getitem__(self, i: slice) -> PathTable: ...
    def __getitem__(self, i: int | slice) -> PathResult | PathTable:
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        return self.row(i)

    def key(self, i: int) -> tuple[str, str]:
        return (self.names[self.src[i]], self.names[self.dst[i]])

    def keys(self) -> list[tuple[str, str]]:
        """Every (src, dst), in row order: a list of tuples, for small tables."""
        names = self.names
        return [
            (names[a], names[b]) for a, b in zip(self.src.tolist(), self.dst.tolist(), strict=True)
        ]

    def row(self, i: int) -> PathResult:
        """Path i as a record, for showing or writing one path."""
        i = int(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"path {i} of {len(self)}")
        i %= len(self)
        wl = self.workload
        return PathResult(
            src=self.names[self.src[i]],
            dst=self.names[self.dst[i]],
            transport=self.transports[self.transport[i]],
            verdict=VERDICTS[self.verdict[i]],
            reasons=self.reasons[i],
            rtt=self._rtt(i) if self.has_rtt[i] else None,
            bulk=self._bulk(i),
            hops=None if self.hops[i] == NO_HOPS else int(self.hops[i]),
            tier=TIERS[self.tier[i]],
            error=self.error[i],
            started_at=self.started_at[i],
            duration_s=_opt(float(self.duration_s[i])),
            details=dict(self.details[i] or {}),
            workload=None if wl is None or wl.verdict[i] < 0 else _workload_row(wl, i),
        )

    def _rtt(self, i: int) -> RttStats:
        lo, hi = int(self.hist_offsets[i]), int(self.hist_offsets[i + 1])
        edges: tuple[float, ...] = ()
        if hi > lo:
            first, per_decade = float(self.hist_first_bin[i]), float(self.hist_bins_per_decade[i])
            edges = tuple(10 ** ((first + k) / per_decade) for k in range(hi - lo + 1))
        st = {name: float(col[i]) for name, col in self.rtt.items()}
        return RttStats(
            samples=int(self.samples[i]),
            min_us=st["min"],
            p50_us=st["p50"],
            p90_us=st["p90"],
            p99_us=st["p99"],
            p999_us=st["p999"],
            max_us=st["max"],
            mean_us=st["mean"],
            stdev_us=st["stdev"],
            untrusted=self.untrusted[i],
            ci95_metric=self.ci95_metric[i],
            ci95_low_us=_opt(float(self.ci95_low_us[i])),
            ci95_high_us=_opt(float(self.ci95_high_us[i])),
            histogram_edges_us=edges,
            histogram_counts=tuple(self.hist_counts[lo:hi].tolist()),
        )

    def _bulk(self, i: int) -> tuple[BulkStats, ...]:
        b = self.bulk
        return tuple(
            BulkStats(
                chunk_bytes=int(b.chunk_bytes[k]),
                depth=int(b.depth[k]),
                reads=int(b.reads[k]),
                goodput_gbps=float(b.goodput_gbps[k]),
                completion_p50_us=float(b.p50_us[k]),
                completion_p99_us=float(b.p99_us[k]),
                completion_max_us=float(b.max_us[k]),
                error=b.error[k],
            )
            for k in range(int(b.offsets[i]), int(b.offsets[i + 1]))
        )

    # -- whole columns --------------------------------------------------------------------

    def values(self, metric: Metric) -> FloatArray:
        """The metric of every path (microseconds), NaN where a path has no RTT."""
        return self.rtt[metric.value]

    def ranked(self, metric: Metric) -> IntArray:
        """Row indexes worst first, as ``sorted(paths, key=rank_key, reverse=True)`` orders
        them: verdict class, then the metric (no RTT = slowest of its class), ties in row
        order."""
        value = np.where(np.isnan(self.values(metric)), np.inf, self.values(metric))
        order: IntArray = np.lexsort((np.arange(len(self)), -value, -self.verdict))
        return order

    def counts(self) -> dict[Verdict, int]:
        got = np.bincount(self.verdict, minlength=len(VERDICTS))
        return {v: int(got[v.rank]) for v in VERDICTS}

    def codes(self, names: Sequence[str]) -> tuple[IntArray, IntArray]:
        """src and dst as indexes into ``names`` (-1 where a name is not in it): to join two
        tables, or a table and a node list, without per-path lookups."""
        where = {n: i for i, n in enumerate(names)}
        remap = np.array([where.get(n, -1) for n in self.names] or [-1], dtype=np.int64)
        return remap[self.src], remap[self.dst]

    def find(self, key: tuple[str, str]) -> int | None:
        """The first row of a (src, dst) key, or None."""
        return self._rows_by_key.get(key)

    @functools.cached_property
    def _rows_by_key(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for i, k in enumerate(self.keys()):
            out.setdefault(k, i)
        return out

    def take(self, rows: IntArray | Sequence[int]) -> PathTable:
        """The given rows, in that order, as a new table (same node codes)."""
        idx = np.asarray(rows, dtype=np.int64)
        py = idx.tolist()
        hist = _csr_rows(self.hist_offsets, idx)
        return PathTable(
            names=self.names,
            src=self.src[idx],
            dst=self.dst[idx],
            transports=self.transports,
            transport=self.transport[idx],
            verdict=self.verdict[idx],
            tier=self.tier[idx],
            hops=self.hops[idx],
            reasons=tuple(self.reasons[i] for i in py),
            error=tuple(self.error[i] for i in py),
            has_rtt=self.has_rtt[idx],
            samples=self.samples[idx],
            rtt={k: v[idx] for k, v in self.rtt.items()},
            untrusted=tuple(self.untrusted[i] for i in py),
            ci95_metric=tuple(self.ci95_metric[i] for i in py),
            ci95_low_us=self.ci95_low_us[idx],
            ci95_high_us=self.ci95_high_us[idx],
            hist_first_bin=self.hist_first_bin[idx],
            hist_bins_per_decade=self.hist_bins_per_decade[idx],
            hist_offsets=_csr_offsets(self.hist_offsets, idx),
            hist_counts=self.hist_counts[hist],
            bulk=self.bulk.take(idx),
            started_at=tuple(self.started_at[i] for i in py),
            duration_s=self.duration_s[idx],
            details=tuple(self.details[i] for i in py),
            workload=None if self.workload is None else self.workload.take(idx),
        )

    def concat(self, other: PathTable) -> PathTable:
        """This table's rows, then other's (as one table; for results.jsonl and retests)."""
        return PathTable.from_paths([*self, *other], self.names)


def _workload_columns(work: Sequence[WorkloadLike | None]) -> WorkloadColumns:
    def col(get: Any) -> FloatArray:
        return _floats(None if w is None else get(w) for w in work)

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


def _workload_row(wl: WorkloadColumns, i: int) -> WorkloadResult:
    return WorkloadResult(
        verdict=VERDICTS[wl.verdict[i]],
        reasons=wl.reasons[i],
        budget_us=float(wl.budget_us[i]),
        fetch_p50_us=_opt(float(wl.fetch_p50_us[i])),
        fetch_p99_us=_opt(float(wl.fetch_p99_us[i])),
        speedup=_opt(float(wl.speedup[i])),
        break_even_rtt_us=_opt(float(wl.break_even_rtt_us[i])),
        interpolated=bool(wl.interpolated[i]),
    )


__all__ = [
    "NO_HOPS",
    "TIERS",
    "VERDICTS",
    "BulkColumns",
    "PathLike",
    "PathTable",
    "WorkloadColumns",
]
