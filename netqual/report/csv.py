"""One CSV row per path, for spreadsheets. Numbers unrounded, units in the column names."""

from __future__ import annotations

import csv
from pathlib import Path

from netqual.models import RTT_STATISTICS, Results
from netqual.units import format_size

BASE_COLUMNS = [
    "src", "dst", "src_rack", "dst_rack", "src_role", "dst_role", "tier", "hops", "transport",
    "verdict",
    # RttStats.summary_values() fills these, in this order
    "samples", *(f"{n}_us" for n in RTT_STATISTICS),
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
    nodes = {n.name: n for n in results.nodes}
    cells = sorted({(b.chunk_bytes, b.depth) for p in results.paths for b in p.bulk})
    bulk_cols = []
    for chunk, depth in cells:
        tag = f"bulk_{format_size(chunk)}_d{depth}"
        bulk_cols += [f"{tag}_goodput_gbps", f"{tag}_completion_p50_us", f"{tag}_completion_p99_us"]
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(BASE_COLUMNS + bulk_cols)
        for p in results.paths:
            a, b, r = nodes.get(p.src), nodes.get(p.dst), p.rtt
            row: list[object] = [
                p.src, p.dst, a.rack if a else "", b.rack if b else "",
                a.role.value if a else "", b.role.value if b else "",
                p.tier.value, "" if p.hops is None else p.hops, p.transport, p.verdict.value,
            ]  # fmt: skip
            row += [""] * (1 + len(RTT_STATISTICS)) if r is None else list(r.summary_values())
            row += [p.error or "", "; ".join(p.reasons)]
            by_cell = {(x.chunk_bytes, x.depth): x for x in p.bulk}
            for cell in cells:
                x = by_cell.get(cell)
                row += (
                    [x.goodput_gbps, x.completion_p50_us, x.completion_p99_us]
                    if x
                    else ["", "", ""]
                )
            w.writerow([neutralise(cell) for cell in row])
