"""Summarising paths: counts per verdict and the worst paths, worst first
(``table.columns.worst_first``).

Used when a run finishes, when a results file is loaded, and live while a run progresses.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from netqual.model.path import PathResult
from netqual.model.run import Summary
from netqual.model.stats import Metric
from netqual.table.paths import PathTable, worst_first

WORST_PATHS = 10


def summarize(paths: PathTable | Iterable[PathResult], metric: Metric) -> Summary:
    """Counts per verdict and the worst paths: unsafe first, then by the policy metric
    (``PathTable.ranked``: one sort over columns, no per-path objects)."""
    table = paths if isinstance(paths, PathTable) else PathTable.from_paths(paths)
    worst = table.ranked(metric)[:WORST_PATHS]
    return Summary(counts=table.counts(), worst=tuple(table.key(i) for i in worst))


class RunningWorst:
    """The worst path so far in O(1) per finished pair: unsafe, then marginal, then safe,
    and inside a verdict the highest value of the policy's metric (a failed path has none
    and counts as infinitely slow)."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric
        self.path: PathResult | None = None

    def add(self, path: PathResult) -> PathResult:
        if self.path is None:
            self.path = path
            return path
        pair = (self.path, path)  # on a tie the earlier path stays the worst
        verdict = np.array([p.verdict.rank for p in pair], dtype=np.int64)
        value = np.array([p.rtt.value(self.metric) if p.rtt else np.nan for p in pair])
        self.path = pair[int(worst_first(verdict, value)[0])]
        return self.path
