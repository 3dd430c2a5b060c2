"""Results of a --rails same run built in memory (docs/rails.md): for localisation, the
terminal, the report and the gate tests of rails."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

from factories import make_rtt

from netqual.analysis import localise
from netqual.analysis.policy import judge
from netqual.model.node import Nic, Node
from netqual.model.path import PathResult, Tier
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode, RunMeta
from netqual.model.stats import Metric
from netqual.planning.rails import endpoints
from netqual.results import summarize
from netqual.table.paths import PathTable
from netqual.table.run import Results


def rail_results(
    hosts: int = 4,
    rails: int = 2,
    slow: dict[tuple[str, int], float] | None = None,
    nic_name: str = "eth{rail}",
) -> Results:
    """A --rails same run: every host pair on every rail, p99 60 us unless an end is in
    ``slow`` ((node, rail) -> p99 of its paths); NICs named ``nic_name`` (the lab's are
    "to-rail{rail}")."""
    rng = random.Random(5)
    slow = slow or {}
    nodes = [
        Node(
            f"h{i}",
            f"198.18.0.{i}",
            rack="r1",
            nics=tuple(
                Nic(nic_name.format(rail=r), f"198.18.{10 + r}.{i}", r) for r in range(rails)
            ),
        )
        for i in range(1, hosts + 1)
    ]
    ends = [e for n in nodes for e in endpoints(n)]
    paths = []
    for a, b in itertools.combinations(ends, 2):
        assert a.nic is not None and b.nic is not None
        if a.nic.rail != b.nic.rail or a.node_name == b.node_name:
            continue
        p99 = max(
            slow.get((a.node_name, a.nic.rail), 60.0), slow.get((b.node_name, b.nic.rail), 60.0)
        )
        rtt = replace(make_rtt(p99 / 2, 1.0, 10_000, rng, histogram=False), p99_us=p99)
        verdict, reasons = judge(Policy(), rtt)
        paths.append(
            PathResult(
                a.name,
                b.name,
                "tcp",
                verdict,
                reasons,
                rtt=rtt,
                tier=Tier.SAME_RACK,
                hops=2,
                src_nic=a.nic.name,
                dst_nic=b.nic.name,
                rail=a.nic.rail,
            )
        )
    meta = RunMeta(
        "2026-12-01T12:00:00+00:00", "2026-12-01T12:01:00+00:00", "tcp", Mode.FULL_MESH,
        Policy(), ProbePlan(), {},
    )  # fmt: skip
    table = PathTable.from_paths(paths, [e.name for e in ends])
    res = Results(meta, tuple(ends), table, summarize(table, Metric.P99))
    return replace(res, suspects=localise.suspects(res))
