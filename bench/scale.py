#!/usr/bin/env python3
"""netqual at cluster scale: planning, and (``--results``) a synthetic run's files.

plan: builds the full-mesh, bipartite and sampled schedules for each ``--nodes`` size and
walks every round (positions only, as the coordinator does), printing rounds, pairs and
seconds. The issue's bar: 1,024 nodes < 1 s, 10,000 nodes < 30 s.

    PYTHONPATH=$PWD bench/scale [--nodes 1024,10000] [--sample-k 2]
"""

from __future__ import annotations

import argparse
import os
import time

from netqual import schedule
from netqual.models import Mode, Node, Role


def synthetic_nodes(n: int, rack_size: int = 32) -> list[Node]:
    """Every fourth node storage; racks of rack_size; distinct addresses."""
    return [
        Node(
            name=f"n{i:05d}",
            address=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
            role=Role.STORAGE if i % 4 == 3 else Role.COMPUTE,
            rack=f"r{i // rack_size:03d}",
        )
        for i in range(n)
    ]


def bench_plan(sizes: list[int], sample_k: int) -> None:
    print(f"{'nodes':>6} {'mode':>10} {'rounds':>7} {'pairs':>10} {'plan_s':>7}")
    for n in sizes:
        nodes = synthetic_nodes(n)
        for mode in Mode:
            t0 = time.perf_counter()
            plan = schedule.build(nodes, mode, sample_k)
            walked = sum(len(pos) for pos in plan.rounds_positions())
            dt = time.perf_counter() - t0
            assert walked == plan.pair_count, (walked, plan.pair_count)
            print(f"{n:>6} {mode.value:>10} {plan.round_count:>7} {walked:>10} {dt:>7.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", default="1024,10000", help="comma-separated node counts")
    ap.add_argument("--sample-k", type=int, default=2, help="sampled mode: pairs per rack pair")
    args = ap.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bench_plan([int(x) for x in args.nodes.split(",")], args.sample_k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
