"""Paths kept as columns while they arrive: a run finishes half a million pairs one by one,
and a ``PathResult`` record costs ~3 KB where its row of a ``PathTable`` costs a few hundred
bytes. ``PathChunks`` packs records into a table every ``CHUNK`` paths; ``KeyedPaths`` is
the same, by (src, dst); ``concat`` joins tables into one.

A 1,024-node full mesh (523,776 paths) held as records took ~1.7 GB of a resumed run's
2.1 GB peak (docs/performance.md); as chunks it takes a fraction of that.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, MutableMapping, Sequence

import numpy as np

from netqual.model.path import PathResult
from netqual.table.columns import PathLike
from netqual.table.paths import PathTable

Key = tuple[str, str]
CHUNK = 4096  # records per packed table: small next to the run, large next to numpy's overhead


def concat(tables: Sequence[PathTable], names: Sequence[str] = ()) -> PathTable:
    """The rows of every table, in order, as one table. Node codes: ``names`` first, then
    each table's other nodes as they appear (tables with different node lists join)."""
    tables = [t for t in tables if len(t)] or tables[:1]
    if not tables:
        return PathTable.empty(names)
    if len(tables) == 1 and tables[0].names[: len(names)] == tuple(names):
        return tables[0]
    return PathTable.concat(tables, {"names": names})


class PathChunks:
    """Paths in the order they were added, records packed into tables every ``chunk``."""

    def __init__(
        self, names: Sequence[str] = (), tables: Sequence[PathTable] = (), chunk: int = CHUNK
    ) -> None:
        self.names = tuple(names)
        self._tables = [t for t in tables if len(t)]
        self._starts: list[int] = [0]
        for t in self._tables:
            self._starts.append(self._starts[-1] + len(t))
        self._tail: list[PathLike] = []
        self.chunk = chunk

    def copy(self) -> PathChunks:
        out = PathChunks(self.names, self._tables, self.chunk)
        out._tail = list(self._tail)
        return out

    def __len__(self) -> int:
        return self._starts[-1] + len(self._tail)

    def append(self, path: PathLike) -> int:
        """Adds a path; returns its row number."""
        self._tail.append(path)
        if len(self._tail) >= self.chunk:
            self._pack()
        return len(self) - 1

    def _pack(self) -> None:
        if self._tail:
            self._tables.append(PathTable.from_paths(self._tail, self.names))
            self._starts.append(self._starts[-1] + len(self._tail))
            self._tail = []

    def row(self, i: int) -> PathResult:
        if i >= self._starts[-1]:
            got = self._tail[i - self._starts[-1]]
            return got if isinstance(got, PathResult) else PathTable.from_paths([got]).row(0)
        k = bisect.bisect_right(self._starts, i) - 1
        return self._tables[k].row(i - self._starts[k])

    def table(self) -> PathTable:
        """Every path as one table (and kept so, so that asking again costs nothing)."""
        self._pack()
        if len(self._tables) > 1:
            self._tables = [concat(self._tables, self.names)]
            self._starts = [0, len(self._tables[0])]
        return self._tables[0] if self._tables else PathTable.empty(self.names)


class KeyedPaths(MutableMapping[Key, PathResult]):
    """Paths by (src, dst), kept as ``PathChunks``: the journal's finished pairs and those
    waiting for their bulk phase. Replacing or removing a path leaves its row behind until
    more than half the rows are such; then the live ones are packed anew."""

    def __init__(self, chunks: PathChunks | None = None, rows: dict[Key, int] | None = None):
        self._chunks = chunks if chunks is not None else PathChunks()
        self._rows: dict[Key, int] = rows if rows is not None else {}

    @classmethod
    def of(cls, table: PathTable, rows: dict[Key, int]) -> KeyedPaths:
        """The given rows of a table, by key."""
        return cls(PathChunks(table.names, [table]), rows)

    def copy(self) -> KeyedPaths:
        return KeyedPaths(self._chunks.copy(), dict(self._rows))

    def only(self, keys: set[Key]) -> KeyedPaths:
        """The paths whose key is in ``keys``, in this order."""
        return KeyedPaths(self._chunks.copy(), {k: r for k, r in self._rows.items() if k in keys})

    def __getitem__(self, key: Key) -> PathResult:
        return self._chunks.row(self._rows[key])

    def __setitem__(self, key: Key, path: PathResult) -> None:
        self._rows[key] = self._chunks.append(path)

    def __delitem__(self, key: Key) -> None:
        del self._rows[key]
        if self.stored > 2 * len(self._rows) + self._chunks.chunk:
            live = self.table()
            self._chunks = PathChunks(live.names, [live], self._chunks.chunk)
            self._rows = {k: i for i, k in enumerate(self._rows)}

    @property
    def stored(self) -> int:
        """Rows held, those of replaced and removed paths included."""
        return len(self._chunks)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def table(self) -> PathTable:
        """The paths as one table, in key order."""
        whole = self._chunks.table()
        if len(whole) == len(self._rows) and all(r == i for i, r in enumerate(self._rows.values())):
            return whole
        return whole.take(np.fromiter(self._rows.values(), np.int64, len(self._rows)))
