"""Rails in the real lab (network namespaces; needs root), as a new user runs it: the
shipped two-rails topology (four hosts, two rail planes, h3's rail-1 link delayed 300 us
one way), `netqual run --rails same` from the control namespace. h3's rail-1 paths must
come out worse than its rail-0 paths, a `nic` suspect must name h3/to-rail1, and every
other host's rails must be clean (docs/rails.md)."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from netqual import lab
from netqual.lab.layout import prefix_for
from netqual.results import load

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

TOPOLOGY = Path(lab.default_topology_path()).parent / "two-rails.toml"
# 2,000 kept samples per path, judged at 2,000 by their p90, safe up to 300 us: this test
# is about where a fault sits, and the delay (600 us of round trip, beyond the unsafe line)
# moves every sample of a path. A p99 is the 20th-slowest round trip: twenty stalls of the
# shared two-core machine move it (CI: one clean path's p99 past 300 us while the others
# read 44-80 us); the p90 needs two hundred.
# h3's delayed rail-1 link is a TUN device of the lab's relay (up, operstate unknown): the
# fleet check compares it like any interface a probe uses, and its driver differs from the
# veths by the lab's design, not by a fault this test is about (docs/lab.md).
POLICY = """[policy]
metric = "p90"
safe_max_us = 300.0
unsafe_above_us = 500.0
min_samples = 2000

[fleet]
allow_differ = ["driver"]
"""


def netqual(*args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netqual", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_delayed_rail_of_one_host_is_a_nic_suspect_and_the_rest_is_clean(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(TOPOLOGY), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    ctl = f"{prefix_for(state_dir)}-ctl"
    inventory = str(info.inventory_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)

    dry = netqual("run", inventory, "--dry-run", "--no-bulk")
    assert dry.returncode == 0, dry.stderr
    assert "rails same: probes NIC to NIC, rounds disjoint per NIC" in dry.stdout
    assert "  rail 1: 6 pairs; h1/to-rail1 198.18.201.10, h2/to-rail1 198.18.201.11" in dry.stdout

    out = tmp_path / "run"
    # --no-bulk: the paths are judged by their ping-pong; the 64 KiB cell is what
    # --multirail reads over one rail and then both (a run's bulk cell, 128 MiB a path over
    # all twelve, was a quarter of the test and asserted nowhere)
    run = netqual(
        "run", inventory, "--rails", "same", "--out", str(out), "--iterations", "2000",
        "--warmup", "200", "--no-bulk", "--chunk", "64KiB", "--depth", "1",
        "--interference-sample", "0",
        "--policy", str(policy), "--multirail", "1", netns=ctl,
    )  # fmt: skip
    (tmp_path / "run.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]

    res = json.loads((out / "results.json").read_text())
    paths = res["paths"]
    assert len(paths) == 12  # 6 host pairs x 2 rails
    for p in paths:  # every path between two NICs of one rail, both named
        assert p["src_nic"] == p["dst_nic"] == f"to-rail{p['rail']}", p
        assert p["src"].endswith("/" + p["src_nic"]) and p["dst"].endswith("/" + p["dst_nic"])
        assert p["error"] is None, p

    def p90(p: dict[str, object]) -> float:  # the judged metric
        rtt = p["rtt_us"]
        assert isinstance(rtt, dict)
        return float(rtt["p90"])

    def on(host: str, rail: int) -> list[dict[str, object]]:
        return [
            p
            for p in paths
            if p["rail"] == rail and host in (p["src"].split("/")[0], p["dst"].split("/")[0])
        ]

    h3_rail0 = [p90(p) for p in on("h3", 0)]
    h3_rail1 = [p90(p) for p in on("h3", 1)]
    # h3's rail-1 paths are worse than its rail-0 paths: every one of them, by the delay
    assert min(h3_rail1) > max(h3_rail0) + 400, (h3_rail0, h3_rail1)
    assert statistics.median(h3_rail1) > 600
    assert all(p["verdict"] == "unsafe" for p in on("h3", 1))
    clean = [p for p in paths if "h3" not in (p["src"].split("/")[0], p["dst"].split("/")[0])]
    assert len(clean) == 6 and all(p["verdict"] == "offload-safe" for p in clean), [
        (p["src"], p["dst"], p["verdict"], p90(p)) for p in clean
    ]
    assert all(p["verdict"] == "offload-safe" for p in on("h3", 0))

    suspects = res["suspects"]
    assert [(s["kind"], s["subject"]) for s in suspects] == [("nic", "h3/to-rail1")]
    ev = suspects[0]["evidence"]
    assert (ev["node"], ev["nic"], ev["rail"], ev["bad_paths"], ev["paths"]) == (
        "h3", "to-rail1", 1, 3, 3,
    )  # fmt: skip
    assert [(o["nic"], o["bad_paths"]) for o in ev["other_nics"]] == [("to-rail0", 0)]

    text = " ".join(run.stdout.split())
    assert "nic h3/to-rail1: 3 of 3 paths not offload-safe" in text
    assert "other rails of h3: to-rail0 (rail 0) 0 of 3 bad" in text
    # --multirail 1: h1 and h2 read over rail 0, then rails 0 and 1 at once
    (mr,) = res["multirail"]
    assert (mr["src"], mr["dst"], mr["rails"]) == ("h1", "h2", [0, 1])
    one, two = mr["levels"]
    assert (one["rails"], two["rails"]) == (1, 2) and one["error"] is None and two["error"] is None
    assert one["aggregate_gbps"] > 0 and all(g > 0 for g in two["per_rail_gbps"])
    assert two["aggregate_gbps"] == pytest.approx(sum(two["per_rail_gbps"]), abs=1e-5)
    assert two["gain_gbps"] == pytest.approx(
        two["aggregate_gbps"] - one["aggregate_gbps"], abs=1e-5
    )
    short = two["gain_gbps"] < mr["min_share"] * mr["line_gbps"]
    assert mr["short"] is short and mr["verdict"].startswith(
        "going from 1 to 2 rails adds" if short else "each added"
    )
    assert "multi-rail bandwidth (rails read at once)" in run.stdout
    back = load(out / "results.json").multirail  # read back as netqual report reads it
    assert back[0].levels[1].aggregate_gbps == pytest.approx(two["aggregate_gbps"], abs=1e-5)
    # netqual retest re-measures the three unsafe paths NIC to NIC, from the run's endpoints
    again = tmp_path / "retest"
    retest = netqual("retest", str(out), "--out", str(again), "--iterations", "2000", netns=ctl)
    assert retest.returncode == 0, retest.stdout[-2000:] + retest.stderr[-2000:]
    redone = json.loads((again / "results.json").read_text())["paths"]
    assert sorted((p["src"], p["dst"], p["rail"]) for p in redone) == [
        ("h1/to-rail1", "h3/to-rail1", 1),
        ("h2/to-rail1", "h3/to-rail1", 1),
        ("h3/to-rail1", "h4/to-rail1", 1),
    ]
    assert all(p["verdict"] == "unsafe" and p["error"] is None for p in redone)
    html = (out / "report.html").read_text()
    # "What to do" names the NIC once, by the decision's fix (its rail, what to check)
    text = " ".join(re.sub(r"<[^>]+>", " ", html.split("<body", 1)[1]).split())
    assert "h3/to-rail1 (RTT, 3 paths)" in text and 'id="rail-pick"' in html
    assert "Check h3/to-rail1&#39;s cable, transceiver and switch port on rail 1" in text
