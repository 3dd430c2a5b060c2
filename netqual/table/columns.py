"""The parts of ``PathTable`` (netqual.table.paths) that are not the table: the shape a row
source must have, the column groups of a path's parts (RTT statistics, confidence
intervals, histograms, bulk cells, workload verdicts, NICs), each declared once
(``netqual.table.schema``), and the array helpers every columnar rule shares
(``worst_first``, ``worst_per_group``, ``union_names``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol

import numpy as np

from netqual.model.decision import Evidence, EvidenceKind
from netqual.model.path import Tier, WorkloadResult
from netqual.model.stats import BulkStats, Ci95, RttStats
from netqual.model.verdict import Verdict
from netqual.table.kinds import (
    EACH,
    BoolArray,
    Bools,
    Build,
    Concat,
    Enum,
    FloatArray,
    Floats,
    IntArray,
    Interval,
    Ints,
    Kind,
    NotStored,
    Offsets,
    Present,
    Stored,
    Text,
    Texts,
    csr_concat,
    csr_offsets,
    csr_rows,
    floats_column,
    lengths_offsets,
)
from netqual.table.schema import (
    Columns,
    Group,
    column,
)

VERDICTS: tuple[Verdict, ...] = (Verdict.SAFE, Verdict.MARGINAL, Verdict.UNSAFE)
TIERS: tuple[Tier, ...] = tuple(Tier)
_get = operator.attrgetter
NO_HOPS = -1
_NAN = math.nan


# -- the shapes a row source must have (PathResult, or the decoder's typed wire records) --


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
    def rtt(self) -> Any: ...  # RttStats-like | None
    @property
    def bulk(self) -> Sequence[Any]: ...  # BulkStats-like
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
    def workload(self) -> Any: ...  # WorkloadResult-like | None
    @property
    def src_nic(self) -> str | None: ...
    @property
    def dst_nic(self) -> str | None: ...
    @property
    def rail(self) -> int | None: ...


@dataclass(frozen=True, eq=False)
class Ci95Columns(Columns):
    """Each percentile's 95% confidence interval (``Ci95``), an (n, 2) array per metric."""

    RECORD = Ci95

    p50: FloatArray = field(metadata=column(Interval(campaign=Stored("ci95_p50"))))
    p90: FloatArray = field(metadata=column(Interval(campaign=Stored("ci95_p90"))))
    p99: FloatArray = field(metadata=column(Interval(campaign=Stored("ci95_p99"))))
    p999: FloatArray = field(metadata=column(Interval(campaign=Stored("ci95_p999"))))


@dataclass(frozen=True, eq=False)
class Histograms:
    """Each path's log-spaced RTT histogram: first bin and bins per decade (NaN: none), the
    counts as CSR (path i owns ``counts[offsets[i]:offsets[i + 1]]``)."""

    first_bin: FloatArray
    bins_per_decade: FloatArray
    offsets: IntArray
    counts: IntArray


class Histogram(Kind):
    """``RttStats.histogram_edges_us``/``histogram_counts`` as ``Histograms``: the edges are
    10 ** ((first_bin + k) / bins_per_decade), so two numbers hold them."""

    def build(self, b: Build) -> Histograms:
        bins = b.values("histogram_bins")
        counts = b.values("histogram_counts")
        return Histograms(
            floats_column(None if x is None else x[0] for x in bins),
            floats_column(None if x is None else x[1] for x in bins),
            lengths_offsets(map(len, counts), b.n),
            np.fromiter(chain.from_iterable(counts), np.int64),
        )

    def record(self, group: Any, i: int) -> dict[str, Any]:
        h: Histograms = getattr(group, self.name)
        lo, hi = int(h.offsets[i]), int(h.offsets[i + 1])
        edges: tuple[float, ...] = ()
        if hi > lo:
            first, per_decade = float(h.first_bin[i]), float(h.bins_per_decade[i])
            edges = tuple(10 ** ((first + k) / per_decade) for k in range(hi - lo + 1))
        return {"histogram_edges_us": edges, "histogram_counts": tuple(h.counts[lo:hi].tolist())}

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Histograms:
        h: Histograms = col
        return Histograms(
            h.first_bin[idx],
            h.bins_per_decade[idx],
            csr_offsets(h.offsets, idx),
            h.counts[csr_rows(h.offsets, idx)],
        )

    def concat(self, c: Concat) -> Histograms:
        hs: list[Histograms] = c.columns(self.name)
        return Histograms(
            np.concatenate([h.first_bin for h in hs]),
            np.concatenate([h.bins_per_decade for h in hs]),
            csr_concat([h.offsets for h in hs]),
            np.concatenate([h.counts for h in hs]),
        )

    def absent(self, n: int) -> Histograms:
        return Histograms(
            np.full(n, _NAN), np.full(n, _NAN), np.zeros(n + 1, np.int64), np.zeros(0, np.int64)
        )


