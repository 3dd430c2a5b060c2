"""The kinds of column a path table is declared with (``netqual.table.schema``): how one
field is held (a numpy array, a tuple, codes into a vocabulary, an (n, 2) interval array,
compact JSON), read from the records, given back to a record, taken, joined and filled
when absent, and what the campaign store keeps of it (``Stored``, ``NotStored``).

Conventions: a float column holds NaN for "absent" (JSON has no NaN, so nothing measured
is ever NaN), an integer column a fill value (-1) where that cannot be a value; the
variable-length parts are CSR: one flat array and per-row offsets, row i owning
``offsets[i]:offsets[i + 1]``.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, overload

import msgspec
import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
_NAN = math.nan
_EMPTY: tuple[str, ...] = ()


# -- what the campaign store keeps of a column (campaign/store.py, campaign/stored.py) ---


@dataclass(frozen=True)
class Stored:
    """Kept in the store's ``paths`` table as column ``sql`` (an interval as
    ``{sql}_low_us`` and ``{sql}_high_us``). ``back``: read back by ``stored_paths`` (the
    gate's baseline rules); else written for the campaign's own queries only. ``flag``:
    only whether there is a value (read back as the field's name). ``text``: an enum
    stored as its text rather than its code."""

    sql: str
    back: bool = True
    flag: bool = False
    text: bool = False


@dataclass(frozen=True)
class NotStored:
    """Not kept in the campaign store, and why (it comes back absent)."""

    why: str


@dataclass(frozen=True)
class Each:
    """A group whose fields each say what the store keeps of them."""


EACH = Each()
Campaign = Stored | NotStored | Each


# -- what building a group from records shares between its columns -------------------


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

    def remember(self, value: Any) -> Any:
        """One object per distinct hashable value (a tuple of evidence records)."""
        return self._seen.setdefault(value, value)


class Build:
    """The context of one ``Columns.build``: shared texts, the vocabularies built so far
    and the values read for them, and the attribute getters of the record type."""

    def __init__(
        self,
        records: Sequence[Any],
        shared: Shared,
        prefix: Mapping[str, Sequence[str]],
    ) -> None:
        self.records = records
        self.n = len(records)
        self.shared = shared
        self.prefix = prefix
        self.index: dict[str, dict[str, int]] = {}
        self.read: dict[str, list[Any]] = {}
        # a record type may name where it keeps a field (the wire's nested "completion_us")
        self._attrs: Mapping[str, str] = (
            getattr(type(records[0]), "column_attrs", {}) if records else {}
        )

    def values(self, attr: str) -> list[Any]:
        """Each record's ``attr`` (map() with attrgetter runs in C: ~20 columns x half a
        million rows in a few seconds)."""
        got = self.read.pop(attr, None)
        if got is None:
            got = list(map(operator.attrgetter(self._attrs.get(attr, attr)), self.records))
        return got


class Concat:
    """The context of one ``Columns.concat``: the parts, their lengths and the united
    vocabularies."""

    def __init__(self, parts: Sequence[Any], prefix: Mapping[str, Sequence[str]]) -> None:
        self.parts = parts
        self.prefix = prefix
        self.lengths = [len(p) for p in parts]
        self.index: dict[str, dict[str, int]] = {}

    def columns(self, name: str) -> list[Any]:
        return [getattr(p, name) for p in self.parts]


# -- kinds: how one field is held ------------------------------------------------------


class Kind:
    """How one field of a column group is held; subclasses implement the five operations.
    ``attr``: the record's attribute (default: the field's name); ``campaign``: what the
    campaign store keeps (None: as the enclosing group says)."""

    structural = False  # part of the group's shape (vocabulary, presence, offsets)

    def __init__(self, *, attr: str | None = None, campaign: Campaign | None = None) -> None:
        self.name = ""
        self.attr = attr or ""
        self.campaign = campaign

    def bind(self, name: str) -> None:
        self.name = name
        self.attr = self.attr or name

    def build(self, b: Build) -> Any:
        raise NotImplementedError

    def record(self, group: Any, i: int) -> dict[str, Any]:
        """Row ``i``'s contribution to the record's fields."""
        return {self.attr: self.value(getattr(group, self.name), i)}

    def value(self, col: Any, i: int) -> Any:
        raise NotImplementedError

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Any:
        raise NotImplementedError

    def concat(self, c: Concat) -> Any:
        raise NotImplementedError

    def absent(self, n: int) -> Any:
        raise NotImplementedError


class _ArrayKind(Kind):
    dtype: Any = np.float64
    fill: Any = _NAN

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Any:
        return col[idx]

    def concat(self, c: Concat) -> Any:
        return np.concatenate(c.columns(self.name))

    def absent(self, n: int) -> Any:
        return np.full(n, self.fill, dtype=self.dtype)


def floats_column(values: Iterable[float | None]) -> FloatArray:
    """A float column, None -> NaN; the common all-None and no-None cases at C speed."""
    items = list(values)
    nones = items.count(None)
    if nones == len(items):
        return np.full(len(items), _NAN)
    if not nones:
        return np.array(items, dtype=np.float64)
    return np.fromiter((_NAN if v is None else v for v in items), np.float64, len(items))


def opt_float(x: float) -> float | None:
    return None if math.isnan(x) else x


class Floats(_ArrayKind):
    """A float per row; ``optional``: None in the record is NaN here."""

    def __init__(
        self, *, optional: bool = False, attr: str | None = None, campaign: Campaign | None = None
    ) -> None:
        super().__init__(attr=attr, campaign=campaign)
        self.optional = optional

    def build(self, b: Build) -> Any:
        values = b.values(self.attr)
        if self.optional:
            return floats_column(values)
        return np.fromiter(values, np.float64, b.n)

    def value(self, col: Any, i: int) -> Any:
        x = col.item(i)
        return None if self.optional and math.isnan(x) else x


class Ints(_ArrayKind):
    """An integer per row; ``none``: the value that stands for None in the record (-1 where
    it cannot be a value); ``fill``: the value of an absent row (default ``none``, or 0)."""

    dtype = np.int64

    def __init__(
        self,
        *,
        none: int | None = None,
        fill: int | None = None,
        attr: str | None = None,
        campaign: Campaign | None = None,
    ) -> None:
        super().__init__(attr=attr, campaign=campaign)
        self.none = none
        self.fill = fill if fill is not None else none if none is not None else 0

    def build(self, b: Build) -> Any:
        values = b.values(self.attr)
        if self.none is None:
            return np.fromiter(values, np.int64, b.n)
        none = self.none
        return np.array([none if v is None else v for v in values], dtype=np.int64)

    def value(self, col: Any, i: int) -> Any:
        x = col.item(i)
        return None if x == self.none else x


class Bools(_ArrayKind):
    dtype = np.bool_
    fill = False

    def build(self, b: Build) -> Any:
        return np.fromiter(b.values(self.attr), np.bool_, b.n)

    def value(self, col: Any, i: int) -> Any:
        return col.item(i)


class Enum(_ArrayKind):
    """An enum member per row, held as its index in ``members``; ``none``: the code of a
    record's None (a file without tiers); ``fill``: the code of an absent row."""

    dtype = np.int64

    def __init__(
        self,
        members: Sequence[Any],
        *,
        none: int | None = None,
        fill: int = -1,
        attr: str | None = None,
        campaign: Campaign | None = None,
    ) -> None:
        super().__init__(attr=attr, campaign=campaign)
        self.members = tuple(members)
        self.code: dict[Any, int] = {m: i for i, m in enumerate(self.members)}
        if none is not None:
            self.code[None] = none
        self.fill = fill

    def build(self, b: Build) -> Any:
        return np.fromiter(map(self.code.__getitem__, b.values(self.attr)), np.int64, b.n)

    def value(self, col: Any, i: int) -> Any:
        return self.members[col.item(i)]


