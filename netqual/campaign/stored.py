"""A run's paths in the history store, both ways, as the path schema declares them
(``netqual.table.schema``: each column says what the store keeps of it). ``insert_paths``
writes a run's columns into the ``paths`` table; ``stored_paths`` reads them back as a
``PathTable`` (the gate's baseline rules compare with the baseline run as the store keeps
it, so a milestone gate reads one half-million-path results file, not two). Neither lists
the columns: a column the declaration keeps is written and read back, one it does not
comes back absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from netqual.table.kinds import (
    Codes,
    Enum,
    Floats,
    Interval,
    Ints,
    Kind,
    Stored,
    Text,
)
from netqual.table.paths import PathTable
from netqual.table.schema import (
    Leaf,
    leaves,
    value_at,
)

# What the store adds of its own: the pair in name order (a re-run that measured the pair
# from the other end lines up), the racks of its ends, its best bulk goodput.
EXTRA_COLUMNS = ("seq", "a", "b", "src_rack", "dst_rack", "goodput_gbps")


@dataclass(frozen=True)
class _Column:
    """One leaf as SQL: the registered arrays, the expression inserting it (over ``p``, the
    registered relation), the expression reading it back, and the joins either needs."""

    leaf: Leaf
    names: tuple[str, ...]  # its column(s) in ``paths``

    @property
    def stored(self) -> Stored:
        assert isinstance(self.leaf.campaign, Stored)
        return self.leaf.campaign


def stored_columns() -> list[_Column]:
    """Every leaf of the path schema the store keeps, with its SQL column names."""
    out = []
    for leaf in leaves(PathTable):
        if isinstance(leaf.campaign, Stored):
            sql = leaf.campaign.sql
            names = (
                (f"{sql}_low_us", f"{sql}_high_us") if isinstance(leaf.kind, Interval) else (sql,)
            )
            out.append(_Column(leaf, names))
    return out


def path_columns() -> tuple[str, ...]:
    """The columns of the store's ``paths`` table, as the declaration and EXTRA_COLUMNS
    make them (tests hold the schema and its migrations to it)."""
    return (*EXTRA_COLUMNS, *(n for c in stored_columns() for n in c.names))


def _vocab(kind: Kind) -> str:
    assert isinstance(kind, Codes)
    return kind.vocab


def _codes_table(values: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    table = {
        "code": np.arange(len(values), dtype=np.int32),
        "name": np.array(list(values), dtype=object),
    }
    return table | dict(extra or {})


def _unsupported(c: _Column) -> TypeError:
    return TypeError(f"the history store has no SQL form for {c.leaf.path} ({c.leaf.kind!r})")


def insert_paths(
    con: duckdb.DuckDBPyConnection, seq: int, t: PathTable, racks: Mapping[str, str | None]
) -> None:
    """Run ``seq``'s paths into ``paths``. The columns go in as integer codes and numbers;
    names, racks, transports and tiers are joined in from small code tables (strings made
    per path in numpy would be millions of Python objects). NaN is the columns' "absent";
    the store says NULL."""
    n = len(t)
    order = np.empty(len(t.names), dtype=np.int64)  # each name's place in name order
    order[np.argsort(np.array(t.names, dtype=str), kind="stable")] = np.arange(len(t.names))
    swap = order[t.src] > order[t.dst]
    cols: dict[str, Any] = {
        "a": np.where(swap, t.dst, t.src).astype(np.int32),
        "b": np.where(swap, t.src, t.dst).astype(np.int32),
        "goodput_gbps": _best_goodput(t.bulk.offsets, t.bulk.goodput_gbps, n),
    }
    tables: dict[str, dict[str, Any]] = {
        "_v_names": _codes_table(
            t.names, {"rack": np.array([racks.get(x) for x in t.names], dtype=object)}
        )
    }
    joins = [
        "JOIN _v_names na ON na.code = p.a",
        "JOIN _v_names nb ON nb.code = p.b",
        "JOIN _v_names ns ON ns.code = p.src",
        "JOIN _v_names nd ON nd.code = p.dst",
    ]
    into = ["seq", "a", "b", "src_rack", "dst_rack", "goodput_gbps"]
    select = ["?", "na.name", "nb.name", "ns.rack", "nd.rack", "nullif(p.goodput_gbps, 'NaN')"]
    for c in stored_columns():
        kind, sql, col = c.leaf.kind, c.stored.sql, value_at(t, c.leaf.path)
        into += c.names
        if isinstance(kind, Codes):
            cols[sql] = col.astype(np.int32)
            vocab = _vocab(kind)
            if f"_v_{vocab}" not in tables:
                tables[f"_v_{vocab}"] = _codes_table(getattr(t, vocab))
            if sql not in ("src", "dst"):  # joined above, with their racks
                joins.append(f"JOIN _v_{vocab} j_{sql} ON j_{sql}.code = p.{sql}")
            select.append({"src": "ns.name", "dst": "nd.name"}.get(sql, f"j_{sql}.name"))
        elif isinstance(kind, Enum) and c.stored.text:
            cols[sql] = col.astype(np.int8)
            tables[f"_m_{sql}"] = _codes_table([m.value for m in kind.members])
            joins.append(f"JOIN _m_{sql} m_{sql} ON m_{sql}.code = p.{sql}")
            select.append(f"m_{sql}.name")
        elif isinstance(kind, Enum):
            cols[sql] = col.astype(np.int8)
            select.append(f"nullif(p.{sql}, {kind.fill})")
        elif isinstance(kind, Ints):
            cols[sql] = col
            select.append(f"p.{sql}" if kind.none is None else f"nullif(p.{sql}, {kind.none})")
        elif isinstance(kind, Floats):
            cols[sql] = col
            select.append(f"nullif(p.{sql}, 'NaN')")
        elif isinstance(kind, Interval):
            for k, name in enumerate(c.names):
                cols[name] = np.ascontiguousarray(col[:, k])
                select.append(f"nullif(p.{name}, 'NaN')")
        elif isinstance(kind, Text) and c.stored.flag:
            cols[sql] = np.fromiter((e is not None for e in col), np.bool_, n)
            select.append(f"p.{sql}")
        else:
            raise _unsupported(c)
    registered = {"_new_paths": cols, **tables}
    for name, relation in registered.items():
        con.register(name, relation)
    try:
        con.execute(
            f"INSERT INTO paths ({', '.join(into)}) SELECT {', '.join(select)}"
            f" FROM _new_paths p {' '.join(joins)}",
            [seq],
        )
    finally:
        for name in registered:
            con.unregister(name)


def stored_paths(con: duckdb.DuckDBPyConnection, seq: int) -> PathTable:
    """Run ``seq``'s paths back as a ``PathTable`` of the columns the store keeps (node
    names in name order; a path has an RTT where its p99 was kept); every other column
    absent (no histogram, no bulk cell, no reasons; an error is only known to have
    happened). Enough for the gate's baseline rules, without reading that run's results
    file again."""
    back = [c for c in stored_columns() if c.stored.back]
    vocabs: dict[str, tuple[str, ...]] = {}
    for c in back:
        if isinstance(c.leaf.kind, Codes):
            vocab = _vocab(c.leaf.kind)
            mates = [x.stored.sql for x in back if getattr(x.leaf.kind, "vocab", None) == vocab]
            union = " UNION ".join(f"SELECT {m} AS v FROM paths WHERE seq = $seq" for m in mates)
            found = con.execute(f"SELECT DISTINCT v FROM ({union}) ORDER BY v", {"seq": seq})
            vocabs[vocab] = tuple(v for (v,) in found.fetchall())
    tables = {f"_v_{v}": _codes_table(names) for v, names in vocabs.items()}
    select, joins, order = [], [], []
    for c in back:
        kind, sql = c.leaf.kind, c.stored.sql
        if isinstance(kind, Codes):
            joins.append(f"JOIN _v_{_vocab(kind)} j_{sql} ON j_{sql}.name = p.{sql}")
            select.append(f"j_{sql}.code AS {sql}")
            if sql in ("src", "dst"):
                order.append(f"j_{sql}.code")
        elif isinstance(kind, Enum) and c.stored.text:
            tables[f"_m_{sql}"] = _codes_table([m.value for m in kind.members])
            joins.append(f"JOIN _m_{sql} m_{sql} ON m_{sql}.name = p.{sql}")
            select.append(f"m_{sql}.code AS {sql}")
        elif isinstance(kind, Enum):
            select.append(f"coalesce(p.{sql}, {kind.fill}) AS {sql}")
        elif isinstance(kind, Ints):
            fill = kind.fill if kind.none is None else kind.none
            select.append(f"coalesce(p.{sql}, {fill}) AS {sql}")
        elif isinstance(kind, (Floats, Interval)):
            select += [f"coalesce(p.{name}, 'NaN') AS {name}" for name in c.names]
        elif isinstance(kind, Text) and c.stored.flag:
            select.append(f"p.{sql}")
        else:
            raise _unsupported(c)
    for name, relation in tables.items():
        con.register(name, relation)
    try:
        got = con.execute(
            f"SELECT {', '.join(select)} FROM paths p {' '.join(joins)}"
            f" WHERE p.seq = ? ORDER BY {', '.join(order)}",
            [seq],
        ).fetchnumpy()
    finally:
        for name in tables:
            con.unregister(name)
    n = len(got[back[0].names[0]])
    given: dict[str, Any] = dict(vocabs)
    for c in back:
        kind, path = c.leaf.kind, c.leaf.path
        if isinstance(kind, Interval):
            low, high = (np.asarray(got[x], dtype=np.float64) for x in c.names)
            given[path] = np.column_stack([low, high]) if n else np.zeros((0, 2))
        elif isinstance(kind, Text):
            flags = np.asarray(got[c.stored.sql], dtype=np.bool_).tolist()
            given[path] = tuple(kind.name if f else None for f in flags)
        elif isinstance(kind, Floats):
            given[path] = np.asarray(got[c.stored.sql], dtype=np.float64)
        else:
            given[path] = np.asarray(got[c.stored.sql], dtype=np.int64)
    # the RTT group's presence is no column of its own: a path has one where p99 was kept
    given["rtt_stats.present"] = ~np.isnan(given["rtt_stats.p99_us"])
    return PathTable.from_leaves(n, given)


def _best_goodput(offsets: Any, goodput: Any, n: int) -> Any:
    """Per path, its best bulk goodput over all chunk/depth cells (NaN: no bulk cell)."""
    out = np.full(n, np.nan)
    has = offsets[1:] > offsets[:-1]
    if has.any():
        starts = offsets[:-1][has]
        out[has] = np.maximum.reduceat(goodput, starts)
    return out