_RTT_KEPT = "the trend, the exporter and the gate's baseline rules read p50, p99 and p999"


@dataclass(frozen=True, eq=False)
class RttColumns(Columns):
    """Each path's small-message RTT (``RttStats``); ``present`` False where a path has
    none (its statistics NaN, no samples)."""

    RECORD = RttStats

    present: BoolArray = field(metadata=column(Present()))
    samples: IntArray = field(metadata=column(Ints(fill=0, campaign=Stored("samples"))))
    min_us: FloatArray = field(metadata=column(Floats(campaign=NotStored(_RTT_KEPT))))
    p50_us: FloatArray = field(metadata=column(Floats(campaign=Stored("p50_us"))))
    p90_us: FloatArray = field(metadata=column(Floats(campaign=NotStored(_RTT_KEPT))))
    p99_us: FloatArray = field(metadata=column(Floats(campaign=Stored("p99_us"))))
    p999_us: FloatArray = field(metadata=column(Floats(campaign=Stored("p999_us"))))
    max_us: FloatArray = field(metadata=column(Floats(campaign=NotStored(_RTT_KEPT))))
    mean_us: FloatArray = field(metadata=column(Floats(campaign=NotStored(_RTT_KEPT))))
    stdev_us: FloatArray = field(metadata=column(Floats(campaign=NotStored(_RTT_KEPT))))
    untrusted: tuple[tuple[str, ...], ...] = field(
        metadata=column(Texts(campaign=NotStored("derived from the sample count, which is kept")))
    )
    ci95: Ci95Columns = field(metadata=column(Group(Ci95Columns, campaign=EACH)))
    histogram: Histograms = field(
        metadata=column(
            Histogram(campaign=NotStored("the report draws it from the run's results file"))
        )
    )

    def present_at(self, i: int) -> bool:
        return bool(self.present[i])


@dataclass(frozen=True, eq=False)
class BulkColumns(Columns):
    """Bulk cells of all paths, flat; path i owns rows ``offsets[i]:offsets[i + 1]``."""

    RECORD = BulkStats

    offsets: IntArray = field(metadata=column(Offsets()))
    chunk_bytes: IntArray = field(metadata=column(Ints()))
    depth: IntArray = field(metadata=column(Ints()))
    reads: IntArray = field(metadata=column(Ints()))
    goodput_gbps: FloatArray = field(metadata=column(Floats()))
    p50_us: FloatArray = field(metadata=column(Floats(attr="completion_p50_us")))
    p99_us: FloatArray = field(metadata=column(Floats(attr="completion_p99_us")))
    max_us: FloatArray = field(metadata=column(Floats(attr="completion_max_us")))
    error: tuple[str | None, ...] = field(metadata=column(Text()))


_WORKLOAD_KEPT = "the campaign keeps each path's workload verdict only"


@dataclass(frozen=True, eq=False)
class WorkloadColumns(Columns):
    """Per-path workload verdicts (docs/workload.md); ``verdict`` -1 where a path has none."""

    RECORD = WorkloadResult

    verdict: IntArray = field(
        metadata=column(Enum(VERDICTS, fill=-1, campaign=Stored("workload_verdict", back=False)))
    )
    reasons: tuple[tuple[str, ...], ...] = field(
        metadata=column(Texts(campaign=NotStored(_WORKLOAD_KEPT)))
    )
    budget_us: FloatArray = field(metadata=column(Floats(campaign=NotStored(_WORKLOAD_KEPT))))
    fetch_p50_us: FloatArray = field(
        metadata=column(Floats(optional=True, campaign=NotStored(_WORKLOAD_KEPT)))
    )
    fetch_p99_us: FloatArray = field(
        metadata=column(Floats(optional=True, campaign=NotStored(_WORKLOAD_KEPT)))
    )
    speedup: FloatArray = field(
        metadata=column(Floats(optional=True, campaign=NotStored(_WORKLOAD_KEPT)))
    )
    break_even_rtt_us: FloatArray = field(
        metadata=column(Floats(optional=True, campaign=NotStored(_WORKLOAD_KEPT)))
    )
    interpolated: BoolArray = field(metadata=column(Bools(campaign=NotStored(_WORKLOAD_KEPT))))

    def present_at(self, i: int) -> bool:
        return bool(self.verdict[i] >= 0)


