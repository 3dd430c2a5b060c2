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

import math
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, overload

import numpy as np

from netqual.model.path import PathResult, Tier
from netqual.model.stats import RTT_STATISTICS, BulkStats, Ci95, Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.table.columns import (
    NO_HOPS,
    TIERS,
    VERDICTS,
    BoolArray,
    BulkColumns,
    BulkLike,
    DetailsColumn,
    FloatArray,
    IntArray,
    NicColumns,
    PathLike,
    RttLike,
    Shared,
    WorkloadColumns,
    ci95_columns,
    csr_offsets,
    csr_rows,
    floats_column,
    nic_columns,
    opt_float,
    union_names,
    verdict_counts,
    workload_columns,
    workload_row,
    worst_first,
    worst_per_group,
)

_TIER_CODE: dict[Tier | None, int] = {t: i for i, t in enumerate(TIERS)}
_TIER_CODE[None] = TIERS.index(Tier.UNKNOWN)  # a file without tiers
_RANK = {v: v.rank for v in VERDICTS}
_get = operator.attrgetter
_EMPTY: tuple[str, ...] = ()
_NAN = math.nan


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
    ci95_low_us: Mapping[Metric, FloatArray]  # every Metric -> column, NaN = no interval
    ci95_high_us: Mapping[Metric, FloatArray]
    hist_first_bin: FloatArray  # NaN where no histogram
    hist_bins_per_decade: FloatArray
    hist_offsets: IntArray
    hist_counts: IntArray
    bulk: BulkColumns
    started_at: tuple[str | None, ...]
    duration_s: FloatArray
    details: DetailsColumn
    workload: WorkloadColumns | None  # None: no path was judged by a workload
    nics: NicColumns | None = None  # None: no path ran between listed NICs

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_paths(cls, paths: Iterable[PathLike], names: Sequence[str] = ()) -> PathTable:
        """Columns from records: ``PathResult`` or any object of the same shape (the results
        decoder's typed wire records). ``names`` fixes the first node codes (the node list);
        a path to a node not in it appends the name."""
        rows = paths if isinstance(paths, Sequence) else list(paths)
        n = len(rows)
        # map() with attrgetter runs in C: ~20 columns x half a million rows in a few seconds
        srcs = list(map(_get("src"), rows))
        dsts = list(map(_get("dst"), rows))
        index = {name: i for i, name in enumerate(dict.fromkeys(names))}
        for name in dict.fromkeys(chain.from_iterable(zip(srcs, dsts, strict=True))):
            index.setdefault(name, len(index))
        transports = {t: i for i, t in enumerate(dict.fromkeys(map(_get("transport"), rows)))}
        rtts = list(map(_get("rtt"), rows))
        has_rtt = np.array([r is not None for r in rtts], dtype=np.bool_)
        with_rtt: list[RttLike] = [r for r in rtts if r is not None]

        def per_rtt(attr: str, fill: float, dtype: Any = np.float64) -> Any:
            col = np.full(n, fill, dtype=dtype)
            col[has_rtt] = np.fromiter(map(_get(attr), with_rtt), dtype, len(with_rtt))
            return col

        def per_rtt_obj(values: Iterable[Any], fill: Any) -> tuple[Any, ...]:
            if len(with_rtt) == n:
                return tuple(values)
            col = np.empty(n, dtype=object)
            col[:] = [fill] * n  # a list: numpy would read a tuple fill as a shape
            col[has_rtt] = np.fromiter(values, dtype=object, count=len(with_rtt))
            return tuple(col.tolist())

        ci95 = ci95_columns(n, has_rtt, list(map(_get("ci95"), with_rtt)))
        bins = per_rtt_obj(map(_get("histogram_bins"), with_rtt), None)
        hist_lists = list(map(_get("histogram_counts"), with_rtt))
        hist_lengths = np.zeros(n, dtype=np.int64)
        hist_lengths[has_rtt] = np.fromiter(map(len, hist_lists), np.int64, len(hist_lists))
        shared = Shared()
        bulks = list(map(_get("bulk"), rows))
        bulk_rows: list[BulkLike] = list(chain.from_iterable(bulks))
        work = list(map(_get("workload"), rows))

        # a record type may name where it keeps a field (the wire's nested "completion_us")
        bulk_attrs: Mapping[str, str] = (
            getattr(type(bulk_rows[0]), "column_attrs", {}) if bulk_rows else {}
        )

        def bulk_col(attr: str, dtype: Any) -> Any:
            get = _get(bulk_attrs.get(attr, attr))
            return np.fromiter(map(get, bulk_rows), dtype, len(bulk_rows))

        return cls(
            names=tuple(index),
            src=np.fromiter(map(index.__getitem__, srcs), np.int64, n),
            dst=np.fromiter(map(index.__getitem__, dsts), np.int64, n),
            transports=tuple(transports),
            transport=np.fromiter(
                map(transports.__getitem__, map(_get("transport"), rows)), np.int64, n
            ),
            verdict=np.fromiter(map(_RANK.__getitem__, map(_get("verdict"), rows)), np.int64, n),
            tier=np.fromiter(map(_TIER_CODE.__getitem__, map(_get("tier"), rows)), np.int64, n),
            hops=np.array(
                [NO_HOPS if h is None else h for h in map(_get("hops"), rows)], dtype=np.int64
            ),
            reasons=shared.texts(map(_get("reasons"), rows)),
            error=tuple(map(shared.text, map(_get("error"), rows))),
            has_rtt=has_rtt,
            samples=per_rtt("samples", 0, np.int64),
            rtt={name: per_rtt(f"{name}_us", _NAN) for name in RTT_STATISTICS},
            untrusted=per_rtt_obj(shared.texts(map(_get("untrusted"), with_rtt)), _EMPTY),
            ci95_low_us={m: low for m, (low, _) in ci95.items()},
            ci95_high_us={m: high for m, (_, high) in ci95.items()},
            hist_first_bin=floats_column(None if b is None else b[0] for b in bins),
            hist_bins_per_decade=floats_column(None if b is None else b[1] for b in bins),
            hist_offsets=np.concatenate(([0], np.cumsum(hist_lengths))).astype(np.int64),
            hist_counts=np.fromiter(chain.from_iterable(hist_lists), np.int64),
            bulk=BulkColumns(
                offsets=np.concatenate(
                    ([0], np.cumsum(np.fromiter(map(len, bulks), np.int64, n)))
                ).astype(np.int64),
                chunk_bytes=bulk_col("chunk_bytes", np.int64),
                depth=bulk_col("depth", np.int64),
                reads=bulk_col("reads", np.int64),
                goodput_gbps=bulk_col("goodput_gbps", np.float64),
                p50_us=bulk_col("completion_p50_us", np.float64),
                p99_us=bulk_col("completion_p99_us", np.float64),
                max_us=bulk_col("completion_max_us", np.float64),
                error=tuple(map(shared.text, map(_get("error"), bulk_rows))),
            ),
            started_at=tuple(map(_get("started_at"), rows)),
            duration_s=floats_column(map(_get("duration_s"), rows)),
            details=DetailsColumn.of(map(_get("details"), rows)),
            workload=workload_columns(work) if any(w is not None for w in work) else None,
            nics=nic_columns(rows),
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
            duration_s=opt_float(float(self.duration_s[i])),
            details=dict(self.details[i] or {}),
            workload=None if wl is None or wl.verdict[i] < 0 else workload_row(wl, i),
            **self._nics(i),
        )

    def _nics(self, i: int) -> dict[str, Any]:
        nc = self.nics
        if nc is None:
            return {}
        rail = int(nc.rail[i])
        return {
            "src_nic": nc.src_nic[i],
            "dst_nic": nc.dst_nic[i],
            "rail": None if rail < 0 else rail,
        }

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
            ci95=self.ci95_row(i),
            histogram_edges_us=edges,
            histogram_counts=tuple(self.hist_counts[lo:hi].tolist()),
        )

    def ci95_row(self, i: int) -> Ci95:
        def interval(m: Metric) -> tuple[float, float] | None:
            low, high = float(self.ci95_low_us[m][i]), float(self.ci95_high_us[m][i])
            return None if math.isnan(low) else (low, high)

        return Ci95(**{m.value: interval(m) for m in Metric})

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
        """Row indexes worst first (``worst_first`` of the verdicts and the metric)."""
        return worst_first(self.verdict, self.values(metric))

    def counts(self) -> dict[Verdict, int]:
        return verdict_counts(self.verdict)

    def codes(self, names: Sequence[str]) -> tuple[IntArray, IntArray]:
        """src and dst as indexes into ``names`` (-1 where a name is not in it): to join two
        tables, or a table and a node list, without per-path lookups."""
        where = {n: i for i, n in enumerate(names)}
        remap = np.array([where.get(n, -1) for n in self.names] or [-1], dtype=np.int64)
        return remap[self.src], remap[self.dst]

    def pair_keys(self, names: Sequence[str], rows: IntArray | None = None) -> IntArray:
        """(src, dst) of ``rows`` (default: all) as one int64 each, ``src * len(names) + dst``
        over the codes of ``names`` (which must hold every node name of this table): the
        join key of two tables, or of a table and a list of pairs."""
        src, dst = self.codes(names)
        if rows is not None:
            src, dst = src[rows], dst[rows]
        key: IntArray = src * len(names) + dst
        return key

    def rows_of(self, keys: Sequence[tuple[str, str]]) -> list[int | None]:
        """The row of each (src, dst) key (the last one where a key repeats, as a dict of
        the rows would keep it), None where there is no such path: a handful of keys (the
        worst paths, waivers) looked up on the columns without a dict of every path."""
        where = {name: i for i, name in enumerate(self.names)}
        n = max(len(self.names), 1)
        flat = self.src * n + self.dst
        # One stable sort, then a binary search per key: a profile may carry a million
        # waivers, and a scan of every path per key would be quadratic.
        order = np.argsort(flat, kind="stable")
        ordered = flat[order]
        wanted = np.fromiter(
            (where[a] * n + where[b] if a in where and b in where else -1 for a, b in keys),
            np.int64,
            len(keys),
        )
        end = np.searchsorted(ordered, wanted, side="right")  # past the last equal key
        found = (end > 0) & (ordered[np.maximum(end - 1, 0)] == wanted) & (wanted >= 0)
        rows = order[np.maximum(end - 1, 0)] if len(ordered) else np.zeros(len(keys), np.int64)
        return [int(r) if ok else None for r, ok in zip(rows.tolist(), found.tolist(), strict=True)]

    def take(self, rows: IntArray | Sequence[int]) -> PathTable:
        """The given rows, in that order, as a new table (same node codes)."""
        idx = np.asarray(rows, dtype=np.int64)
        py = idx.tolist()
        hist = csr_rows(self.hist_offsets, idx)
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
            ci95_low_us={m: v[idx] for m, v in self.ci95_low_us.items()},
            ci95_high_us={m: v[idx] for m, v in self.ci95_high_us.items()},
            hist_first_bin=self.hist_first_bin[idx],
            hist_bins_per_decade=self.hist_bins_per_decade[idx],
            hist_offsets=csr_offsets(self.hist_offsets, idx),
            hist_counts=self.hist_counts[hist],
            bulk=self.bulk.take(idx),
            started_at=tuple(self.started_at[i] for i in py),
            duration_s=self.duration_s[idx],
            details=self.details.take(py),
            workload=None if self.workload is None else self.workload.take(idx),
            nics=None if self.nics is None else self.nics.take(idx),
        )


__all__ = [
    "NO_HOPS",
    "TIERS",
    "VERDICTS",
    "BoolArray",
    "BulkColumns",
    "FloatArray",
    "IntArray",
    "NicColumns",
    "PathLike",
    "PathTable",
    "WorkloadColumns",
    "union_names",
    "verdict_counts",
    "worst_first",
    "worst_per_group",
]
