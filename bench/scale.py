#!/usr/bin/env python3
"""netqual at cluster scale: planning, and (``--results``) a synthetic run's files.

plan: builds the full-mesh, bipartite and sampled schedules for each ``--nodes`` size and
walks every round (positions only, as the coordinator does), printing rounds, pairs and
seconds. The issue's bar: 1,024 nodes < 1 s, 10,000 nodes < 30 s.

ci95 cost (``--ci95-cost N``): the same synthetic N-node file twice, every path with the
policy metric's interval alone (``ci95``, as files of older versions) and with every
percentile's (``ci95_by_metric``, this version), and the bare ``load`` of each in its own
process, alternated ``--repeats`` times: sizes, median wall seconds, peak RSS, ratios.

results (``--results N``): writes a synthetic N-node full-mesh results.json with only the
schema's required keys, then times ``netqual report FILE --html``, ``netqual gate FILE``
and ``netqual diff FILE FILE`` each in its own process (wall seconds, peak RSS), after the
bare ``load`` of the file and the terminal ``report``. The issue's bar for N = 1,024
(523,776 paths): each < 30 s and < 2 GiB.

    PYTHONPATH=$PWD bench/scale [--nodes 1024,10000] [--sample-k 2] [--results 1024] [--out DIR]
    PYTHONPATH=$PWD bench/scale --nodes 8 --ci95-cost 1024 --repeats 3 [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from netqual.model.node import Node, Role
from netqual.model.run import Mode
from netqual.planning import schedule


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


# a synthetic interval's half width per percentile, as a share of its value
_CI_HALF = {"p50": 0.02, "p90": 0.03, "p99": 0.05, "p999": 0.10}


def _intervals(ci95: str, values: dict[str, float]) -> str:
    """The path's intervals as ``ci95`` writes them: "none", "legacy" (p99's alone, the
    older files' ``ci95``) or "all" (``ci95_by_metric``)."""
    if ci95 == "legacy":
        v, w = values["p99"], _CI_HALF["p99"]
        return f',"ci95":{{"metric":"p99","low":{v * (1 - w):.3f},"high":{v * (1 + w):.3f}}}'
    if ci95 == "all":
        pairs = ",".join(
            f'"{k}":[{values[k] * (1 - w):.3f},{values[k] * (1 + w):.3f}]'
            for k, w in _CI_HALF.items()
        )
        return f',"ci95_by_metric":{{{pairs}}}'
    return ""


