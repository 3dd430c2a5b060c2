"""One CSV row per path, for spreadsheets. Numbers unrounded, units in the column names."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from netqual.base.units import format_size
from netqual.files.outfiles import write_atomic
from netqual.model.stats import RTT_FIELDS, RTT_STATISTICS
from netqual.table.paths import NO_HOPS, TIERS, VERDICTS
from netqual.table.run import Results

BASE_COLUMNS = [
    "src", "dst", "src_rack", "dst_rack", "src_role", "dst_role", "tier", "hops", "transport",
    "verdict",
    # RttStats.summary_values() fills these, in this order
    "samples", *RTT_FIELDS.values(),
    "error", "reasons",
]  # fmt: skip


# OWASP "CSV injection": a cell a spreadsheet would read as a formula starts with one of
# these; such text cells get a leading apostrophe (shown as text, never evaluated).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(cell: object) -> object:
    """Text that would start a formula, prefixed with ``'``; numbers and other text as is."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_START):
        return "'" + cell
    return cell


def write_csv(results: Results, path: Path) -> None:
    """One line per path, streamed from the columns (no record per path)."""
    table = results.paths
    bulk = table.bulk
    # the (chunk, depth) cells any path measured, sorted; cell_of: each bulk row's cell
    pairs = np.stack((bulk.chunk_bytes, bulk.depth), axis=1).reshape(-1, 2)
    cells, cell_of = np.unique(pairs, axis=0, return_inverse=True)
    bulk_cols = []
    for chunk, depth in cells.tolist():
        tag = f"bulk_{format_size(chunk)}_d{depth}"
        bulk_cols += [f"{tag}_goodput_gbps", f"{tag}_completion_p50_us", f"{tag}_completion_p99_us"]

    def write(f: TextIO) -> None:
        w = csv.writer(f)
        w.writerow(BASE_COLUMNS + bulk_cols)
        w.writerows(_rows(results, cell_of.reshape(-1).tolist(), len(cells)))

    write_atomic(path, write)


def _rows(results: Results, cell_of: list[int], n_cells: int) -> Iterator[list[object]]:
    """Each path's cells in BASE_COLUMNS order, then its bulk cells (blank where it has
    none), built from plain lists of the columns and already neutralised: text that is
    the same for many paths (names, racks, roles, tiers) once per distinct value, numbers
    never (they cannot start a formula)."""
    table = results.paths
    nodes = {n.name: n for n in results.nodes}
    got = [nodes.get(name) for name in table.names]
    names = [neutralise(name) for name in table.names]
    rack = [neutralise(n.rack) if n else "" for n in got]
    role = [neutralise(n.role.value) if n else "" for n in got]
    tiers = [t.value for t in TIERS]
    verdicts = [v.value for v in VERDICTS]
    transports = [neutralise(t) for t in table.transports]
    stats = list(zip(*(table.rtt[n].tolist() for n in RTT_STATISTICS), strict=True))
    no_rtt = [""] * (1 + len(RTT_STATISTICS))
    b = table.bulk
    offsets = b.offsets.tolist()
    values = list(zip(b.goodput_gbps.tolist(), b.p50_us.tolist(), b.p99_us.tolist(), strict=True))
    columns = zip(
        table.src.tolist(),
        table.dst.tolist(),
        table.tier.tolist(),
        table.hops.tolist(),
        table.transport.tolist(),
        table.verdict.tolist(),
        table.has_rtt.tolist(),
        table.samples.tolist(),
        stats,
        table.error,
        table.reasons,
        strict=True,
    )
    for i, (s, d, tier, hops, tr, verdict, has_rtt, samples, st, error, reasons) in enumerate(
        columns
    ):
        row: list[object] = [
            names[s], names[d], rack[s], rack[d], role[s], role[d],
            tiers[tier], "" if hops == NO_HOPS else hops, transports[tr], verdicts[verdict],
        ]  # fmt: skip
        row += [samples, *st] if has_rtt else no_rtt
        row += [neutralise(error or ""), neutralise("; ".join(reasons))]
        cell_values: list[object] = [""] * (3 * n_cells)
        for k in range(offsets[i], offsets[i + 1]):  # a later cell of the same shape wins
            c = cell_of[k]
            cell_values[3 * c : 3 * c + 3] = values[k]
        yield row + cell_values
