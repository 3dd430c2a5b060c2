"""Two runs' paths joined by (src, dst): ``PairIndex``, the distinct pairs of one table,
sorted once and looked up with ``np.searchsorted`` (diff, the gate's baseline rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netqual.table.paths import IntArray, PathTable

NOT_FOUND = -1


@dataclass(frozen=True, eq=False)
class PairIndex:
    """The distinct (src, dst) keys of a table over ``names``, sorted, with the first and
    the last row of each. Where a pair was measured twice (a retest), its last row stands
    for it, as a dict of the rows would keep it. Built once, looked up by searchsorted."""

    names: tuple[str, ...]
    keys: IntArray
    first: IntArray
    last: IntArray

    @classmethod
    def of(cls, table: PathTable, names: Sequence[str]) -> PairIndex:
        keys = table.pair_keys(names)
        order = np.argsort(keys, kind="stable")  # equal keys stay in row order
        ordered = keys[order]
        new = np.ones(len(ordered), dtype=np.bool_)
        new[1:] = ordered[1:] != ordered[:-1]
        ends = np.ones(len(ordered), dtype=np.bool_)
        ends[:-1] = new[1:]
        return cls(tuple(names), ordered[new], order[new], order[ends])

    def position(self, wanted: IntArray) -> IntArray:
        """The index into ``keys`` of each wanted key, NOT_FOUND where there is none."""
        if not len(self.keys):
            return np.full(len(wanted), NOT_FOUND, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        found: IntArray = np.where(self.keys[pos] == wanted, pos, NOT_FOUND)
        return found

    def match(self, table: PathTable, rows: IntArray | None = None) -> IntArray:
        """For each of ``rows`` of ``table`` (default: all), the position of its (src, dst)
        key, else of (dst, src), else NOT_FOUND (``names`` must hold table's names)."""
        n = len(self.names)
        src, dst = table.codes(self.names)
        if rows is not None:
            src, dst = src[rows], dst[rows]
        same = self.position(src * n + dst)
        got: IntArray = np.where(same != NOT_FOUND, same, self.position(dst * n + src))
        return got