@dataclass(frozen=True, eq=False)
class NicColumns(Columns):
    """The NICs each path ran between and their rail (docs/rails.md); ``rail`` -1 where a
    path has none. Its fields are the path record's own (``src_nic``, ``dst_nic``, ``rail``)."""

    RECORD = dict

    src_nic: tuple[str | None, ...] = field(metadata=column(Text()))
    dst_nic: tuple[str | None, ...] = field(metadata=column(Text()))
    rail: IntArray = field(metadata=column(Ints(none=-1)))

    def rails(self) -> list[int]:
        """The rails present, in order."""
        return sorted(set(self.rail[self.rail >= 0].tolist()))


# -- the decision (netqual.analysis.decision) ------------------------------------------

# Kinds a decided row rebuilds from its own columns (rtt_verdict, the workload columns).
ROW_KINDS = frozenset({EvidenceKind.RTT, EvidenceKind.WORKLOAD})
_NO_EVIDENCE: tuple[Evidence, ...] = ()


class _Verdicts(Enum):
    """A verdict or None per row (-1)."""

    def value(self, col: Any, i: int) -> Any:
        code = col.item(i)
        return None if code < 0 else self.members[code]


class _RttReasons(Texts):
    """The RTT policy's reasons of a decided record: its reasons without the lines its
    evidence put first (each exactly an ``Evidence.reason``); () for an undecided record.
    A row's record takes its reasons from the table's own column."""

    def build(self, b: Build) -> Any:
        out: list[Sequence[str]] = []
        for reasons, evidence, rtt in zip(
            b.values("reasons"), b.values("evidence"), b.values("rtt_verdict"), strict=True
        ):
            lines = {e.reason for e in evidence if e.kind is not EvidenceKind.RTT}
            out.append(() if rtt is None else [x for x in reasons if x not in lines])
        return b.shared.texts(out)

    def record(self, group: Any, i: int) -> dict[str, Any]:
        return {}


class _StoredEvidence(Kind):
    """Per row, the evidence beyond the RTT and the workload (one shared tuple per distinct
    one: half a million paths repeat a few subjects); the table's row adds those two."""

    fill: Any = _NO_EVIDENCE

    def build(self, b: Build) -> Any:
        keep = b.shared.remember
        return tuple(
            keep(tuple(e for e in ev if e.kind not in ROW_KINDS)) for ev in b.values(self.attr)
        )

    def record(self, group: Any, i: int) -> dict[str, Any]:
        return {}

    def value(self, col: Any, i: int) -> Any:
        return col[i]

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Any:
        return tuple([col[i] for i in py])

    def concat(self, c: Concat) -> Any:
        return tuple(chain.from_iterable(c.columns(self.name)))

    def absent(self, n: int) -> Any:
        return (self.fill,) * n


@dataclass(frozen=True, eq=False)
class DecisionColumns(Columns):
    """What a decided table keeps beside its decided ``verdict`` and ``reasons``
    (``netqual.analysis.decision``): the RTT policy's class and reasons, and per path the
    evidence beyond the RTT and the workload. ``rtt_verdict`` -1: a row never decided (its
    verdict is the RTT's). Its fields are the path record's own (``rtt_verdict``,
    ``evidence``)."""

    RECORD = dict

    rtt_verdict: IntArray = field(metadata=column(_Verdicts(VERDICTS, none=-1, fill=-1)))
    rtt_reasons: tuple[tuple[str, ...], ...] = field(metadata=column(_RttReasons()))
    evidence: tuple[tuple[Evidence, ...], ...] = field(
        metadata=column(_StoredEvidence(attr="evidence"))
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
