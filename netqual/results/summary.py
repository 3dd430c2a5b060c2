"""Summarising paths: counts per verdict and the worst paths (``summarize``, whose home is
``netqual.table.summary``), and the running worst path while a run progresses."""

from __future__ import annotations

import numpy as np

from netqual.model.path import PathResult
from netqual.model.stats import Metric
from netqual.table.paths import worst_first
from netqual.table.summary import WORST_PATHS, summarize

__all__ = ["WORST_PATHS", "RunningWorst", "summarize"]


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
