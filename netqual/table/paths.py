"""Paths as columns: ``PathTable`` holds one numpy array (or one row-aligned tuple) per field
of ``PathResult``, one row per path.

A 1,024-node full mesh is 523,776 paths: as records that is millions of Python objects and
gigabytes; as columns it is a few dozen arrays. Whatever runs over every path (the summary,
gate rules, diff, localisation, report aggregates) works on the columns with numpy; a row
comes back as a ``PathResult`` (``row``, indexing, iteration) only where one path is shown
or written (the worst paths, a gate finding, a CSV line).

Its columns are declared once, below and in ``netqual.table.columns`` (the kinds and
their conventions: ``netqual.table.schema``); building from records, ``row``, ``take``,
``concat`` and the campaign store's mapping are derived from the declaration.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, overload

import numpy as np

from netqual.model.decision import Evidence, EvidenceKind, Subject, SubjectKind
from netqual.model.engine import EngineCell
from netqual.model.path import PathResult, Tier, path_label
from netqual.model.stats import RTT_FIELDS, Ci95, Metric
from netqual.model.verdict import Verdict
from netqual.table.columns import (
    NO_HOPS,
    TIERS,
    VERDICTS,
    BulkColumns,
    DecisionColumns,
    NicColumns,
    PathLike,
    RttColumns,
    WorkloadColumns,
    union_names,
    verdict_counts,
    worst_first,
    worst_per_group,
)
from netqual.table.kinds import (
    EACH,
    BoolArray,
    Codes,
    Details,
    DetailsColumn,
    Enum,
    FloatArray,
    Floats,
    IntArray,
    Ints,
    NotStored,
    Records,
    Stored,
    Text,
    Texts,
    Vocab,
)
from netqual.table.schema import (
    Columns as _Columns,
)
from netqual.table.schema import (
    Group,
    column,
)

_UNKNOWN_TIER = TIERS.index(Tier.UNKNOWN)
_ERROR = Stored("error", flag=True)  # whether the path failed, not why
# What the campaign store does not keep, and why (netqual.campaign.stored)
_BY_PAIR = NotStored("the campaign compares paths by node pair, verdict and RTT")
_IN_FILE = NotStored("the report reads them from the run's results file")
_BEST_GOODPUT = NotStored("the store keeps each path's best goodput (goodput_gbps) only")
_DECIDED = NotStored("derived: a run's decision is made again from its results file")


@dataclass(frozen=True, eq=False)
class PathTable(_Columns):
    """Every path of a run as columns, one field per column group of ``PathResult``; see
    the module docstring for the conventions and ``netqual.table.schema`` for the kinds."""

    RECORD = PathResult

    # node names; src and dst index into it
    names: tuple[str, ...] = field(metadata=column(Vocab("src", "dst")))
    src: IntArray = field(metadata=column(Codes("names", campaign=Stored("src"))))
    dst: IntArray = field(metadata=column(Codes("names", campaign=Stored("dst"))))
    transports: tuple[str, ...] = field(metadata=column(Vocab("transport")))
    transport: IntArray = field(metadata=column(Codes("transports", campaign=Stored("transport"))))
    # Verdict.rank: 0 offload-safe, 1 marginal, 2 unsafe
    verdict: IntArray = field(metadata=column(Enum(VERDICTS, campaign=Stored("verdict"))))
    # index into TIERS; a file without tiers says unknown
    tier: IntArray = field(
        metadata=column(Enum(TIERS, none=_UNKNOWN_TIER, campaign=Stored("tier", text=True)))
    )
    hops: IntArray = field(metadata=column(Ints(none=NO_HOPS, campaign=_BY_PAIR)))
    reasons: tuple[tuple[str, ...], ...] = field(metadata=column(Texts(campaign=_IN_FILE)))
    error: tuple[str | None, ...] = field(metadata=column(Text(campaign=_ERROR)))
    # PathResult.rtt (None: no RTT)
    rtt_stats: RttColumns = field(
        metadata=column(Group(RttColumns, optional=True, attr="rtt", campaign=EACH))
    )
    bulk: BulkColumns = field(metadata=column(Group(BulkColumns, campaign=_BEST_GOODPUT)))
    started_at: tuple[str | None, ...] = field(
        metadata=column(Text(shared=False, campaign=_BY_PAIR))
    )
    duration_s: FloatArray = field(metadata=column(Floats(optional=True, campaign=_BY_PAIR)))
    details: DetailsColumn = field(metadata=column(Details(campaign=_BY_PAIR)))
    # None: no path was judged by a workload
    workload: WorkloadColumns | None = field(
        metadata=column(Group(WorkloadColumns, optional=True, none_when_empty=True, campaign=EACH))
    )
    # None: no path ran between listed NICs
    nics: NicColumns | None = field(
        metadata=column(Group(NicColumns, flat=True, none_when_empty=True, campaign=_BY_PAIR))
    )
    # None: not decided, ``verdict`` is the RTT policy's class (netqual.analysis.decision)
    decision: DecisionColumns | None = field(
        metadata=column(Group(DecisionColumns, flat=True, none_when_empty=True, campaign=_DECIDED))
    )
    # each path's fetch engine cells (--engine, docs/engines.md); () for most paths
    engine: tuple[tuple[EngineCell, ...], ...] = field(metadata=column(Records(campaign=_IN_FILE)))

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_paths(cls, paths: Iterable[PathLike], names: Sequence[str] = ()) -> PathTable:
        """Columns from records: ``PathResult`` or any object of the same shape (the results
        decoder's typed wire records). ``names`` fixes the first node codes (the node list);
        a path to a node not in it appends the name."""
        rows = paths if isinstance(paths, Sequence) else list(paths)
        return cls.build(rows, prefix={"names": names})

    @classmethod
    def empty(cls, names: Sequence[str] = ()) -> PathTable:
        return cls.from_paths((), names)

    def with_engine_cells(self) -> list[PathResult]:
        """The paths that have engine cells, as records (few: the column is read, not every
        row)."""
        return [self.row(i) for i, cells in enumerate(self.engine) if cells]

    def with_engine(self, cells: Mapping[tuple[str, str], tuple[EngineCell, ...]]) -> PathTable:
        """This table with the engine cells of the paths ``cells`` names (by (src, dst))."""
        if not cells:
            return self
        column = list(self.engine)
        for i, key in enumerate(self.keys()):
            if key in cells:
                column[i] = cells[key]
        return replace(self, engine=tuple(column))

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
        row: PathResult = super().row(i % len(self))
        return row

    def record_fields(self, i: int) -> dict[str, Any]:
        """A decided row's evidence: the RTT's and the workload's, rebuilt from their
        columns, then what the decision stored."""
        out = super().record_fields(i)
        dc = self.decision
        if dc is not None and dc.rtt_verdict[i] >= 0:
            label = path_label(self.names[self.src[i]], self.names[self.dst[i]])
            subject = Subject(SubjectKind.PATH, label)
            rtt = VERDICTS[dc.rtt_verdict[i]]
            first = dc.rtt_reasons[i][0] if dc.rtt_reasons[i] else rtt.value
            found = [Evidence(EvidenceKind.RTT, rtt, subject, first)]
            wl = self.workload
            if wl is not None:
                v = int(wl.verdict[i])
                said = wl.reasons[i][0] if wl.reasons[i] else "no workload verdict for this path"
                verdict = None if v < 0 else VERDICTS[v]
                found.append(Evidence(EvidenceKind.WORKLOAD, verdict, subject, said))
            out["evidence"] = (*found, *dc.evidence[i])
        return out

    # -- the RTT columns by their old names (``rtt_stats`` holds them) -------------------

    @property
    def has_rtt(self) -> BoolArray:
        return self.rtt_stats.present

    @property
    def samples(self) -> IntArray:
        """Kept RTT samples per path, 0 where no RTT."""
        return self.rtt_stats.samples

    @cached_property
    def rtt(self) -> Mapping[str, FloatArray]:
        """RTT_STATISTICS -> column (microseconds), NaN = no RTT."""
        s = self.rtt_stats
        return {name: getattr(s, field) for name, field in RTT_FIELDS.items()}

    @property
    def untrusted(self) -> tuple[tuple[str, ...], ...]:
        return self.rtt_stats.untrusted

    @cached_property
    def ci95_low_us(self) -> Mapping[Metric, FloatArray]:
        """Every Metric -> its intervals' low bounds, NaN = no interval."""
        ci = self.rtt_stats.ci95
        return {m: getattr(ci, m.value)[:, 0] for m in Metric}

    @cached_property
    def ci95_high_us(self) -> Mapping[Metric, FloatArray]:
        ci = self.rtt_stats.ci95
        return {m: getattr(ci, m.value)[:, 1] for m in Metric}

    @property
    def hist_offsets(self) -> IntArray:
        return self.rtt_stats.histogram.offsets

    @property
    def hist_counts(self) -> IntArray:
        return self.rtt_stats.histogram.counts

    def ci95_row(self, i: int) -> Ci95:
        ci: Ci95 = self.rtt_stats.ci95.row(i)
        return ci

    # -- whole columns --------------------------------------------------------------------

    def values(self, metric: Metric) -> FloatArray:
        """The metric of every path (microseconds), NaN where a path has no RTT."""
        values: FloatArray = getattr(self.rtt_stats, metric.field)
        return values

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
