"""Summarising paths: counts per verdict and the worst paths, worst first (rank_key).

Used when a run finishes, when a results file is loaded, and live while a run progresses.
"""

from __future__ import annotations

from collections.abc import Iterable

from netqual.models import Metric, PathResult, Summary, Verdict, rank_key

WORST_PATHS = 10


def summarize(paths: Iterable[PathResult], metric: Metric = Metric.P99) -> Summary:
    """Counts per verdict and the worst paths: unsafe first, then by the policy metric."""
    paths = list(paths)
    counts = {v: 0 for v in Verdict}
    for p in paths:
        counts[p.verdict] += 1

    def badness(p: PathResult) -> tuple[int, float]:
        return rank_key(p, metric)

    worst = sorted((p for p in paths if p.verdict is not Verdict.SAFE), key=badness, reverse=True)
    if len(worst) < WORST_PATHS:
        rest = sorted((p for p in paths if p.verdict is Verdict.SAFE), key=badness, reverse=True)
        worst += rest[: WORST_PATHS - len(worst)]
    return Summary(counts=counts, worst=tuple(p.key for p in worst[:WORST_PATHS]))


class RunningWorst:
    """The worst path so far in O(1) per finished pair: unsafe, then marginal, then safe,
    and inside a verdict the highest value of the policy's metric (a failed path has none
    and counts as infinitely slow)."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric
        self.path: PathResult | None = None
        self._key = (-1, 0.0)

    def add(self, path: PathResult) -> PathResult:
        key = rank_key(path, self.metric)
        if self.path is None or key > self._key:
            self.path, self._key = path, key
        return self.path
