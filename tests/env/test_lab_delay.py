"""The lab delivers the delays its topology injects (root; real relay, agents, sockperf).

Every path's p50 round trip must be at least 0.9 x the injected round trip (the sum of
the one-way delays along the lab's routes, both ways) and at most the zero-delay path of
the same lab + 1.15 x injected, read by netqual's own probe and by sockperf alike.

The machines these run on are shared, and other tenants' load only ever adds time: one
round of measurements, and only when a path is out of bounds up to four more. The lower
bound is judged on the median of the rounds (a relay that delivers too little does so in
every round), the upper bound on the least disturbed round (a relay that adds too much
does so in every round too; a round that another process stalled says nothing about it).
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from netqual import lab
from netqual.lab.fabric import AGENT_PREFIX

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.slow,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

MORE_ROUNDS = 4
SOCKPERF_PORT = 11111
# On an idle host each trip through the user-space relay costs a wake-up beyond the
# injected delay: sockperf measured 40-110 us over base + 1.15 x injected on a 200 us path,
# in every round of a run, at load 0.1 (it passes under load). The upper bound still fails
# a delay injected twice on every path here (the smallest, 180 us, plus its 15%, exceeds it).
IDLE_WAKE_US = 120.0

# s and z behind r0; r0 ==100us== r1 ==100us== r2 ==100us== r3; h<k> on r<k>
CHAIN = """
[lab]
name = "chain"
control = "r0"
[[router]]
name = "r0"
[[router]]
name = "r1"
[[router]]
name = "r2"
[[router]]
name = "r3"
[[host]]
name = "s"
rack = "r0"
[[host]]
name = "z"
rack = "r0"
[[host]]
name = "h1"
rack = "r1"
[[host]]
name = "h2"
rack = "r2"
[[host]]
name = "h3"
rack = "r3"
[[link]]
a = "s"
b = "r0"
[[link]]
a = "z"
b = "r0"
[[link]]
a = "r0"
b = "r1"
delay_us = 100
[[link]]
a = "r1"
b = "r2"
delay_us = 100
[[link]]
a = "r2"
b = "r3"
delay_us = 100
[[link]]
a = "h1"
b = "r1"
[[link]]
a = "h2"
b = "r2"
[[link]]
a = "h3"
b = "r3"
"""


def netqual_p50(info: lab.LabInfo, a: lab.LabNode, b: lab.LabNode) -> float:
    out = subprocess.run(
        ["ip", "netns", "exec", info.control_netns, sys.executable, "-m", "netqual", "probe",
         f"{a.address}:18515", f"{b.address}:18515", "--token-file", str(info.token_file),
         "--iterations", "1000", "--warmup", "100", "--no-bulk", "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-1000:] + out.stderr[-1000:]
    return float(json.loads(out.stdout)["rtt_us"]["p50"])


def sockperf_p50(info: lab.LabInfo, a: lab.LabNode, b: lab.LabNode) -> float:
    server = subprocess.Popen(
        ["ip", "netns", "exec", b.netns, *AGENT_PREFIX, "sockperf", "server", "--tcp",
         "-i", str(b.address), "-p", str(SOCKPERF_PORT)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out = None
        for _ in range(20):  # until the server listens (a refused client exits at once)
            out = subprocess.run(
                ["ip", "netns", "exec", a.netns, *AGENT_PREFIX, "sockperf", "ping-pong",
                 "--tcp", "--full-rtt", "-i", str(b.address), "-p", str(SOCKPERF_PORT),
                 "-t", "1"],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            if "percentile 50.000" in out.stdout + out.stderr:
                break
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert out is not None
    m = re.search(r"percentile 50\.000 =\s*([\d.]+)", out.stdout + out.stderr)
    assert m, out.stdout[-1000:] + out.stderr[-1000:]
    return float(m.group(1))


TOOLS: dict[str, Callable[[lab.LabInfo, lab.LabNode, lab.LabNode], float]] = {
    "netqual": netqual_p50,
}
if shutil.which("sockperf"):
    TOOLS["sockperf"] = sockperf_p50


def check_paths(info: lab.LabInfo, pairs: list[tuple[str, str]]) -> list[str]:
    """Paths outside their bounds, with numbers; the first pair has no delay and is the
    baseline."""
    assert info.injected_rtt_us(*pairs[0]) == 0
    nodes = {n.name: n for n in info.nodes}
    samples: dict[tuple[str, int], list[float]] = {}

    def one_round() -> None:
        for k, (a, b) in enumerate(pairs):
            for tool, measure in TOOLS.items():
                samples.setdefault((tool, k), []).append(measure(info, nodes[a], nodes[b]))

    one_round()
    for _ in range(MORE_ROUNDS):
        if not out_of_bounds(info, pairs, samples):
            break
        one_round()
    return out_of_bounds(info, pairs, samples)


def out_of_bounds(
    info: lab.LabInfo, pairs: list[tuple[str, str]], samples: dict[tuple[str, int], list[float]]
) -> list[str]:
    wrong = []
    for tool in TOOLS:
        base = min(samples[(tool, 0)])
        for k, (a, b) in enumerate(pairs[1:], start=1):
            rtt = info.injected_rtt_us(a, b)
            rounds = samples[(tool, k)]
            ceiling = base + 1.15 * rtt + IDLE_WAKE_US
            if statistics.median(rounds) < 0.9 * rtt or min(rounds) > ceiling:
                wrong.append(
                    f"{tool} {a}-{b}: p50 per round {rounds} us, injected {rtt:.0f} us, "
                    f"zero-delay path {base:.0f} us"
                )
    return wrong


@pytest.fixture
def running_lab(tmp_path: Path) -> Iterator[Callable[[lab.Topology], lab.LabInfo]]:
    state_dir = tmp_path / "lab"

    def start(topology: lab.Topology) -> lab.LabInfo:
        return lab.up(topology, state_dir)

    try:
        yield start
    finally:
        lab.down(state_dir)


def test_delays_add_up_across_one_two_and_three_delayed_links(
    tmp_path: Path, running_lab: Callable[[lab.Topology], lab.LabInfo]
) -> None:
    topo = tmp_path / "chain.toml"
    topo.write_text(CHAIN)
    info = running_lab(lab.load(topo))
    assert [info.injected_rtt_us("s", h) for h in ("z", "h1", "h2", "h3")] == [0, 200, 400, 600]
    assert check_paths(info, [("s", "z"), ("s", "h1"), ("s", "h2"), ("s", "h3")]) == []


def test_default_lab_delivers_its_cross_rack_and_remote_round_trips(
    running_lab: Callable[[lab.Topology], lab.LabInfo],
) -> None:
    info = running_lab(lab.load_default())
    assert info.injected_rtt_us("r1h1", "r2h1") == 180  # two 45 us leaf-spine links each way
    assert info.injected_rtt_us("r1h1", "st1") == 890  # leaf-spine 45 + WAN 400 each way
    assert check_paths(info, [("r1h1", "r1h2"), ("r1h1", "r2h1"), ("r1h1", "st1")]) == []
