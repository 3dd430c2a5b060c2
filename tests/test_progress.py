"""Live progress: the running worst path, ranked and labelled by the policy's metric."""

from __future__ import annotations

from netqual.models import Metric, PathResult, RttStats, Verdict
from netqual.render.progress import progress_text
from netqual.results import RunningWorst


def _path(dst: str, verdict: Verdict, p50_us: float | None) -> PathResult:
    """p99 falls as p50 rises, so ranking by the wrong metric picks the wrong path."""
    rtt = None
    if p50_us is not None:
        p99 = 2000.0 - p50_us
        rtt = RttStats(10_000, 1.0, p50_us, p50_us, p99, p99, p99, p50_us, 1.0)
    return PathResult("a", dst, "tcp", verdict, (), rtt=rtt)


def test_running_worst_orders_by_verdict_then_by_the_policy_metric() -> None:
    worst = RunningWorst(Metric.P50)
    assert worst.add(_path("b", Verdict.SAFE, 20.0)).dst == "b"
    assert worst.add(_path("c", Verdict.SAFE, 30.0)).dst == "c"
    assert worst.add(_path("d", Verdict.SAFE, 25.0)).dst == "c"
    assert worst.add(_path("e", Verdict.MARGINAL, 10.0)).dst == "e"
    assert worst.add(_path("f", Verdict.UNSAFE, None)).dst == "f"
    assert worst.add(_path("g", Verdict.UNSAFE, 900.0)).dst == "f"


def test_progress_names_the_metric_the_policy_judges() -> None:
    path = _path("b", Verdict.MARGINAL, 250.0)
    assert path.rtt is not None
    text = progress_text(path, Metric.P50)
    assert text.startswith("worst: a -> b marginal (p50 ")
    assert "p99" not in text
    assert progress_text(_path("c", Verdict.UNSAFE, None), Metric.P50).endswith("(failed)")
