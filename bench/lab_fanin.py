#!/usr/bin/env python3
"""Does the fan-in sweep measure what the link carries, and does the same shaped storage
port give the same answer sweep after sweep? (root; docs/fanin.md "Lab proof")

Lab: a spine ``sw``, two leaf routers each with a rack of compute hosts (``r1``: c1, c2;
``r2``: c3, c4), and two storage hosts on the spine: ``st1`` behind a link shaped to
``--storage-mbit`` (kernel tbf, its queue holds every reader's chunk: no drop from the
fan-in's own bursts) and ``st2`` behind a plain veth. Each compute host's link is shaped to
``--reader-mbit``: each reader's demand D. Readers go one rack after another (c1, c3, c2,
c4), so from 3 readers on, the two racks' uplinks to the spine are shared, for ``st1`` and
``st2`` alike.

1. iperf3 on the same links, for ``st1`` at every level (and ``st2`` at the top one): k
   iperf3 clients (the level's readers) each receiving from their own server on the
   storage host at once (``-R``), the sum of what they received. This is what the links
   carry at that fan-in.
2. ``netqual run --mode bipartite --fanin LEVELS`` as a user runs it, ``--sweeps`` times on
   the same lab: per level the aggregate (the level's bytes over the time any rank read)
   against iperf3's, and every sweep's "safe up to".

Prediction: k readers want k x D; a link of capacity C gives each C / k, so a chunk takes
max(1, k x D / C) as long as alone. The defaults (C 800, D 480 Mbit/s; levels 1, 2, 4) put
k x D / C at 0.6, 1.2 and 2.4: 2 readers just fill the link (chunk p99 about 1.2-1.5x one
reader's, surely within the knee factor 2), 4 readers want 2.4x it (the knee). ``st2`` has no
storage bottleneck: no knee, which also clears the rack uplinks the readers share at 4.

    sudo PYTHONPATH=. bench/lab_fanin.py [--sweeps 3] [--chunks 300] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netqual import lab
from netqual.lab.fabric import LabInfo
from netqual.lab.topology import Topology, parse

ROOT = Path(__file__).resolve().parent.parent
STORAGE_MBIT = 800.0
READER_MBIT = 480.0
RACKS = 2
READERS = 4
LEVELS = "1,2,4"
CHUNKS = 500  # per reader and level
CHUNK = "256KiB"
KNEE_FACTOR = 2.0  # the policy's default fanin_knee_factor
IPERF_S = 2
WINDOW = "512K"  # iperf3 -w: the kernel allows twice this in flight, under 1.2 MB queues
RUN_ARGS = [
    "--mode", "bipartite", "--iterations", "100", "--warmup", "10", "--no-bulk",
    "--allow-short-plan", "--interference-sample", "0", "--fanin-chunk", CHUNK,
    "--progress", "none",
]  # fmt: skip


def topology(storage_mbit: float, reader_mbit: float, readers: int = READERS) -> Topology:
    hosts: list[dict[str, object]] = [
        {"name": "st1", "rack": "s1", "role": "storage"},
        {"name": "st2", "rack": "s2", "role": "storage"},
    ]
    # st1's queue holds every reader's chunk at once (4 x 256 KiB at 800 Mbit/s: 10.5 ms):
    # the fan-in's bursts queue there as at a switch port with that buffer, never drop
    links: list[dict[str, object]] = [
        {"a": "st1", "b": "sw", "rate_mbit": storage_mbit, "queue_us": 30_000},
        {"a": "st2", "b": "sw"},
    ]
    routers = [{"name": "sw"}]
    per_rack = -(-readers // RACKS)
    for r in range(1, RACKS + 1):
        routers.append({"name": f"leaf{r}"})
        links.append({"a": f"leaf{r}", "b": "sw"})
    for i in range(1, readers + 1):
        rack = 1 + (i - 1) // per_rack
        hosts.append({"name": f"c{i}", "rack": f"r{rack}", "role": "compute"})
        # A queue that holds a whole chunk: the reader's link shapes its demand without
        # dropping the burst an unshaped storage node sends (drops would mean RTOs there).
        links.append(
            {"a": f"c{i}", "b": f"leaf{rack}", "rate_mbit": reader_mbit, "queue_us": 20_000}
        )
    raw = {"lab": {"name": "fanin", "control": "sw"}, "router": routers}
    return parse({**raw, "host": hosts, "link": links}, "fanin-bench")


def readers_at(k: int, readers: int = READERS) -> list[str]:
    """The level's readers as ``run --fanin`` takes them: one rack after another."""
    per_rack = -(-readers // RACKS)
    racks = [[f"c{i}" for i in range(1, readers + 1) if 1 + (i - 1) // per_rack == r]
             for r in range(1, RACKS + 1)]  # fmt: skip
    order = [rack[j] for j in range(per_rack) for rack in racks if j < len(rack)]
    return order[:k]


def predicted_knee(levels: list[int], storage_mbit: float, reader_mbit: float) -> int | None:
    """The first level whose chunk time the link stretches by more than the factor."""
    return next((k for k in levels if k * reader_mbit / storage_mbit > KNEE_FACTOR), None)


@contextlib.contextmanager
def _servers(netns: str, ports: list[int]) -> Iterator[None]:
    procs = [
        subprocess.Popen(
            ["ip", "netns", "exec", netns, "iperf3", "-s", "-1", "-p", str(p)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in ports
    ]
    try:
        time.sleep(0.3)  # listening
        yield
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
            p.wait(timeout=10)


def iperf3_gbps(info: LabInfo, storage: str, readers: list[str], seconds: int) -> float:
    """What ``readers`` receive from ``storage`` at once, one iperf3 stream each (the
    storage host sends: ``-R``), summed, Gbit/s. The first second (slow start, the
    queues filling) is left out (``-O 1``): 2 streams for 2 s without it read 0.67-0.80
    Gbit/s of the 800 Mbit/s port. Each stream's window is capped (``-w``) below a reader
    link's queue: an unshaped sender's slow start otherwise overran it, and one stream's
    loss recovery read 0.23 Gbit/s of a 480 Mbit/s link (netqual's readers, one chunk in
    flight, never overrun it)."""
    by = {n.name: n for n in info.nodes}
    address = by[storage].address
    assert address is not None
    ports = [5201 + i for i in range(len(readers))]
    with _servers(by[storage].netns, ports):
        args = ["-R", "-O", "1", "-t", str(seconds), "-w", WINDOW, "-J"]
        clients = [
            subprocess.Popen(
                ["ip", "netns", "exec", by[r].netns, "iperf3", "-c", address, "-p", str(p), *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for r, p in zip(readers, ports, strict=True)
        ]
        total = 0.0
        for c in clients:
            out, err = c.communicate(timeout=seconds + 31)
            doc = json.loads(out)
            if "error" in doc:
                raise RuntimeError(f"iperf3: {doc['error']} {err}")
            total += doc["end"]["sum_received"]["bits_per_second"]
    return total / 1e9


IPERF_TRIES = 3


def best_iperf3(
    info: LabInfo, storage: str, readers: list[str], seconds: int, shaped_gbps: float
) -> float:
    """iperf3's best of up to IPERF_TRIES, stopping once it reads within 10% of what the
    shaping lets through. iperf3 can only undershoot the shaping, and does when its 2k
    processes are starved of CPU: under CI's lanes at load 12-18, 4 streams from the
    unshaped st2 read 1.23 Gbit/s of the readers' 4 x 0.48; the reference is the link's
    capacity as iperf3 can show it, not one starved sample of it."""
    best = 0.0
    for _ in range(IPERF_TRIES):
        best = max(best, iperf3_gbps(info, storage, readers, seconds))
        if best >= 0.9 * shaped_gbps:
            break
    return best


@dataclass(frozen=True)
class Experiment:
    docs: list[dict[str, Any]]  # each sweep's results.json
    # storage -> readers -> Gbit/s: st1 (the shaped port) at every level, st2 at the top
    iperf3: dict[str, dict[int, float]]
    stdout: str  # the last sweep's terminal output
    html: str  # the last sweep's report.html
    seconds: float


def sweep(info: LabInfo, out: Path, levels: str, chunks: int) -> tuple[dict[str, Any], str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NETQUAL_WIDTH": "100"}
    cmd = [sys.executable, "-m", "netqual", "run", str(info.inventory_path), "--out", str(out)]
    cmd += ["--fanin", levels, "--fanin-chunks", str(chunks), *RUN_ARGS]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"netqual run exit {r.returncode}: {r.stdout}{r.stderr}")
    doc = json.loads((out / "results.json").read_text())
    return doc, r.stdout, (out / "report.html").read_text()


def experiment(
    levels: str = LEVELS,
    storage_mbit: float = STORAGE_MBIT,
    reader_mbit: float = READER_MBIT,
    state_dir: Path | None = None,
    chunks: int = CHUNKS,
    sweeps: int = 3,
    iperf_s: int = IPERF_S,
) -> Experiment:
    """iperf3 per storage node and level, then ``sweeps`` sweeps, on one lab."""
    started = time.monotonic()
    ks = [int(k) for k in levels.split(",")]
    with tempfile.TemporaryDirectory(prefix="nq-fanin-") as tmp:
        state = state_dir or Path(tmp) / "lab"
        with lab.running(topology(storage_mbit, reader_mbit), state) as info:
            shaped = {k: ceiling_gbps("st1", k, storage_mbit, reader_mbit) for k in ks}
            iperf = {
                "st1": {k: best_iperf3(info, "st1", readers_at(k), iperf_s, shaped[k]) for k in ks},
                "st2": {
                    ks[-1]: best_iperf3(
                        info,
                        "st2",
                        readers_at(ks[-1]),
                        iperf_s,
                        ceiling_gbps("st2", ks[-1], storage_mbit, reader_mbit),
                    )
                },
            }
            runs = [sweep(info, Path(tmp) / f"run{i}", levels, chunks) for i in range(sweeps)]
    return Experiment(
        [d for d, _, _ in runs], iperf, runs[-1][1], runs[-1][2], time.monotonic() - started
    )


def storage_sent_mb(level: dict[str, Any]) -> float:
    """MB the storage node's busiest interface sent over the level (its agent's own
    counter window, ``storage_counters``); 0 without one."""
    ifs = (level.get("storage_counters") or {}).get("interfaces") or {}
    return max((c.get("tx_bytes", 0) for c in ifs.values()), default=0) / 1e6


def ceiling_gbps(
    storage: str, readers: int, storage_mbit: float = STORAGE_MBIT, reader_mbit: float = READER_MBIT
) -> float:
    """What the shaping lets ``readers`` read from ``storage`` at most: their own links,
    and st1's port."""
    top = readers * reader_mbit
    return (min(top, storage_mbit) if storage == "st1" else top) / 1e3


def ratios(doc: dict[str, Any], iperf: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
    """Per storage node and level: netqual's aggregate over iperf3's."""
    return {
        st["storage"]: {
            lv["readers"]: lv["aggregate_gbps"] / iperf[st["storage"]][lv["readers"]]
            for lv in st["levels"]
            if lv["readers"] in iperf[st["storage"]]
        }
        for st in doc["fanin"]
    }


def _or(by: dict[int, float], k: int) -> str:
    return f"{by[k]:.3f}" if k in by else "-"


def summary(exp: Experiment) -> list[str]:
    lines = []
    for i, doc in enumerate(exp.docs, 1):
        r = ratios(doc, exp.iperf3)
        for st in doc["fanin"]:
            base = st["levels"][0]["chunk_us"]["p99"]
            for lv in st["levels"]:
                c = lv["chunk_us"]
                lo, hi = c.get("p99_ci", [None, None])
                lines.append(
                    f"sweep {i} {st['storage']} k={lv['readers']}: chunk p50 {c['p50']:.0f} us "
                    f"p99 {c['p99']:.0f} us (CI {lo:.0f}-{hi:.0f}, x{c['p99'] / base:.2f}, "
                    f"{lv['call']}) n={c['samples']} ({lv['rounds']} round(s))  "
                    f"aggregate {lv['aggregate_gbps']:.3f} "
                    f"Gbit/s, iperf3 {_or(exp.iperf3[st['storage']], lv['readers'])} "
                    f"(x{_or(r[st['storage']], lv['readers'])}), per reader "
                    f"{lv['goodput_gbps_per_reader']:.3f}, {lv['readers_busy']:.2f} at once, "
                    f"busy {lv['busy_s']:.2f} s, retransmitted {lv.get('storage_tcp_retrans')}"
                )
            lines.append(f"sweep {i} {st['storage']}: {st['verdict']}")
    safe = [{st["storage"]: st["safe_up_to"] for st in d["fanin"]} for d in exp.docs]
    lines.append(f"safe up to, per sweep: {safe}  ({exp.seconds:.0f} s in all)")
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--levels", default=LEVELS)
    ap.add_argument("--storage-mbit", type=float, default=STORAGE_MBIT)
    ap.add_argument("--reader-mbit", type=float, default=READER_MBIT)
    ap.add_argument("--chunks", type=int, default=CHUNKS, help="per reader and level")
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--iperf-s", type=int, default=IPERF_S)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", action="store_true", help="print the last sweep's terminal output")
    args = ap.parse_args(argv)
    if (reason := lab.lab_available()) is not None:
        print(f"lab_fanin: {reason}", file=sys.stderr)
        return 2
    exp = experiment(
        args.levels, args.storage_mbit, args.reader_mbit, chunks=args.chunks,
        sweeps=args.sweeps, iperf_s=args.iperf_s,
    )  # fmt: skip
    levels = [int(x) for x in args.levels.split(",")]
    predicted = predicted_knee(levels, args.storage_mbit, args.reader_mbit)
    if args.json:
        print(json.dumps({"fanin": [d["fanin"] for d in exp.docs], "iperf3": exp.iperf3,
                          "predicted_knee": predicted}, indent=1))  # fmt: skip
        return 0
    if args.show:
        print(exp.stdout)
    print("\n".join(summary(exp)))
    print(f"predicted knee (st1): {predicted}; st2: none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
