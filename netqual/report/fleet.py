"""The report's "Configuration" section (netqual.analysis.fleet): outliers first, then each fleet
key's values with the nodes that have them. Autoescaped by the template."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.analysis.fleet import by_deviation, key_rows, nodes_text, who_text
from netqual.model.fleet import FleetOutlier
from netqual.table.run import Results


@dataclass(frozen=True)
class FleetView:
    nodes: int
    outliers: tuple[FleetOutlier, ...]
    rows: tuple[tuple[str, str, bool], ...]  # key, "9000 (all 4); 1400 (b1)", an outlier's key
    # one row per deviation: its first outlier and the nodes that have it ("n1, n2 and 98
    # more"); a row per outlier grew with the fleet
    deviations: tuple[tuple[FleetOutlier, str], ...] = ()

    @property
    def headline(self) -> str | None:
        """First-screen alert: the first outlier, and how many."""
        if not self.outliers:
            return None
        more = len(self.outliers) - 1
        rest = f" (+{more} more: see Configuration)" if more else ""
        return f"Configuration outlier: {self.outliers[0].text}{rest}"


def fleet_view(results: Results) -> FleetView | None:
    found = results.fleet
    if found is None:
        return None
    n = len(found.snapshot)
    odd = {o.key for o in found.outliers}
    rows = tuple(
        (key, "; ".join(f"{v} ({nodes_text(ns, n)})" for v, ns in ranked), key in odd)
        for key, ranked in key_rows(found)
    )
    deviations = tuple((o, who_text(nodes, n)) for o, nodes in by_deviation(found))
    return FleetView(n, found.outliers, rows, deviations)
