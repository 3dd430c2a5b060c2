"""Recommendations blame distance before nodes when the topology explains the verdicts."""

from __future__ import annotations

from netqual.model.node import Node
from netqual.model.path import PathResult, Tier
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode, RunMeta
from netqual.model.stats import Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.report.recommend import recommend
from netqual.results import summarize
from netqual.table.paths import PathTable
from netqual.table.run import Results

NODES = tuple(
    Node(name, f"198.18.{i}.1", rack=rack, labels={"site": site})
    for i, (name, rack, site) in enumerate(
        [
            ("a1", "r1", "dc"),
            ("a2", "r1", "dc"),
            ("b1", "r2", "dc"),
            ("b2", "r2", "dc"),
            ("s1", "far", "remote"),
        ]
    )
)


def path(src: str, dst: str, p99: float, tier: Tier, hops: int) -> PathResult:
    verdict = Verdict.SAFE if p99 <= 200 else Verdict.MARGINAL if p99 <= 500 else Verdict.UNSAFE
    rtt = RttStats(10_000, p99 / 2, p99 / 1.5, p99 / 1.2, p99, p99 * 1.2, p99 * 2, p99 / 1.4, 1.0)
    return PathResult(src, dst, "tcp", verdict, ("x",), rtt, (), hops, tier)


def results(paths: list[PathResult]) -> Results:
    meta = RunMeta(
        "2026-11-29T12:00:00+00:00",
        "2026-11-29T12:01:00+00:00",
        "tcp",
        Mode.FULL_MESH,
        Policy(),
        ProbePlan(),
        {},
    )
    return Results(meta, NODES, PathTable.from_paths(paths), summarize(paths, Metric.P99))


def test_distance_is_blamed_not_every_node() -> None:
    paths = [
        path("a1", "a2", 60, Tier.SAME_RACK, 2),
        path("b1", "b2", 70, Tier.SAME_RACK, 2),
        path("a1", "b1", 320, Tier.CROSS_RACK, 4),
        path("a1", "b2", 330, Tier.CROSS_RACK, 4),
        path("a2", "b1", 340, Tier.CROSS_RACK, 4),
        path("a2", "b2", 310, Tier.CROSS_RACK, 4),
        *(path(n, "s1", 1200, Tier.REMOTE, 5) for n in ("a1", "a2", "b1", "b2")),
    ]
    recs = recommend(results(paths))
    titles = [r.title for r in recs]
    assert titles[:2] == [
        "Keep KV offload inside each rack",
        "Do not offload KV-cache to the remote site",
    ]
    assert not any("local NVMe" in t for t in titles)
    assert "4 of 4 cross-rack paths (4 hops) are not offload-safe, p99 310.0 us to 340.0 us" in (
        recs[0].text
    )
    assert recs[0].severity == "marginal" and recs[1].severity == "unsafe"


def test_a_slow_node_inside_a_healthy_tier_is_still_named() -> None:
    paths = [
        path("a1", "a2", 60, Tier.SAME_RACK, 2),
        path("b1", "b2", 900, Tier.SAME_RACK, 2),
        path("a1", "b1", 950, Tier.CROSS_RACK, 4),
        path("a2", "b1", 990, Tier.CROSS_RACK, 4),
        path("a1", "b2", 80, Tier.CROSS_RACK, 4),
        path("a2", "b2", 90, Tier.CROSS_RACK, 4),
    ]
    titles = [r.title for r in recommend(results(paths))]
    assert "Keep b1 on local NVMe" in titles
    assert "Keep KV offload inside each rack" not in titles