def synthetic_results(path: Path, n: int, seed: int = 1, ci95: str = "none") -> int:
    """Write a full-mesh results.json over n nodes with only the schema's required keys
    (and the intervals ``ci95`` names, ``_intervals``).

    Racks of 32; node 3 slow (unsafe on every path), racks r001<->r002 marginal, 0.2% of
    the other paths randomly marginal, 2 failed paths. Returns the number of paths."""
    rng = np.random.default_rng(seed)
    nodes = synthetic_nodes(n)
    i, j = np.triu_indices(n, k=1)
    rack = np.arange(n) // 32
    same = rack[i] == rack[j]
    p50 = np.where(same, 18.0, 34.0) * rng.uniform(0.9, 1.15, len(i))
    p99 = p50 * rng.uniform(1.5, 3.0, len(i))
    slow_pair = ((rack[i] == 1) & (rack[j] == 2)) | (rng.random(len(i)) < 0.002)
    p99 = np.where(slow_pair, rng.uniform(210, 480, len(i)), p99)
    p99 = np.where((i == 3) | (j == 3), rng.uniform(600, 900, len(i)), p99)
    failed = set(rng.choice(len(i), 2, replace=False).tolist())
    verdict = np.where(p99 > 500, "unsafe", np.where(p99 > 200, "marginal", "offload-safe"))
    counts = {"offload-safe": 0, "marginal": 0, "unsafe": 0}
    names = [nd.name for nd in nodes]
    with path.open("w", encoding="utf-8") as f:
        f.write(
            '{"schema_version":"1","tool":{"name":"netqual","version":"bench"},'
            '"run":{"started_at":"2026-11-30T00:00:00+00:00",'
            '"finished_at":"2026-11-30T10:00:00+00:00","transport":"tcp",'
            '"mode":"full-mesh","policy":{"metric":"p99","safe_max_us":200.0,'
            '"unsafe_above_us":500.0,"min_samples":10000}},"nodes":['
        )
        f.write(
            ",".join(
                json.dumps(
                    {
                        "name": nd.name,
                        "address": nd.address,
                        "role": nd.role.value,
                        "rack": nd.rack,
                        "labels": {},
                    }
                )
                for nd in nodes
            )
        )
        f.write('],"paths":[')
        rows = zip(
            i.tolist(), j.tolist(), p50.tolist(), p99.tolist(), verdict.tolist(), strict=True
        )
        for k, (a, b, m, t, v) in enumerate(rows):
            if k:
                f.write(",")
            hops = 2 if rack[a] == rack[b] else 4
            if k in failed:
                counts["unsafe"] += 1
                f.write(
                    f'{{"src":"{names[a]}","dst":"{names[b]}","transport":"tcp","hops":null,'
                    '"rtt_us":null,"bulk":[],"verdict":"unsafe",'
                    '"reasons":["measurement failed: timeout"],"error":"timeout"}'
                )
                continue
            counts[v] += 1
            reason = "" if v == "offload-safe" else f'"p99 {t:.1f} us"'
            ci = _intervals(ci95, {"p50": m, "p90": m * 1.2, "p99": t, "p999": t * 1.3})
            f.write(
                f'{{"src":"{names[a]}","dst":"{names[b]}","transport":"tcp","hops":{hops},'
                f'"rtt_us":{{"samples":10000,"min":{m * 0.8:.3f},"p50":{m:.3f},'
                f'"p90":{m * 1.2:.3f},"p99":{t:.3f},"p999":{t * 1.3:.3f},"max":{t * 1.5:.3f},'
                f'"mean":{m * 1.05:.3f},"stdev":{m * 0.05:.3f}{ci}}},'
                f'"bulk":[{{"chunk_bytes":1048576,"depth":8,"reads":128,'
                f'"goodput_gbps":{2e3 / m:.3f},"completion_us":{{"p50":{m * 20:.3f},'
                f'"p99":{t * 20:.3f}}}}}],"verdict":"{v}","reasons":[{reason}],"error":null}}'
            )
        f.write(f'],"summary":{{"counts":{json.dumps(counts)},"worst":[]}}}}\n')
    return len(i)


def _measure(cmd: list[str]) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS (MiB), exit status and CPU seconds (user + system) of a child
    command: on a shared host the CPU is the figure to compare, the wall moves with load."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr.decode(errors="replace")[-2000:])
    return wall, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


def bench_results(n: int, out: Path) -> None:
    """Each command in its own process, as a user runs it (peak RSS per process)."""
    out.mkdir(parents=True, exist_ok=True)
    rfile = out / f"results-{n}.json"
    t0 = time.perf_counter()
    paths = synthetic_results(rfile, n)
    print(
        f"synthetic {n} nodes: {paths} paths, {rfile.stat().st_size / 1e6:.0f} MB, "
        f"written in {time.perf_counter() - t0:.1f} s"
    )
    netqual = [sys.executable, "-m", "netqual"]
    load_only = "from pathlib import Path; from netqual.results import load; load(Path"
    commands = {
        "load": [sys.executable, "-c", f"{load_only}({str(rfile)!r}))"],
        "report": [*netqual, "report", str(rfile)],
        "report --html": [*netqual, "report", str(rfile), "--html", str(out / "report.html")],
        "gate": [*netqual, "gate", str(rfile)],
        "diff": [*netqual, "diff", str(rfile), str(rfile), "--json"],
    }
    print(f"{'command':>14} {'wall_s':>7} {'cpu_s':>7} {'peak_rss_MiB':>13} {'exit':>5}")
    for label, cmd in commands.items():
        # getrusage(RUSAGE_CHILDREN) is the max over all children so far: run each command
        # from a fresh helper process so every row is that command alone.
        helper = [
            sys.executable, __file__, "--measure-one", json.dumps(cmd),
        ]  # fmt: skip
        row = subprocess.run(helper, capture_output=True, text=True, check=False)
        wall, rss, rc, cpu = json.loads(row.stdout)
        print(f"{label:>14} {wall:>7.1f} {cpu:>7.1f} {rss:>13.0f} {rc:>5}")
    html = out / "report.html"
    if html.exists():
        print(f"report.html: {html.stat().st_size / 1e6:.1f} MB")


