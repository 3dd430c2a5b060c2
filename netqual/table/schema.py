"""The path schema, written once: every column of a ``PathTable`` (and of its column groups:
RTT statistics, intervals, bulk cells, workload verdicts, NICs) is a dataclass field whose
metadata is a ``Kind``: how the column is held (numpy array, tuple, codes into a
vocabulary, a nested group, CSR cells), which attribute of the record it comes from and
goes back to, its absent value, and what the campaign store keeps of it.

From that declaration ``Columns`` derives, for every group, the constructor from records
(``build``), a row back as a record (``row``), ``take``, ``concat``, the all-absent group
(``absent``) and a group from some of its columns (``from_leaves``: the campaign store
reading a run back). Adding a field touches the declaration and the results file's codec
(``results/encode.py``, ``results/wirepath.py``), nothing else;
``tests/unit/core/test_path_schema.py`` round-trips every declared field through
results.json and through the campaign store.

The kinds and their conventions (NaN or a fill value for "absent", CSR for the
variable-length parts): ``netqual.table.kinds``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import chain
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from netqual.table.kinds import (
    Build,
    Campaign,
    Codes,
    Concat,
    Each,
    IntArray,
    Kind,
    NotStored,
    Offsets,
    Shared,
    Stored,
    Vocab,
    csr_concat,
    csr_offsets,
    csr_rows,
    lengths_offsets,
)

# -- column groups ---------------------------------------------------------------------

C = TypeVar("C", bound="Columns")


class Columns:
    """A group of columns declared as dataclass fields with a ``Kind`` in their metadata
    (``column``); ``RECORD`` is what a row gives back. A group with an ``Offsets`` field
    holds cells: its other fields have a value per cell, and a row is a tuple of records."""

    RECORD: ClassVar[Callable[..., Any]]
    _kinds: ClassVar[tuple[Kind, ...]]
    _cells: ClassVar[str | None]
    # row(): (record attribute, field, value) of the fields that give one value each, and
    # the kinds that give the record more (or nothing): one dict display per row
    _plain: ClassVar[tuple[tuple[str, str, Callable[[Any, int], Any]], ...]]
    _other: ClassVar[tuple[Kind, ...]]

    @classmethod
    def kinds(cls) -> tuple[Kind, ...]:
        """The declaration: each field's kind, in field order."""
        if "_kinds" not in cls.__dict__:
            cls._declare()
        return cls._kinds

    @classmethod
    def _declare(cls) -> None:
        kinds = []
        for f in fields(cast(Any, cls)):
            kind = f.metadata.get("column")
            if not isinstance(kind, Kind):
                raise TypeError(f"{cls.__name__}.{f.name} declares no column kind")
            kind.bind(f.name)
            kinds.append(kind)
        seen = {k.name for k in kinds}
        for k in kinds:
            if isinstance(k, Codes) and k.vocab not in seen:
                raise TypeError(f"{cls.__name__}.{k.name}: no vocabulary {k.vocab!r}")
        cls._kinds = tuple(kinds)
        cls._cells = next((k.name for k in kinds if isinstance(k, Offsets)), None)
        plain = [k for k in kinds if not k.structural and type(k).record is Kind.record]
        cls._plain = tuple((k.attr, k.name, k.value) for k in plain)
        cls._other = tuple(k for k in kinds if k not in plain and not k.structural)

    @classmethod
    def _offsets(cls) -> str | None:
        cls.kinds()
        return cls._cells

    # -- the five operations, derived from the declaration --------------------------------

    @classmethod
    def build(
        cls: type[C],
        records: Sequence[Any],
        shared: Shared | None = None,
        prefix: Mapping[str, Sequence[str]] | None = None,
    ) -> C:
        """The group from one record per row (a cell group: one sequence of cell records
        per row)."""
        shared = shared or Shared()
        values: dict[str, Any] = {}
        offsets = cls._offsets()
        if offsets is not None:
            values[offsets] = lengths_offsets(map(len, records), len(records))
            records = list(chain.from_iterable(records))
        b = Build(records, shared, prefix or {})
        for k in cls.kinds():
            if not isinstance(k, Offsets):
                values[k.name] = k.build(b)
        return cls(**values)

    def row(self, i: int) -> Any:
        """Row ``i`` as a record (a cell group: the tuple of its cells' records)."""
        offsets = self._offsets()
        if offsets is not None:
            o = getattr(self, offsets)
            return tuple(self._record(k) for k in range(int(o[i]), int(o[i + 1])))
        return self._record(i)

    def _record(self, i: int) -> Any:
        return self.RECORD(**self.record_fields(i))

    def record_fields(self, i: int) -> dict[str, Any]:
        self.kinds()
        out = {attr: value(getattr(self, name), i) for attr, name, value in self._plain}
        for k in self._other:
            out.update(k.record(self, i))
        return out

    def present_at(self, i: int) -> bool:
        """Whether row i of an optional group is there."""
        return True

    def take(self: C, rows: IntArray | Sequence[int]) -> C:
        """The given rows, in that order, as a new group (same vocabularies)."""
        idx = np.asarray(rows, dtype=np.int64)
        values: dict[str, Any] = {}
        offsets = self._offsets()
        if offsets is not None:
            o = getattr(self, offsets)
            values[offsets] = csr_offsets(o, idx)
            idx = csr_rows(o, idx)
        py = idx.tolist()
        for k in self.kinds():
            if not isinstance(k, Offsets):
                values[k.name] = k.take(getattr(self, k.name), idx, py)
        return type(self)(**values)

    @classmethod
    def concat(
        cls: type[C], parts: Sequence[C], prefix: Mapping[str, Sequence[str]] | None = None
    ) -> C:
        """The rows of every part, in order; vocabularies united (``prefix`` first)."""
        c = Concat(parts, prefix or {})
        values: dict[str, Any] = {}
        for k in cls.kinds():
            if isinstance(k, Offsets):
                values[k.name] = csr_concat(c.columns(k.name))
            else:
                values[k.name] = k.concat(c)
        return cls(**values)

    @classmethod
    def absent(cls: type[C], n: int) -> C:
        """n rows, every one absent."""
        values: dict[str, Any] = {}
        offsets = cls._offsets()
        cells = n
        if offsets is not None:
            values[offsets] = np.zeros(n + 1, dtype=np.int64)
            cells = 0
        for k in cls.kinds():
            if not isinstance(k, Offsets):
                values[k.name] = k.absent(cells)
        return cls(**values)

    @classmethod
    def from_leaves(cls: type[C], n: int, given: Mapping[str, Any], at: str = "") -> C:
        """n rows holding the ``given`` columns (by dotted path, as ``leaves`` names them),
        every other column absent: a run as the campaign store keeps it."""
        values: dict[str, Any] = {}
        for k in cls.kinds():
            path = f"{at}{k.name}"
            if path in given:
                values[k.name] = given[path]
            elif isinstance(k, Group):
                values[k.name] = k.from_leaves(n, given, f"{path}.")
            else:
                values[k.name] = k.absent(n)
        return cls(**values)

    def __len__(self) -> int:
        offsets = self._offsets()
        if offsets is not None:
            return len(getattr(self, offsets)) - 1
        first = next(k for k in self.kinds() if not isinstance(k, Vocab))
        return len(getattr(self, first.name))


