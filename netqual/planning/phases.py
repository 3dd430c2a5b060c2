"""How a run's probes are laid out in time, so that netqual does not disturb itself.

A probe has two phases: ping-pong (small messages; its RTT decides the verdict) and bulk
reads (KV-chunk-sized reads that can fill a link). Where one pair's bulk reads share a
link with another pair's ping-pong, the RTT measured includes netqual's own traffic.

Schedules (``--schedule``):

- ``aligned`` (default): every ping-pong round first, then every bulk read, packed into
  waves under the bulk budget. No bulk byte is on the wire while any ping-pong runs.
- ``per-round``: each round runs its ping-pong phase, waits for all of it (a barrier),
  then that round's bulk reads in waves under the budget, then the next round.
- ``unaligned``: each pair runs ping-pong then bulk on its own clock (one request), the
  schedule before phases existed; kept to measure the difference.

The bulk budget caps concurrent bulk pairs per shared resource the inventory knows: a
node (one NIC: a pair counts against both ends' addresses), a rack uplink and a site link
(a pair between two racks or sites counts against both). ``--incast N`` replaces the
budget by a deliberate fan-in: up to N readers of one node at once, nothing else running.
How the caps are derived: netqual.planning.budget and docs/scheduling.md. Running the
phases in time (threads, windows, the tally) is ``netqual.run.phaserun``.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from netqual.base.errors import UsageError
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.planning import packing
from netqual.planning.budget import (
    BulkBudget,
    budget_for,
)
from netqual.planning.fabric import Fabric
from netqual.planning.packing import Coverage
from netqual.planning.schedule import Pair


class Timing(str, enum.Enum):
    """When ping-pong and bulk run relative to each other (``run --schedule``)."""

    ALIGNED = "aligned"
    PER_ROUND = "per-round"
    UNALIGNED = "unaligned"


class Phase(str, enum.Enum):
    PINGPONG = "pingpong"
    BULK = "bulk"
    PROBE = "probe"  # ping-pong then bulk in one request (unaligned)


@dataclass(frozen=True)
class ScheduleConfig:
    """What the user asked for; None caps are derived from the plan and the fabric
    (``resolve``)."""

    schedule: Timing = Timing.ALIGNED
    bulk_per_node: int | None = None
    bulk_per_rack: int | None = None
    incast: int | None = None
    bulk_pairs: Coverage = field(default_factory=Coverage)

    def __post_init__(self) -> None:
        for option, value in (
            ("--bulk-per-node", self.bulk_per_node),
            ("--bulk-per-rack", self.bulk_per_rack),
        ):
            if value is not None and value < 1:
                raise UsageError(option, f"must be >= 1, got {value}")
        if self.incast is not None and self.incast < 2:
            raise UsageError("--incast", f"must be >= 2 readers, got {self.incast}")
        if self.incast is not None and self.schedule is Timing.UNALIGNED:
            raise UsageError("--incast", "needs an aligned schedule (bulk runs in its own phase)")
        if self.bulk_pairs.kind != "all" and self.schedule is not Timing.ALIGNED:
            # Coverage is chosen over the whole run, which only --schedule aligned has.
            raise UsageError("--bulk-pairs", "needs --schedule aligned")


def resolve(
    cfg: ScheduleConfig,
    plan: ProbePlan,
    nodes: Sequence[Node] = (),
    fabric: Fabric | None = None,
) -> BulkBudget:
    """The bulk budget of a run (netqual.planning.budget): caps from the plan and the fabric."""
    return budget_for(
        plan, nodes, fabric or Fabric(), cfg.bulk_per_node, cfg.bulk_per_rack, cfg.incast
    )


def resources(a: Node, b: Node) -> tuple[tuple[str, str], ...]:
    """The shared things a bulk read between a and b loads: both hosts' NICs, and both
    rack uplinks / site links when the pair crosses racks / sites."""
    out = [("node", a.address), ("node", b.address)]
    if a.rack is not None and b.rack is not None and a.rack != b.rack:
        out += [("rack", a.rack), ("rack", b.rack)]
    site_a, site_b = a.labels.get("site"), b.labels.get("site")
    if site_a is not None and site_b is not None and site_a != site_b:
        out += [("site", site_a), ("site", site_b)]
    return tuple(dict.fromkeys(out))


def bulk_waves(pairs: Sequence[Pair], budget: BulkBudget) -> list[list[Pair]]:
    """Bulk pairs in waves that keep every resource within its cap (netqual.planning.packing)."""
    if budget.incast is not None:
        return incast_waves(pairs, budget.incast)
    return packing.waves(pairs, budget.packing_caps())


def planned_bulk_waves(
    rounds: Sequence[Sequence[Pair]],
    cfg: ScheduleConfig,
    plan: ProbePlan,
    nodes: Sequence[Node],
    fabric: Fabric,
) -> list[list[Pair]]:
    """The bulk waves a run of ``rounds`` makes, every ping-pong succeeding: the pairs
    ``--bulk-pairs`` covers, packed under the budget, over the whole run (aligned) or round
    by round (per-round). What the estimate counts; ``run.phaserun`` packs the same way."""
    budget = resolve(cfg, plan, nodes, fabric)
    groups = [[p for r in rounds for p in r]] if cfg.schedule is Timing.ALIGNED else rounds
    waves: list[list[Pair]] = []
    for group in groups:
        chosen = packing.select(group, cfg.bulk_pairs)
        waves += bulk_waves([p for p, c in zip(group, chosen, strict=True) if c], budget)
    return waves


def incast_waves(pairs: Sequence[Pair], readers: int) -> list[list[Pair]]:
    """Deliberate fan-in: groups of up to ``readers`` pairs reading from the same node (the
    responder, ``dst``) with distinct reader hosts; each group is a wave on its own."""
    by_dst: dict[str, list[Pair]] = {}
    for a, b in pairs:
        by_dst.setdefault(b.address + "|" + b.name, []).append((a, b))
    waves: list[list[Pair]] = []
    for group in by_dst.values():
        open_waves: list[tuple[list[Pair], set[str]]] = []
        for a, b in group:
            for members, hosts in open_waves:
                if len(members) < readers and a.address not in hosts:
                    members.append((a, b))
                    hosts.add(a.address)
                    break
            else:
                open_waves.append(([(a, b)], {a.address}))
        waves += [m for m, _ in open_waves]
    return waves


def host_batches(pairs: Sequence[Pair], parallel: int | None) -> list[list[Pair]]:
    """Split a round so pairs that share a host (one CPU, one NIC) never run together
    (``batch_numbers`` on the pairs' addresses)."""
    batches: list[list[Pair]] = []
    for pair, i in zip(
        pairs, batch_numbers([(a.address, b.address) for a, b in pairs], parallel), strict=True
    ):
        if i == len(batches):
            batches.append([])
        batches[i].append(pair)
    return batches


def batch_numbers(hosts: Sequence[tuple[Hashable, Hashable]], parallel: int | None) -> list[int]:
    """The batch of each pair of a round, given its two hosts: the first batch after the
    last one holding either host (skipping batches already at the --parallel cap). O(pairs)
    even when every node of a round sits on one host, where a first-fit scan over batches
    would be quadratic. Batch numbers start at 0 and grow by at most one per pair."""
    sizes: list[int] = []
    next_free: dict[Hashable, int] = {}
    out = []
    for a, b in hosts:
        i = max(next_free.get(a, 0), next_free.get(b, 0))
        while i < len(sizes) and parallel is not None and sizes[i] >= parallel:
            i += 1
        if i == len(sizes):
            sizes.append(0)
        sizes[i] += 1
        out.append(i)
        next_free[a] = next_free[b] = i + 1
    return out


def layout(cfg: ScheduleConfig, budget: BulkBudget, bulk: bool) -> dict[str, Any]:
    """``run.schedule`` of the results file (without the interference part)."""
    if not bulk:
        phases = ["pingpong"]
    elif cfg.schedule is Timing.UNALIGNED:
        phases = ["pingpong+bulk per pair"]
    elif cfg.schedule is Timing.PER_ROUND:
        phases = ["per round: pingpong", "per round: bulk"]
    else:
        phases = ["pingpong", "bulk"]
    out: dict[str, Any] = {"name": cfg.schedule.value, "phases": phases}
    if bulk and cfg.schedule is not Timing.UNALIGNED:
        out.update(budget.to_dict())
        out["bulk_pairs"] = cfg.bulk_pairs.label
        out["bulk"] = "incast" if budget.incast is not None else "budgeted"
    elif bulk:
        out["bulk"] = "unbudgeted"
    return out
