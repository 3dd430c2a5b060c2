"""The fleet configuration check in the real lab (network namespaces; needs root): one
host's MTU lowered to 1400, and ``check --fleet``, the run's terminal output, results and
report, and ``gate`` with ``fleet_consistent`` all name that host, the key and the
majority value with the hosts that have it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netqual import lab
from netqual.lab import system
from netqual.lab.layout import prefix_for

REASON = lab.lab_available()
pytestmark = [pytest.mark.root, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

# Three compute hosts on one leaf, no delay: the smallest lab with a majority.
TOPOLOGY = """
[lab]
name = "fleet"
mtu = 9000
control = "leaf1"
[[router]]
name = "leaf1"
[[host]]
name = "h1"
rack = "r1"
[[host]]
name = "h2"
rack = "r1"
[[host]]
name = "h3"
rack = "r1"
[[link]]
a = "h1"
b = "leaf1"
[[link]]
a = "h2"
b = "leaf1"
[[link]]
a = "h3"
b = "leaf1"
"""

POLICY = """
[policy]
metric = "p99"
safe_max_us = 5000.0
unsafe_above_us = 50000.0
min_samples = 100
"""

PROFILE = """
[profile]
name = "fleet"
[limits]
fleet_consistent = true
"""


def netqual(*args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netqual", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_lowered_mtu_is_named_by_check_run_report_and_gate(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state_dir = tmp_path / "lab"
    topo = tmp_path / "fleet.toml"
    topo.write_text(TOPOLOGY)
    # ordinary agents: this lab judges configuration, not timing, and runs beside the
    # labs that do (.ci/run's env lane; real-time agents are those labs' alone)
    info = lab.up(lab.load(topo), state_dir, realtime_agents=False)
    request.addfinalizer(lambda: lab.down(state_dir))
    h3 = next(n for n in info.nodes if n.name == "h3")
    system.ip_batch(h3.netns, ["link set dev to-leaf1 mtu 1400"])
    ctl = f"{prefix_for(state_dir)}-ctl"
    inventory = str(info.inventory_path)

    check = netqual("check", inventory, "--fleet", netns=ctl)
    (tmp_path / "check.txt").write_text(check.stdout)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "outlier h3: mtu 1400 (majority 9000 on h1, h2)" in check.stdout
    assert "all 3 agents ready" in check.stdout  # the agents are fine; the fleet is not

    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    out = tmp_path / "run"
    run = netqual(
        "run", inventory, "--out", str(out), "--iterations", "200", "--warmup", "20",
        "--no-bulk", "--interference-sample", "0", "--policy", str(policy), netns=ctl,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "configuration: 1 outlier: h3: mtu 1400 (majority 9000 on h1, h2)" in run.stdout
    results = json.loads((out / "results.json").read_text())
    fleet = results["fleet"]
    assert set(fleet["snapshot"]) == {"h1", "h2", "h3"}
    assert fleet["snapshot"]["h3"]["nic.to-leaf1.mtu"] == "1400"
    assert fleet["snapshot"]["h1"]["mtu"] == "9000"
    mtu = [o for o in fleet["outliers"] if o["key"] == "mtu"]
    assert mtu == [
        {
            "node": "h3",
            "key": "mtu",
            "value": "1400",
            "role": "compute",
            "majority": "9000",
            "majority_nodes": ["h1", "h2"],
            "majority_count": 2,
            "compared": 3,
        }
    ]
    html = (out / "report.html").read_text()
    assert "Configuration outlier: h3: mtu 1400 (majority 9000 on h1, h2)" in html
    assert '<h2 id="configuration">Configuration</h2>' in html

    profile = tmp_path / "profile.toml"
    profile.write_text(PROFILE)
    gate = netqual("gate", str(out), "--profile", str(profile))
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "fleet_consistent" in gate.stdout
    assert "h3  mtu 1400 (majority 9000 on h1, h2)" in gate.stdout
