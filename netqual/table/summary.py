"""A run's summary from its path columns: counts per verdict and the worst paths, worst first
(``table.columns.worst_first``). Used when a run finishes, when a results file is loaded and
when the decision re-judges a run (``netqual.results`` re-exports it)."""

from __future__ import annotations

from collections.abc import Iterable

from netqual.model.path import PathResult
from netqual.model.run import Summary
from netqual.model.stats import Metric
from netqual.table.paths import PathTable

WORST_PATHS = 10


def summarize(paths: PathTable | Iterable[PathResult], metric: Metric) -> Summary:
    """Counts per verdict and the worst paths: unsafe first, then by the policy metric
    (``PathTable.ranked``: one sort over columns, no per-path objects)."""
    table = paths if isinstance(paths, PathTable) else PathTable.from_paths(paths)
    worst = table.ranked(metric)[:WORST_PATHS]
    return Summary(counts=table.counts(), worst=tuple(table.key(i) for i in worst))
