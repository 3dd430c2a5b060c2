"""Gate evaluation time against the number of waivers: linear means the per-waiver time
stays flat from 10,000 to 1,000,000 waivers.

    PYTHONPATH=$PWD python bench/waivers.py [--rounds 3] [--nodes 64] [--sizes 10000,...]

Builds a results file of a full mesh (in memory) and profiles whose waivers name measured
paths, unknown nodes and unmeasured pairs in turn, then times ``evaluate`` (the gate's
whole judgement: rules, waiver use and the notes about waivers that excuse nothing).
Prints per size the median of the rounds and the time per waiver relative to 10,000.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from factories import make_results

from netqual.gate.evaluate import evaluate
from netqual.gate.profile import parse_profile


def profile_with(n: int, names: list[str]) -> dict[str, object]:
    waivers = []
    for i in range(n):
        a, b = names[i % len(names)], names[(i * 7 + 1) % len(names)]
        if i % 3 == 1:
            b = f"ghost{i}"
        waivers.append(
            {"src": a, "dst": b, "until": dt.date(2099, 1, 1), "reason": "r", "owner": "o"}
        )
    return {"limits": {"max_unsafe": 0}, "waiver": waivers}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="waiver counts")
    args = ap.parse_args()
    results = make_results(args.nodes, slow_nodes=["gpu01"])
    names = [n.name for n in results.nodes]
    base = None
    print(f"{'waivers':>10} {'median s':>10} {'us/waiver':>10} {'vs 10k':>8}")
    for n in map(int, args.sizes.split(",")):
        profile = parse_profile(profile_with(n, names), "bench")
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            evaluate(results, profile, today=dt.date(2026, 12, 1))
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        per = med / n * 1e6
        base = base or per
        print(f"{n:>10,} {med:>10.2f} {per:>10.2f} {per / base:>8.2f}")


if __name__ == "__main__":
    main()