class Group(Kind):
    """A nested group: ``cls`` built from each record's ``attr``. ``optional``: a record's
    attr may be None (the group then has a ``present_at``); ``none_when_empty``: the field
    is None when no row has one (tables without workload verdicts or NICs). ``flat``: the
    group's fields are the parent record's own (the NICs of a path)."""

    def __init__(
        self,
        cls: type[Columns],
        *,
        optional: bool = False,
        none_when_empty: bool = False,
        flat: bool = False,
        attr: str | None = None,
        campaign: Campaign | None = None,
    ) -> None:
        super().__init__(attr=attr, campaign=campaign)
        self.cls = cls
        self.optional = optional
        self.none_when_empty = none_when_empty
        self.flat = flat

    def build(self, b: Build) -> Any:
        if self.flat:
            part = self.cls.build(b.records, b.shared)
            return None if self.none_when_empty and _all_absent(part) else part
        values = b.values(self.attr)
        if not self.optional:
            return self.cls.build(values, b.shared)
        present = [v for v in values if v is not None]
        if not present and self.none_when_empty:
            return None
        if len(present) == len(values):
            return self.cls.build(values, b.shared)
        mask = np.fromiter((v is not None for v in values), np.bool_, len(values))
        part = self.cls.build(present, b.shared)
        idx = np.full(len(values), len(present), dtype=np.int64)
        idx[mask] = np.arange(len(present))
        return self.cls.concat([part, self.cls.absent(1)]).take(idx)

    def record(self, group: Any, i: int) -> dict[str, Any]:
        col: Columns | None = getattr(group, self.name)
        if self.flat:
            return {} if col is None else col.record_fields(i)
        if col is None or (self.optional and not col.present_at(i)):
            return {self.attr: None}
        return {self.attr: col.row(i)}

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Any:
        return None if col is None else col.take(idx)

    def concat(self, c: Concat) -> Any:
        cols = c.columns(self.name)
        if self.none_when_empty and all(x is None for x in cols):
            return None
        parts = [
            self.cls.absent(n) if x is None else x for x, n in zip(cols, c.lengths, strict=True)
        ]
        return self.cls.concat(parts)

    def absent(self, n: int) -> Any:
        return None if self.none_when_empty else self.cls.absent(n)

    def from_leaves(self, n: int, given: Mapping[str, Any], at: str) -> Any:
        if not any(p.startswith(at) for p in given):
            return self.absent(n)
        if self.cls._offsets() is not None:
            raise TypeError(f"{self.cls.__name__}: cells are given whole or not at all")
        return self.cls.from_leaves(n, given, at)


