#!/usr/bin/env python3
"""Bulk-wave packing at cluster scale (netqual.planning.packing through phases.bulk_waves).

For each ``--nodes`` size (racks of ``--rack-size`` hosts) and each fabric (non-blocking,
the default; 2:1 oversubscribed racks) packs the bulk pairs of a full mesh under the
default plan's caps, ``--repeats`` times, and prints the median seconds, the waves, and
the ratio of waves to the n-1 rounds of the mesh (1.00: every ping-pong round is one
wave). Coverage ``per-node:2`` is packed too. ``cpu_s`` is the median CPU time of this
process: on a shared host the wall time is mostly other work's. The issue's bar: 1,024
nodes in 32 racks < 2 s with about n-1 waves.

    PYTHONPATH=$PWD python3 bench/packing.py [--nodes 256,1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.planning.fabric import Fabric, Uplink
from netqual.planning.packing import Coverage, select
from netqual.planning.phases import ScheduleConfig, bulk_waves, resolve
from netqual.planning.schedule import Pair, full_mesh


def racked(n: int, rack_size: int) -> list[Node]:
    return [
        Node(
            f"n{i:05d}",
            f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
            rack=f"r{i // rack_size:03d}",
        )
        for i in range(n)
    ]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", default="256,1024")
    ap.add_argument("--rack-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"{'nodes':>6} {'fabric':>12} {'coverage':>11} {'pairs':>8} {'waves':>6} "
          f"{'waves/(n-1)':>11} {'median_s':>8} {'cpu_s':>7}")  # fmt: skip
    for n in (int(x) for x in args.nodes.split(",")):
        nodes = racked(n, args.rack_size)
        pairs: list[Pair] = [p for r in full_mesh(nodes).rounds() for p in r]
        racks = sorted({nd.rack or "" for nd in nodes})
        fabrics = {
            "non-blocking": Fabric(),
            "2:1": Fabric(racks={r: Uplink(oversubscription=2.0) for r in racks}),
        }
        for fname, fabric in fabrics.items():
            for cov in ("all", "per-node:2"):
                times, cpu, waves = [], [], 0
                for _ in range(args.repeats):
                    t0, c0 = time.perf_counter(), time.process_time()
                    chosen = select(pairs, Coverage.parse(cov))
                    bulk = [p for p, c in zip(pairs, chosen, strict=True) if c]
                    w = bulk_waves(bulk, resolve(ScheduleConfig(), ProbePlan(), nodes, fabric))
                    times.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                    waves = len(w)
                    assert sum(map(len, w)) == len(bulk)
                print(f"{n:>6} {fname:>12} {cov:>11} {len(bulk):>8} {waves:>6} "
                      f"{waves / (n - 1):>11.2f} {statistics.median(times):>8.2f} "
                      f"{statistics.median(cpu):>7.2f}")  # fmt: skip
    print("load average " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
