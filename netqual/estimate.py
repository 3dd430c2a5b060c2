"""``netqual run --dry-run``: what a run would do and roughly how long it takes, without
contacting any agent.

Duration model (stated, not measured; ``DurationModel`` holds the constants):
- one pair takes ``pair_setup_s`` (connect, authenticate, hop probe, tear down) plus
  (warm-up + iterations) round trips at ``rtt_us`` of the transport plus, when the plan
  has bulk cells, every cell's bytes at ``goodput_gbps`` of the transport;
- a round runs its pairs at once, except that pairs sharing a host run one after another
  (the coordinator's rule) and at most ``--parallel`` run together: a round takes
  ``batches x pair time`` with batches = max(most pairs on one host, ceil(pairs / parallel));
- the run is the sum of its rounds.
A slow or unreachable path (time-outs) makes a real run longer than this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from netqual.models import Mode, Node, ProbePlan
from netqual.plan_codec import plan_to_dict
from netqual.schedule import Schedule, build

PREVIEW_ROUNDS = 3
PREVIEW_PAIRS = 6


@dataclass(frozen=True)
class DurationModel:
    pair_setup_s: float = 0.5
    rtt_us: dict[str, float] = field(default_factory=lambda: {"tcp": 50.0, "rdma": 10.0})
    goodput_gbps: dict[str, float] = field(default_factory=lambda: {"tcp": 10.0, "rdma": 50.0})

    def pair_s(self, plan: ProbePlan, transport: str) -> float:
        pingpong_s = (plan.warmup + plan.iterations) * self.rtt_us[transport] * 1e-6
        bulk_bytes = 0
        if plan.bulk:
            per_depth = sum(plan.reads_for(c) * c for c in plan.chunks_bytes)
            bulk_bytes = per_depth * len(plan.depths)
        bulk_s = bulk_bytes * 8 / (self.goodput_gbps[transport] * 1e9)
        return self.pair_setup_s + pingpong_s + bulk_s


@dataclass(frozen=True)
class DryRun:
    inventory: str
    nodes: int
    mode: Mode
    transport: str
    rounds: int
    pairs: int
    max_pairs_per_round: int
    batches: int  # sum over rounds of the batches each round is split into
    plan: ProbePlan
    pair_s: float
    estimated_s: float
    model: DurationModel
    preview: tuple[tuple[tuple[str, str], ...], ...]  # first rounds, first pairs of each
    preview_sizes: tuple[int, ...]  # how many pairs each previewed round has


def _host_codes(nodes: tuple[Node, ...]) -> np.ndarray:
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(n.address, len(codes)) for n in nodes], dtype=np.int64)


def round_batches(plan: Schedule, parallel: int | None) -> int:
    """Sum over rounds of max(most pairs touching one host, ceil(pairs / parallel))."""
    host = _host_codes(plan.nodes)
    total = 0
    for pos in plan.rounds_positions():
        if not len(pos):
            continue
        a, b = host[pos[:, 0]], host[pos[:, 1]]
        busiest = int(np.bincount(np.concatenate([a, b[b != a]])).max())
        total += max(busiest, math.ceil(len(pos) / parallel) if parallel else 1)
    return total


def dry_run(
    inventory: str,
    nodes: tuple[Node, ...],
    mode: Mode,
    transport: str,
    plan: ProbePlan,
    parallel: int | None = None,
    sample_k: int = 2,
    model: DurationModel | None = None,
) -> DryRun:
    model = model or DurationModel()
    sched = build(nodes, mode, sample_k)
    batches = round_batches(sched, parallel)
    pair_s = model.pair_s(plan, transport)
    preview = tuple(
        tuple((nodes[a].name, nodes[b].name) for a, b in sched.round_positions(r)[:PREVIEW_PAIRS])
        for r in range(min(PREVIEW_ROUNDS, sched.round_count))
    )
    sizes = tuple(len(sched.round_positions(r)) for r in range(len(preview)))
    return DryRun(
        inventory=inventory,
        nodes=len(nodes),
        mode=mode,
        transport=transport,
        rounds=sched.round_count,
        pairs=sched.pair_count,
        max_pairs_per_round=sched.max_round_pairs(),
        batches=batches,
        plan=plan,
        pair_s=pair_s,
        estimated_s=batches * pair_s,
        model=model,
        preview=preview,
        preview_sizes=sizes,
    )


def dry_run_to_dict(d: DryRun) -> dict[str, object]:
    return {
        "dry_run": True,
        "inventory": d.inventory,
        "nodes": d.nodes,
        "mode": d.mode.value,
        "transport": d.transport,
        "rounds": d.rounds,
        "pairs": d.pairs,
        "max_pairs_per_round": d.max_pairs_per_round,
        "batches": d.batches,
        "plan": plan_to_dict(d.plan),
        "estimate": {
            "pair_s": round(d.pair_s, 6),
            "duration_s": round(d.estimated_s, 3),
            "model": {
                "pair_setup_s": d.model.pair_setup_s,
                "rtt_us": d.model.rtt_us[d.transport],
                "goodput_gbps": d.model.goodput_gbps[d.transport],
                "rule": "sum over rounds of batches x pair_s; pair_s = setup + "
                "(warmup + iterations) x rtt_us + bulk bytes at goodput_gbps",
            },
        },
        "preview": [[list(p) for p in r] for r in d.preview],
    }
