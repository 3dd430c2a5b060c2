"""A run stopped while it reads node pairs over several rails at once (``--multirail``)
says so, and ``--resume`` reads them again: the shipped two-rails lab (network
namespaces, needs root; four hosts, one NIC on each of two rail planes), real agents, a
real SIGINT, as a user runs it from the control namespace.

The multirail levels were no phase of their own: an interrupt there was recorded as the
phase before it (bulk, fan-in), and progress showed the last pair's counts meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from eventually import eventually

from netqual import lab
from netqual.lab.layout import prefix_for

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

TOPOLOGY = Path(lab.default_topology_path()).parent / "two-rails.toml"
# The pairs are ping-pong only and short; each multirail level reads the 8 MiB cell at
# depth 8, 32 reads (256 MiB) per rail: six node pairs, twelve levels, eighteen probes through
# veths on a shared two-core host, seconds, so a signal sent within 20 ms of the phase's
# first line lands inside it.
PLAN = ["--iterations", "300", "--warmup", "10", "--no-bulk", "--chunk", "8MiB"]
PLAN += ["--depth", "8", "--allow-short-plan", "--interference-sample", "0"]
PLAN += ["--progress", "plain", "--rails", "same", "--multirail", "6"]
PAIRS = 12  # 6 host pairs x 2 rails


def _records(jsonl: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in jsonl.read_text().splitlines()]


def test_stopped_during_multirail_says_so_and_resume_reads_the_levels_again(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(TOPOLOGY), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    ctl = f"{prefix_for(state_dir)}-ctl"
    out = tmp_path / "run"
    cmd = ["ip", "netns", "exec", ctl, sys.executable, "-m", "netqual", "run"]
    cmd += [str(info.inventory_path), "--out", str(out), *PLAN]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    stdout, stderr = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with stdout.open("wb") as so, stderr.open("wb") as se:
        proc = subprocess.Popen(cmd, env=env, stdout=so, stderr=se)
        try:
            eventually(
                lambda: "multirail: node pairs 0/6" in stdout.read_text(),
                within_s=240,
                every_s=0.02,
                unless=lambda: proc.poll() is not None,
                what=lambda: f"the multirail phase: {stdout.read_text()} {stderr.read_text()}",
            )
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    said = " ".join(stderr.read_text().split())
    assert proc.returncode == 130, said
    assert f"interrupted during the multirail phase: {PAIRS} of {PAIRS} pairs saved" in said
    doc = json.loads((out / "results.json").read_text())
    sched = doc["run"]["schedule"]
    assert doc["run"]["complete"] is False and sched["interrupted_during"] == "multirail"
    assert "multirail_s" in sched["actual"]
    assert not doc.get("multirail")  # the levels read before the stop are not kept
    assert len(_records(out / "results.jsonl")) == PAIRS  # every pair finished before

    r = subprocess.run(
        [*cmd, "--resume"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "multirail: node pairs 0/6" in r.stdout
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"].get("complete", True) is True  # written only when false
    assert "interrupted_during" not in doc["run"]["schedule"]
    assert len(doc["paths"]) == PAIRS
    assert [(m["src"], m["dst"]) for m in doc["multirail"]] == [
        ("h1", "h2"), ("h1", "h3"), ("h1", "h4"), ("h2", "h3"), ("h2", "h4"), ("h3", "h4"),
    ]  # fmt: skip
    for m in doc["multirail"]:
        assert [lv["rails"] for lv in m["levels"]] == [1, 2]
        assert all(lv["error"] is None for lv in m["levels"]), m
    assert len(_records(out / "results.jsonl")) == PAIRS, "a finished pair was measured again"