class Present(_ArrayKind):
    """Whether a row of an optional group is there (the group's records were not None)."""

    structural = True
    dtype = np.bool_
    fill = False

    def build(self, b: Build) -> Any:
        return np.ones(b.n, dtype=np.bool_)

    def record(self, group: Any, i: int) -> dict[str, Any]:
        return {}


class _TupleKind(Kind):
    fill: Any = None

    def value(self, col: Any, i: int) -> Any:
        return col[i]

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Any:
        return tuple([col[i] for i in py])

    def concat(self, c: Concat) -> Any:
        return tuple(chain.from_iterable(c.columns(self.name)))

    def absent(self, n: int) -> Any:
        return (self.fill,) * n


class Text(_TupleKind):
    """A text or None per row; ``shared``: one object per distinct text (reasons, errors)."""

    def __init__(
        self, *, shared: bool = True, attr: str | None = None, campaign: Campaign | None = None
    ) -> None:
        super().__init__(attr=attr, campaign=campaign)
        self.shared = shared

    def build(self, b: Build) -> Any:
        values = b.values(self.attr)
        return tuple(map(b.shared.text, values)) if self.shared else tuple(values)


class Texts(_TupleKind):
    """A tuple of texts per row (reasons, untrusted statistics)."""

    fill = _EMPTY

    def build(self, b: Build) -> Any:
        return b.shared.texts(b.values(self.attr))


class Records(_TupleKind):
    """A tuple of records per row, kept as the records themselves: for the few paths that
    have any (a fetch engine's cells take seconds a path to measure), so records cost
    nothing next to the rest; an absent row is the empty tuple (one shared object)."""

    fill = ()

    def build(self, b: Build) -> Any:
        return tuple(tuple(v or ()) for v in b.values(self.attr))


