#!/usr/bin/env python3
"""Does localisation name healthy hosts on a noisy lab? (root; docs/report.md "Suspects")

The shipped star-faults lab (five hosts on two rails: h2's rail-1 NIC shaped to a fifth of
its twin, h3's rail-0 cable lossy, h4's main interface at MTU 1,400; h1 and h5 healthy),
``--relay-all`` puts every rail link through the relay (20 us each way), whose scheduling
noise then reaches every path. Each run is ``netqual run --rails same`` with one 64 KiB
bulk cell; its results are localised by this checkout (as stored) and, with ``--compare
DIR``, by another checkout's ``localise.suspects`` over the same paths (its suspects and
localisation dropped), so both rules judge identical measurements.

    sudo PYTHONPATH=. bench/lab_localise.py --runs 6 [--relay-all] [--unaligned] \
        [--compare /path/to/old]

Prints per run the hosts each rule names (subjects and evidence: a rail's bad NICs, a
link's ends), and per rule how many runs named h1 or h5, the shaped NIC, the lossy NIC.
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
from netqual.planning.rails import split_endpoint

HEALTHY = {"h1", "h5"}
SHAPED, LOSSY = "h2/to-rail1", "h3/to-rail0"
POLICY = (
    '[policy]\nmetric = "p99"\nsafe_max_us = 200.0\nunsafe_above_us = 500.0\nmin_samples = 1000\n'
)
# Another checkout's rule over a file: its suspects, as JSON
OTHER = """
import json, sys
from pathlib import Path
from netqual.results import load
from netqual.analysis import localise
from netqual.results.suspects_codec import suspect_to_dict
doc = json.loads(Path(sys.argv[1]).read_text())
doc.pop("suspects", None); doc.pop("localisation", None)
p = Path(sys.argv[2]); p.write_text(json.dumps(doc))
print(json.dumps([suspect_to_dict(s) for s in localise.suspects(load(p))]))
"""


def named(suspects: list[dict[str, Any]]) -> set[str]:
    """Every endpoint a suspect names (its subject, a rail's bad NICs, a link's ends)."""
    out: set[str] = set()
    for s in suspects:
        ev = s["evidence"]
        ends = [s["subject"]] if s["kind"] in ("node", "nic") else []
        ends += [ev[k] for k in ("src", "dst") if isinstance(ev.get(k), str)]
        ends += list(ev.get("bad_nics", []))
        if s["kind"] == "asymmetry":
            ends += [ev[d][k] for d in ("forward", "reverse") for k in ("src", "dst")]
        out |= set(ends)
    return out


def topology(relay_all: bool, work: Path) -> Path:
    src = Path(lab.default_topology_path()).parent / "star-faults.toml"
    if not relay_all:
        return src
    text = src.read_text().replace("rate_mbit = 1000", "rate_mbit = 1000\ndelay_us = 20")
    text = text.replace("rate_mbit = 200 ", "delay_us = 20\nrate_mbit = 200 ")
    text = text.replace("loss_percent = 1 ", "delay_us = 20\nloss_percent = 1 ")
    out = work / "star-relay.toml"
    out.write_text(text)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--relay-all", action="store_true")
    ap.add_argument(
        "--unaligned", action="store_true", help="--schedule unaligned: bulk beside ping-pong"
    )
    ap.add_argument("--compare", type=Path, help="another checkout: its localisation too")
    args = ap.parse_args()
    if (why := lab.lab_available()) is not None:
        print(why, file=sys.stderr)
        return 3
    work = Path(tempfile.mkdtemp(prefix="lab-localise-"))
    (work / "policy.toml").write_text(POLICY)
    info = lab.up(lab.load(topology(args.relay_all, work)), work / "lab")
    rules = ["this"] + (["other"] if args.compare else [])
    tally = {r: {"healthy": 0, "shaped": 0, "lossy": 0} for r in rules}
    try:
        for i in range(args.runs):
            out = work / f"run-{i}"
            done = subprocess.run(
                ["ip", "netns", "exec", info.control_netns, sys.executable, "-m", "netqual",
                 "run", str(info.inventory_path), "--rails", "same", "--out", str(out),
                 "--iterations", "1000", "--warmup", "100", "--chunk", "64KiB", "--depth", "1",
                 "--timeout", "60", "--policy", str(work / "policy.toml"),
                 *(["--schedule", "unaligned"] if args.unaligned else [])],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                print(f"run {i}: exit {done.returncode}: {done.stderr[-500:]}")
                continue
            doc = json.loads((out / "results.json").read_text())
            found = {"this": doc.get("suspects", [])}
            if args.compare:
                env = {"PYTHONPATH": str(args.compare), "PATH": os.environ.get("PATH", "")}
                got = subprocess.run(
                    [sys.executable, "-c", OTHER, str(out / "results.json"), str(work / "o.json")],
                    capture_output=True, text=True, env=env, cwd=work, check=True,
                )  # fmt: skip
                found["other"] = json.loads(got.stdout)
            load = os.getloadavg()[0]
            rep = doc["localisation"]["repeatability"]
            print(f"run {i}: load {load:.1f}, repeatability x{rep['ratio']:.2f} ({rep['source']})")
            for rule in rules:
                ends = named(found[rule])
                hosts = {split_endpoint(e)[0] for e in ends}
                tally[rule]["healthy"] += bool(hosts & HEALTHY)
                tally[rule]["shaped"] += SHAPED in ends
                tally[rule]["lossy"] += LOSSY in ends
                shown = [f"{s['kind']} {s['subject']}" for s in found[rule]]
                print(f"  {rule}: healthy named {sorted(hosts & HEALTHY)}; {shown}", flush=True)
    finally:
        lab.down(work / "lab")
    for rule in rules:
        t = tally[rule]
        print(f"{rule}: runs naming h1 or h5 {t['healthy']}/{args.runs}, the shaped NIC "
              f"{t['shaped']}/{args.runs}, the lossy NIC {t['lossy']}/{args.runs}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