def bench_ci95_cost(n: int, out: Path, repeats: int) -> None:
    """Size and load time of a file with every percentile's interval vs p99's alone."""
    out.mkdir(parents=True, exist_ok=True)
    files = {form: out / f"results-{n}-{form}.json" for form in ("legacy", "all")}
    for form, f in files.items():
        synthetic_results(f, n, ci95=form)
    load_only = "from pathlib import Path; from netqual.results import load; load(Path"
    walls: dict[str, list[float]] = {form: [] for form in files}
    rss: dict[str, float] = dict.fromkeys(files, 0.0)
    for _ in range(repeats):
        for form, f in files.items():  # alternated: a load spike hits both forms alike
            cmd = [sys.executable, "-c", f"{load_only}({str(f)!r}))"]
            helper = [sys.executable, __file__, "--measure-one", json.dumps(cmd)]
            row = subprocess.run(helper, capture_output=True, text=True, check=True)
            wall, peak, rc, _cpu = json.loads(row.stdout)
            assert rc == 0, f"load of {f} exited {rc}"
            walls[form].append(wall)
            rss[form] = max(rss[form], peak)
    print(f"{'ci95 form':>10} {'MB':>7} {'load_s (median)':>16} {'all loads':>24} {'rss_MiB':>8}")
    for form, f in files.items():
        runs = " ".join(f"{w:.1f}" for w in walls[form])
        med = statistics.median(walls[form])
        print(
            f"{form:>10} {f.stat().st_size / 1e6:>7.1f} {med:>16.2f} {runs:>24} {rss[form]:>8.0f}"
        )
    size = files["all"].stat().st_size / files["legacy"].stat().st_size
    load = statistics.median(walls["all"]) / statistics.median(walls["legacy"])
    peak = rss["all"] / rss["legacy"]
    print(f"ratio all/legacy: size {size:.2f}, load {load:.2f}, peak RSS {peak:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", default="1024,10000", help="comma-separated node counts")
    ap.add_argument("--sample-k", type=int, default=2, help="sampled mode: pairs per rack pair")
    ap.add_argument(
        "--results",
        type=int,
        metavar="N",
        help="also time report --html, gate and diff on a synthetic N-node results.json",
    )
    ap.add_argument("--out", type=Path, default=None, help="keep the files here")
    ap.add_argument(
        "--ci95-cost",
        type=int,
        metavar="N",
        help="size and load time of an N-node file with every percentile's interval vs p99's",
    )
    ap.add_argument("--repeats", type=int, default=3, help="--ci95-cost: loads per form")
    ap.add_argument("--measure-one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_one:
        print(json.dumps(_measure(json.loads(args.measure_one))))
        return 0
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bench_plan([int(x) for x in args.nodes.split(",")], args.sample_k)
    if args.results:
        bench_results(args.results, args.out or Path(tempfile.mkdtemp(prefix="netqual-scale-")))
    if args.ci95_cost:
        out = args.out or Path(tempfile.mkdtemp(prefix="netqual-ci95-"))
        bench_ci95_cost(args.ci95_cost, out, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
