#!/usr/bin/env python3
"""Does the run disturb itself? Schedules compared on a lab with a rate-limited spine.
(root; docs/performance.md "Schedules and interference")

Lab: two racks behind leaf1/leaf2, a spine whose two links are shaped to ``--spine-mbit``
(kernel tbf, 20 ms queue). Host b2 hangs off leaf2 behind a row of 8 small routers (plain
veth), so pairs to b2 ping-pong longer than pairs to b1: in an unaligned round the a?-b1
pair finishes its ping-pong first and starts bulk reads across the spine while the a?-b2
pair is still ping-ponging across the same spine. Each run is a full mesh (6 pairs) followed by the
interference check (every path re-measured alone), so the ratio run/alone comes from
netqual's own check.

    sudo PYTHONPATH=. bench/lab_interference.py [--repeats 3] [--schedules unaligned,aligned]

Prints one line per run and the medians per schedule; ``--json`` for machine use.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netqual import lab
from netqual.base.units import KIB, MIB
from netqual.lab.topology import Topology, parse
from netqual.model.node import Node
from netqual.model.path import Tier
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.planning.budget import BulkBudget
from netqual.planning.inventory import load_inventory
from netqual.planning.phases import ScheduleConfig, Timing, bulk_waves, host_batches
from netqual.planning.schedule import circle_rounds
from netqual.run.coordinator import RunConfig, run

# A 100 Mbit/s spine with a 20 ms queue: a bulk read fills the queue, and a ping-pong
# packet behind it waits up to 20 ms, far above this machine's scheduling noise at p99.
SPINE_MBIT = 100.0
QUEUE_US = 20_000.0
CHAIN = 8
# 2,000 kept samples and one 16 MiB bulk cell (256 KiB x depth 4) per pair: 16 MiB at
# 100 Mbit/s keeps the spine busy for ~1.3 s, long enough for dozens of delayed samples.
PLAN = ProbePlan(
    iterations=1_000,
    warmup=100,
    chunks_bytes=(256 * KIB,),
    depths=(4,),
    bulk_bytes=16 * MIB,
    min_reads=4,
    timeout_s=60.0,
)
POLICY = Policy(min_samples=1_000)


def topology(spine_mbit: float, chain: int, queue_us: float) -> Topology:
    """Two racks; r2's host b2 sits behind ``chain`` extra routers (plain veth, no relay),
    so its pairs ping-pong longer than b1's without a user-space relay's noise."""
    hosts = [
        {"name": "a1", "rack": "r1"},
        {"name": "a2", "rack": "r1"},
        {"name": "b1", "rack": "r2"},
        {"name": "b2", "rack": "r2"},
    ]
    hops = [f"row{i}" for i in range(chain)]
    links: list[dict[str, object]] = [
        {"a": "a1", "b": "leaf1"},
        {"a": "a2", "b": "leaf1"},
        {"a": "b1", "b": "leaf2"},
    ]
    links += [{"a": x, "b": y} for x, y in zip(["leaf2", *hops], [*hops, "b2"], strict=True)]
    for leaf in ("leaf1", "leaf2"):
        links.append({"a": leaf, "b": "spine", "rate_mbit": spine_mbit, "queue_us": queue_us})
    routers = [{"name": n} for n in ("leaf1", "leaf2", "spine", *hops)]
    raw = {"lab": {"name": "interference", "control": "spine"}, "router": routers}
    return parse({**raw, "host": hosts, "link": links}, "interference-bench")


@dataclass(frozen=True)
class Outcome:
    schedule: str
    cross_p50_ratio: float | None  # median over cross-rack paths of run / alone
    cross_p99_ratio: float | None
    same_p99_ratio: float | None
    exceeds: bool
    affected: tuple[str, ...]
    verdict_changes: int
    run_s: float  # the run without the interference check


def one_run(nodes: Sequence[Node], token: bytes, schedule: Timing, out: Path) -> Outcome:
    cfg = RunConfig(
        nodes=tuple(nodes),
        policy=POLICY,
        plan=PLAN,
        token=token,
        schedule=ScheduleConfig(schedule),
        interference_seed=1,
    )
    results = run(cfg, out)
    inter = results.interference
    assert inter is not None
    tiers = {t.tier: t for t in inter.tiers}
    cross, same = tiers.get(Tier.CROSS_RACK), tiers.get(Tier.SAME_RACK)
    ends = [
        float(window[1])
        for p in results.paths
        if isinstance(windows := p.details.get("phase_windows_s"), dict)
        for window in windows.values()
    ]
    return Outcome(
        schedule=schedule.value,
        cross_p50_ratio=cross.p50_ratio if cross else None,
        cross_p99_ratio=cross.p99_ratio if cross else None,
        same_p99_ratio=same.p99_ratio if same else None,
        exceeds=inter.exceeds,
        affected=tuple(t.value for t in inter.affected_tiers),
        verdict_changes=inter.verdict_changes,
        run_s=max(ends, default=0.0),
    )


def experiment(
    schedules: Sequence[Timing],
    repeats: int,
    spine_mbit: float = SPINE_MBIT,
    chain: int = CHAIN,
    queue_us: float = QUEUE_US,
    state_dir: Path | None = None,
) -> list[Outcome]:
    """Runs interleaved (u, a, u, a, ...) so that load changes hit both schedules."""
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="nq-interference-") as tmp:
        state = state_dir or Path(tmp) / "lab"
        with lab.running(topology(spine_mbit, chain, queue_us), state) as info:
            inv = load_inventory(info.inventory_path)
            token = info.token_file.read_bytes().strip()
            for i, schedule in enumerate(
                itertools.islice(itertools.cycle(schedules), repeats * len(schedules))
            ):
                outcomes.append(one_run(inv.nodes, token, schedule, Path(tmp) / f"run{i}"))
    return outcomes


def median_of(outcomes: Sequence[Outcome], schedule: str, field: str) -> float | None:
    values = [getattr(o, field) for o in outcomes if o.schedule == schedule]
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def wave_counts(racks: int, per_rack: int, budget: BulkBudget) -> tuple[int, int, int]:
    """(rounds, bulk waves when aligned, bulk waves per round) for a racked full mesh."""
    nodes = [
        Node(f"h{r}-{i}", f"10.{r}.0.{i}", rack=f"r{r}")
        for r in range(racks)
        for i in range(per_rack)
    ]
    rounds = circle_rounds(nodes)
    aligned = len(bulk_waves([p for r in rounds for p in r], budget))
    per_round = sum(len(bulk_waves(r, budget)) for r in rounds)
    assert all(len(host_batches(r, None)) == 1 for r in rounds)
    return len(rounds), aligned, per_round


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--schedules", default="unaligned,aligned,per-round")
    ap.add_argument("--spine-mbit", type=float, default=SPINE_MBIT)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    schedules = [Timing(s) for s in args.schedules.split(",")]
    reason = lab.lab_available()
    if reason:
        print(f"lab_interference: {reason}", file=sys.stderr)
        return 2
    outcomes = experiment(schedules, args.repeats, args.spine_mbit)
    waves = {
        f"{racks}x{per}": wave_counts(racks, per, BulkBudget(1, cap, None, 100.0))
        for racks, per in ((4, 8), (8, 8), (16, 8))
        for cap in (2,)
    }
    if args.json:
        print(json.dumps({"runs": [asdict(o) for o in outcomes], "waves": waves}, indent=1))
        return 0
    for o in outcomes:
        print(
            f"{o.schedule:<10} cross-rack p50 x{o.cross_p50_ratio or 0:.2f} "
            f"p99 x{o.cross_p99_ratio or 0:.2f}  same-rack p99 x{o.same_p99_ratio or 0:.2f}  "
            f"exceeds={o.exceeds} {list(o.affected)}  verdict changes {o.verdict_changes}  "
            f"run {o.run_s:.1f} s"
        )
    for s in schedules:
        p99 = median_of(outcomes, s.value, "cross_p99_ratio") or 0
        p50 = median_of(outcomes, s.value, "cross_p50_ratio") or 0
        run_s = median_of(outcomes, s.value, "run_s") or 0
        print(f"median {s.value:<10} cross-rack p99 x{p99:.2f}  p50 x{p50:.2f}  run {run_s:.1f} s")
    for shape, (rounds, aligned, per_round) in waves.items():
        print(
            f"bulk waves, racks x hosts {shape}, rack cap 2: {rounds} rounds, "
            f"aligned {aligned}, per-round {per_round}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