class Vocab(Kind):
    """The distinct values of the ``Codes`` fields that index into it, in first-seen order
    after the prefix ``Columns.build`` and ``concat`` are given under its name (the node
    list fixes the first node codes)."""

    structural = True

    def __init__(self, *coded: str) -> None:
        super().__init__()
        self.coded = coded

    def build(self, b: Build) -> Any:
        index = {name: i for i, name in enumerate(dict.fromkeys(b.prefix.get(self.name, ())))}
        read = [b.values(attr) for attr in self.coded]
        for attr, values in zip(self.coded, read, strict=True):
            b.read[attr] = values
        for value in dict.fromkeys(chain.from_iterable(zip(*read, strict=True))):
            index.setdefault(value, len(index))
        b.index[self.name] = index
        return tuple(index)

    def record(self, group: Any, i: int) -> dict[str, Any]:
        return {}

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Any:
        return col

    def concat(self, c: Concat) -> Any:
        names = tuple(
            dict.fromkeys(
                [*c.prefix.get(self.name, ()), *chain.from_iterable(c.columns(self.name))]
            )
        )
        c.index[self.name] = {n: i for i, n in enumerate(names)}
        return names

    def absent(self, n: int) -> Any:
        return ()


class Codes(_ArrayKind):
    """A value per row held as its index into the group's ``vocab`` field."""

    dtype = np.int64
    fill = -1

    def __init__(self, vocab: str, *, campaign: Campaign | None = None) -> None:
        super().__init__(campaign=campaign)
        self.vocab = vocab

    def build(self, b: Build) -> Any:
        index = b.index[self.vocab]
        return np.fromiter(map(index.__getitem__, b.values(self.attr)), np.int64, b.n)

    def record(self, group: Any, i: int) -> dict[str, Any]:
        return {self.attr: getattr(group, self.vocab)[getattr(group, self.name).item(i)]}

    def concat(self, c: Concat) -> Any:
        new = c.index[self.vocab]
        out = []
        for part in c.parts:
            values: IntArray = getattr(part, self.name)
            old = getattr(part, self.vocab)
            lookup = np.array([new[x] for x in old] or [0], dtype=np.int64)
            out.append(lookup[values] if len(values) else values.astype(np.int64))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class Interval(_ArrayKind):
    """A (low, high) pair or None per row, as an (n, 2) float array (NaN: none)."""

    def build(self, b: Build) -> Any:
        got = b.values(self.attr)
        pairs = np.full((b.n, 2), _NAN)
        rows = np.arange(b.n)
        if got.count(None):  # older files kept one metric's interval, or none
            rows = rows[np.fromiter((g is not None for g in got), np.bool_, len(got))]
            got = [g for g in got if g is not None]
        pairs[rows] = np.array(got, dtype=np.float64).reshape(len(got), 2)
        return pairs

    def value(self, col: Any, i: int) -> Any:
        low, high = col[i].tolist()
        return None if math.isnan(low) else (low, high)

    def absent(self, n: int) -> Any:
        return np.full((n, 2), _NAN)


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

    def rows_matching(self, pattern: bytes | re.Pattern[bytes]) -> IntArray:
        """Rows whose details' JSON holds ``pattern`` (a byte string, or a compiled regular
        expression): a cheap first pass before decoding the few that may matter."""
        if isinstance(pattern, bytes):
            hit = [raw is not None and pattern in raw for raw in self._items]
        else:
            search = pattern.search
            hit = [raw is not None and search(raw) is not None for raw in self._items]
        return np.flatnonzero(np.array(hit, dtype=np.bool_)).astype(np.int64)

    def count_key(self, key: str) -> int:
        """How many paths' details have ``key`` at the top level: the raw JSON is searched
        first, and only a row that holds the text is decoded."""
        token = msgspec.json.encode(key) + b":"
        return sum(
            1
            for raw in self._items
            if raw is not None and token in raw and key in msgspec.json.decode(raw)
        )


class Details(Kind):
    """A free-form mapping per row (``DetailsColumn``)."""

    def build(self, b: Build) -> Any:
        return DetailsColumn.of(b.values(self.attr))

    def value(self, col: Any, i: int) -> Any:
        return dict(col[i] or {})

    def take(self, col: Any, idx: IntArray, py: list[int]) -> Any:
        return col.take(py)

    def concat(self, c: Concat) -> Any:
        return DetailsColumn.concat(c.columns(self.name))

    def absent(self, n: int) -> Any:
        return DetailsColumn((None,) * n)


class Offsets(Kind):
    """A cell group's CSR offsets: row i owns cells ``offsets[i]:offsets[i + 1]``."""

    structural = True


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


def csr_concat(offsets: Sequence[IntArray]) -> IntArray:
    """Per-part CSR offsets as one: each part's shifted by the cells before it."""
    out, base = [np.zeros(1, dtype=np.int64)], 0
    for o in offsets:
        out.append(o[1:] + base)
        base += int(o[-1])
    return np.concatenate(out).astype(np.int64)


def lengths_offsets(lengths: Iterable[int], n: int) -> IntArray:
    return np.concatenate(([0], np.cumsum(np.fromiter(lengths, np.int64, n)))).astype(np.int64)
