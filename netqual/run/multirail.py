"""``run --multirail N``: read one node pair over 1, 2, ... R of its shared rails at once
(docs/rails.md), after the pairs.

For each of the first N node pairs (in plan order) that share at least two rails, level k
runs the bulk cell (the plan's largest chunk at its largest depth) on the first k rails
side by side, one probe per rail through the same path as every other probe
(``pairprobe.measure_pair``), all started together; the level's aggregate is the sum of
the rails' goodputs. ``analysis.multirail.judge`` then says whether each added rail added at
least the stated share of its line rate.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from netqual.analysis.multirail import judge
from netqual.model.multirail import MultiRail, RailLevel
from netqual.model.node import Node
from netqual.model.path import PathResult
from netqual.model.plan import ProbePlan
from netqual.planning import rails as rails_mod
from netqual.planning.fabric import DEFAULT_NIC_GBPS, Fabric
from netqual.planning.rails import endpoints

Measure = Callable[[Node, Node, ProbePlan], PathResult]  # one bulk-only probe


node_pairs = rails_mod.multirail_pairs  # the node pairs read, in inventory order
cell_plan = rails_mod.multirail_cell  # the plan's largest chunk at its largest depth


def measure_pair(
    a: Node, b: Node, plan: ProbePlan, measure: Measure, fabric: Fabric, min_share: float
) -> MultiRail:
    ends_a = {e.nic.rail: e for e in endpoints(a) if e.nic is not None}
    ends_b = {e.nic.rail: e for e in endpoints(b) if e.nic is not None}
    rails = tuple(sorted(ends_a.keys() & ends_b.keys()))
    cell = cell_plan(plan)
    levels: list[RailLevel] = []
    for k in range(1, len(rails) + 1):
        used = rails[:k]
        with ThreadPoolExecutor(max_workers=k) as pool:
            paths = list(pool.map(lambda r: measure(ends_a[r], ends_b[r], cell), used))
        per_rail, error = [], None
        for r, p in zip(used, paths, strict=True):
            bad = p.error or (p.bulk[0].error if p.bulk else "no bulk cell")
            if bad is not None:
                error = error or f"rail {r}: {bad}"
                per_rail.append(0.0)
            else:
                per_rail.append(p.bulk[0].goodput_gbps)
        total = None if error else sum(per_rail)
        before = levels[-1].aggregate_gbps if levels else None
        gain = None if total is None or before is None else total - before
        levels.append(RailLevel(k, tuple(per_rail), total, gain, error))
    line = fabric.nic_gbps.get(a.name, DEFAULT_NIC_GBPS)
    verdict, short = judge(levels, line, min_share)
    return MultiRail(
        a.name, b.name, rails, cell.chunks_bytes[0], cell.depths[0], line, min_share,
        tuple(levels), verdict, short,
    )  # fmt: skip
