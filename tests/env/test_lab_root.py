"""The real lab: namespaces, relay, agents. Needs root; skips with the reason otherwise."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from eventually import eventually

from netqual import lab
from netqual.lab import system
from netqual.lab.layout import build_plan, prefix_for

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

# Same rack over plain veth, cross-rack over two 250 us links, remote behind 1.5 ms more:
# wide margins so that a loaded 2-core CI machine still sorts the paths into three classes.
E2E_TOPOLOGY = """
[lab]
name = "e2e"
control = "spine"
[[router]]
name = "leaf1"
[[router]]
name = "leaf2"
[[router]]
name = "spine"
[[router]]
name = "wan"
[[host]]
name = "a1"
rack = "r1"
[[host]]
name = "a2"
rack = "r1"
[[host]]
name = "b1"
rack = "r2"
[[host]]
name = "s1"
rack = "remote"
role = "storage"
site = "remote"
[[link]]
a = "a1"
b = "leaf1"
[[link]]
a = "a2"
b = "leaf1"
[[link]]
a = "b1"
b = "leaf2"
[[link]]
a = "leaf1"
b = "spine"
delay_us = 250
[[link]]
a = "leaf2"
b = "spine"
delay_us = 250
[[link]]
a = "spine"
b = "wan"
delay_us = 1500
rate_mbit = 1000
[[link]]
a = "wan"
b = "s1"
"""

STORAGE = {"st1", "st2"}

POLICY = """
[policy]
metric = "p50"
safe_max_us = 400.0
unsafe_above_us = 2500.0
min_samples = 300
"""


def netqual(*args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netqual", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, check=False)


def leftovers(state_dir: Path, pids: list[int]) -> list[str]:
    prefix = prefix_for(state_dir)
    found = [f"netns {n}" for n in system.netns_list() if n.startswith(f"{prefix}-")]
    found += [f"pid {p}" for p in pids if system.alive(p, None)]
    if state_dir.exists():
        found += [f"file {p}" for p in state_dir.iterdir()]
    return found


def recorded_pids(state_dir: Path) -> list[int]:
    raw = json.loads((state_dir / "state.json").read_text())
    return [int(p["pid"]) for p in raw["processes"]]


def test_up_status_down_leaves_nothing(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    state_dir = tmp_path / "lab"
    topo = tmp_path / "e2e.toml"
    topo.write_text(E2E_TOPOLOGY)
    info = lab.up(lab.load(topo), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    pids = recorded_pids(state_dir)
    assert len(pids) == 5  # relay + 4 agents
    assert info.expected_hops("a1", "s1") == 4  # leaf1, spine, wan
    s1 = next(n for n in info.nodes if n.name == "s1")
    assert s1.address
    with lab.inside(info.control_netns):  # the control namespace reaches every agent
        socket.create_connection((s1.address, 18515), timeout=5).close()
    st = netqual("lab", "status", "--state-dir", str(state_dir))
    assert st.returncode == 0, st.stdout + st.stderr
    assert "up" in st.stdout and "agent:s1" in st.stdout
    assert "relay: " in st.stdout and "dropped" in st.stdout
    again = netqual("lab", "up", "--state-dir", str(state_dir))
    assert again.returncode == 3 and "already up" in again.stderr
    report = lab.down(state_dir)
    assert len(report.namespaces) == 9  # 4 hosts, 4 routers, control
    assert leftovers(state_dir, pids) == []
    assert lab.down(state_dir).nothing  # idempotent


def test_running_enters_the_control_namespace_and_cleans_up(tmp_path: Path) -> None:
    state_dir = tmp_path / "lab"
    topo = tmp_path / "e2e.toml"
    topo.write_text(E2E_TOPOLOGY)
    home = os.readlink("/proc/thread-self/ns/net")
    with lab.running(lab.load(topo), state_dir) as info:
        assert os.readlink("/proc/thread-self/ns/net") != home
        pids = recorded_pids(state_dir)
        a2 = next(n for n in info.nodes if n.name == "a2")
        socket.create_connection((str(a2.address), 18515), timeout=5).close()
    assert os.readlink("/proc/thread-self/ns/net") == home
    assert leftovers(state_dir, pids) == []


def test_down_cleans_up_after_sigkill_of_up(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    state_dir = tmp_path / "lab"
    request.addfinalizer(lambda: lab.down(state_dir))
    env = {**os.environ}
    proc = subprocess.Popen(
        [sys.executable, "-m", "netqual", "lab", "up", "--state-dir", str(state_dir)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = state_dir / "state.json"
    # kill it once the relay and some agents exist: the worst moment, half built
    try:
        eventually(
            lambda: (
                state.exists()
                and len(json.loads(state.read_text() or "{}").get("processes", [])) >= 3
            ),
            within_s=60,
            every_s=0.01,
            unless=lambda: proc.poll() is not None,
            what="lab up records three processes",
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    pids = recorded_pids(state_dir)
    assert len(pids) >= 3
    down = netqual("lab", "down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert "removed 14 namespaces" in down.stdout
    assert leftovers(state_dir, pids) == []


@pytest.mark.slow
def test_end_to_end_verdicts_and_hops_match_the_topology(tmp_path: Path) -> None:
    state_dir = tmp_path / "lab"
    topo = tmp_path / "e2e.toml"
    topo.write_text(E2E_TOPOLOGY)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    up = netqual("lab", "up", "--topology", str(topo), "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    ctl = f"{prefix_for(state_dir)}-ctl"
    assert f"ip netns exec {ctl} netqual run" in up.stdout
    try:
        out = tmp_path / "out"
        run = netqual(
            "run",
            str(state_dir / "inventory.toml"),
            "--out",
            str(out),
            "--iterations",
            "600",
            "--warmup",
            "100",
            "--no-bulk",
            "--parallel",
            "1",
            "--policy",
            str(policy),
            # the paths' own measurements are judged: re-measuring all six alone (s1's at a
            # 3 ms round trip) would add a third to the test and is asserted nowhere
            "--interference-sample",
            "0",
            netns=ctl,
        )
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        results = json.loads((out / "results.json").read_text())
    finally:
        down = netqual("lab", "down", "--state-dir", str(state_dir))
    assert down.returncode == 0
    assert leftovers(state_dir, []) == []
    got = {frozenset((p["src"], p["dst"])): (p["hops"], p["verdict"]) for p in results["paths"]}
    expected = {
        frozenset(("a1", "a2")): (2, "offload-safe"),
        frozenset(("a1", "b1")): (4, "marginal"),
        frozenset(("a2", "b1")): (4, "marginal"),
        frozenset(("a1", "s1")): (4, "unsafe"),
        frozenset(("a2", "s1")): (4, "unsafe"),
        frozenset(("b1", "s1")): (4, "unsafe"),
    }
    assert got == expected


@pytest.mark.slow
def test_default_topology_hop_counts_through_real_ttl(tmp_path: Path) -> None:
    state_dir = tmp_path / "lab"
    up = netqual("lab", "up", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    ctl = f"{prefix_for(state_dir)}-ctl"
    plan = build_plan(lab.load_default(), "unused")
    expected = {frozenset((a, b)): h for a, b, h in plan.hops}
    try:
        out = tmp_path / "out"
        run = netqual(
            "run", str(state_dir / "inventory.toml"), "--out", str(out), "--iterations", "200",
            "--warmup", "20", "--no-bulk", "--allow-short-plan",
            "--interference-sample", "0",  # hops are the subject, not interference
            netns=ctl,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        results = json.loads((out / "results.json").read_text())
    finally:
        down = netqual("lab", "down", "--state-dir", str(state_dir))
    assert down.returncode == 0 and "removed 14 namespaces" in down.stdout
    assert leftovers(state_dir, []) == []
    paths = results["paths"]
    assert len(paths) == 28
    for p in paths:
        assert p["hops"] == expected[frozenset((p["src"], p["dst"]))], p
        if (p["src"] in STORAGE) != (p["dst"] in STORAGE):
            assert p["verdict"] == "unsafe", p  # the p50 alone is ~950 us > 500 us
    assert sorted({p["hops"] for p in paths}) == [2, 4, 5]