def _all_absent(group: Columns) -> bool:
    """Every column of the group holds its absent value (a flat group nobody filled)."""
    n = len(group)
    for k in group.kinds():
        col, none = getattr(group, k.name), k.absent(n)
        if isinstance(col, np.ndarray):
            if not np.array_equal(col, none, equal_nan=col.dtype.kind == "f"):
                return False
        elif col != none:
            return False
    return True


def column(kind: Kind) -> Mapping[str, Kind]:
    """The metadata of a dataclass field declared as a column of ``kind`` (``Columns``):
    ``x: FloatArray = field(metadata=column(Floats(...)))``."""
    return {"column": kind}


# -- the declaration, walked (the campaign store, the schema's tests) -------------------


@dataclass(frozen=True)
class Leaf:
    """A column that holds values (not a nested group, nor the shape of one), by its dotted
    path from the table, with what the campaign store keeps of it."""

    path: str
    kind: Kind
    campaign: Stored | NotStored
    owner: type[Columns]


def leaves(cls: type[Columns], at: str = "", inherited: Campaign | None = None) -> list[Leaf]:
    """Every value column of ``cls`` and of its nested groups. A group's ``Stored`` or
    ``NotStored`` covers its fields; under ``EACH`` (or at the top) each field must say;
    a field that does not is a TypeError here (and fails the schema's tests)."""
    out = []
    for k in cls.kinds():
        if k.structural:
            continue
        path = f"{at}{k.name}"
        decided = k.campaign if k.campaign is not None else inherited
        if decided is None or (isinstance(decided, Each) and not isinstance(k, Group)):
            raise TypeError(f"{cls.__name__}.{k.name}: say what the campaign store keeps of it")
        if isinstance(k, Group):
            out += leaves(k.cls, f"{path}.", None if isinstance(decided, Each) else decided)
        else:
            assert not isinstance(decided, Each)
            out.append(Leaf(path, k, decided, cls))
    return out


def kind_at(cls: type[Columns], path: str) -> Kind:
    """The kind of a field by its dotted path."""
    head, _, rest = path.partition(".")
    kind = next(k for k in cls.kinds() if k.name == head)
    if rest:
        assert isinstance(kind, Group)
        return kind_at(kind.cls, rest)
    return kind


def value_at(group: Columns, path: str) -> Any:
    """A column by its dotted path; an absent nested group's columns are absent."""
    head, _, rest = path.partition(".")
    col = getattr(group, head)
    if not rest:
        return col
    if col is None:
        kind = kind_at(type(group), path)
        return kind.absent(len(group))
    return value_at(col, rest)
