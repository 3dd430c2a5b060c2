#!/usr/bin/env python3
"""Does the fan-in knee land where link capacity / per-reader demand says? (root;
docs/fanin.md "Lab proof")

Lab: one switch; two storage hosts, ``st1`` behind a link shaped to ``--storage-mbit``
(kernel tbf) and ``st2`` behind a plain veth; eight compute hosts, each in its own rack
(no shared rack uplink) behind a link shaped to ``--reader-mbit``: that is each reader's
demand D, the rate one reader pulls chunks at when nothing else limits it. Then
``netqual run --mode bipartite --fanin LEVELS`` as a user runs it (a subprocess in the
lab's control namespace).

Prediction: k readers want k*D; a storage link of capacity C serves each C/k, so a
chunk takes max(1, k*D/C) times as long as alone, and the knee (p99 above
fanin_knee_factor x level 1's) is the first level with k*D/C > factor. 1,000 / 333 Mbit/s
and factor 2: k > 6, so with levels 1,2,4,8 the knee is 8 (k*D/C: 0.33, 0.67, 1.33,
2.67). st2 has no storage bottleneck: no knee up to 8.

    sudo PYTHONPATH=. bench/lab_fanin.py [--levels 1,2,4,8] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netqual import lab
from netqual.lab.topology import Topology, parse

ROOT = Path(__file__).resolve().parent.parent
STORAGE_MBIT = 1000.0
READER_MBIT = 333.0
READERS = 8
CHUNKS = 300  # per reader and level
KNEE_FACTOR = 2.0  # the policy's default fanin_knee_factor
RUN_ARGS = [
    "--mode", "bipartite", "--iterations", "200", "--warmup", "20", "--no-bulk",
    "--allow-short-plan", "--interference-sample", "0", "--fanin-chunk", "256KiB",
    "--progress", "none",
]  # fmt: skip


def topology(storage_mbit: float, reader_mbit: float, readers: int) -> Topology:
    hosts: list[dict[str, object]] = [
        {"name": "st1", "rack": "s1", "role": "storage"},
        {"name": "st2", "rack": "s2", "role": "storage"},
    ]
    links: list[dict[str, object]] = [
        {"a": "st1", "b": "sw", "rate_mbit": storage_mbit},
        {"a": "st2", "b": "sw"},
    ]
    for i in range(1, readers + 1):
        hosts.append({"name": f"c{i}", "rack": f"r{i}", "role": "compute"})
        # A queue that holds a whole chunk: the reader's link shapes its demand without
        # dropping the burst an unshaped storage node sends (drops would mean RTOs there).
        links.append({"a": f"c{i}", "b": "sw", "rate_mbit": reader_mbit, "queue_us": 20_000})
    raw = {"lab": {"name": "fanin", "control": "sw"}, "router": [{"name": "sw"}]}
    return parse({**raw, "host": hosts, "link": links}, "fanin-bench")


def predicted_knee(levels: list[int], storage_mbit: float, reader_mbit: float) -> int | None:
    """The first level whose chunk time the link stretches by more than the factor."""
    return next((k for k in levels if k * reader_mbit / storage_mbit > KNEE_FACTOR), None)


def experiment(
    levels: str = "1,2,4,8",
    storage_mbit: float = STORAGE_MBIT,
    reader_mbit: float = READER_MBIT,
    state_dir: Path | None = None,
    chunks: int = CHUNKS,
) -> tuple[dict[str, Any], str, str]:
    """The results document, the terminal output and report.html of one sweep."""
    with tempfile.TemporaryDirectory(prefix="nq-fanin-") as tmp:
        state = state_dir or Path(tmp) / "lab"
        with lab.running(topology(storage_mbit, reader_mbit, READERS), state) as info:
            out = Path(tmp) / "run"
            env = {**os.environ, "PYTHONPATH": str(ROOT), "NETQUAL_WIDTH": "100"}
            cmd = [sys.executable, "-m", "netqual", "run", str(info.inventory_path)]
            cmd += ["--out", str(out), "--fanin", levels, "--fanin-chunks", str(chunks), *RUN_ARGS]
            r = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=300, check=False
            )
            if r.returncode != 0:
                raise RuntimeError(f"netqual run exit {r.returncode}: {r.stdout}{r.stderr}")
            doc = json.loads((out / "results.json").read_text())
            return doc, r.stdout, (out / "report.html").read_text()


def storage_sent_mb(level: dict[str, Any]) -> float:
    """MB the storage node's busiest interface sent over the level (its agent's own
    counter window, ``storage_counters``); 0 without one."""
    ifs = (level.get("storage_counters") or {}).get("interfaces") or {}
    return max((c.get("tx_bytes", 0) for c in ifs.values()), default=0) / 1e6


def summary(doc: dict[str, Any]) -> list[str]:
    lines = []
    for st in doc["fanin"]:
        base = st["levels"][0]["chunk_us"]["p99"]
        for lv in st["levels"]:
            c = lv["chunk_us"]
            lines.append(
                f"{st['storage']} k={lv['readers']}: chunk p50 {c['p50']:.0f} us p99 "
                f"{c['p99']:.0f} us (x{c['p99'] / base:.2f}) n={c['samples']}  "
                f"{lv['goodput_gbps_per_reader']:.3f} Gb/s per reader, "
                f"{lv['aggregate_gbps']:.3f} aggregate, storage retransmitted "
                f"{lv.get('storage_tcp_retrans')}, its NIC sent {storage_sent_mb(lv):.1f} MB"
            )
        lines.append(f"{st['storage']}: knee {st['knee']}  {st['verdict']}")
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--levels", default="1,2,4,8")
    ap.add_argument("--storage-mbit", type=float, default=STORAGE_MBIT)
    ap.add_argument("--reader-mbit", type=float, default=READER_MBIT)
    ap.add_argument("--chunks", type=int, default=CHUNKS, help="per reader and level")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if (reason := lab.lab_available()) is not None:
        print(f"lab_fanin: {reason}", file=sys.stderr)
        return 2
    doc, _, _ = experiment(args.levels, args.storage_mbit, args.reader_mbit, chunks=args.chunks)
    levels = [int(x) for x in args.levels.split(",")]
    predicted = predicted_knee(levels, args.storage_mbit, args.reader_mbit)
    if args.json:
        print(json.dumps({"fanin": doc["fanin"], "predicted_knee": predicted}, indent=1))
        return 0
    print("\n".join(summary(doc)))
    print(f"predicted knee (st1): {predicted}; st2: none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
