"""The real coordinator (``netqual run``, a child process) against 64 simulated agents
(bench/simagents.py: asyncio servers speaking the real protocol and token handshake,
synthetic samples): full mesh with bulk, SIGKILL mid-run, --resume, every pair exactly
once; the coordinator's threads and file descriptors stay bounded by a round's pairs and
the agents (one open session each), and sessions are reused, not opened per request."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from paths import REPO

sys.path.insert(0, str(REPO / "bench"))
from simagents import check_once, coordinator, sim_snapshot, simulated  # bench/simagents.py


@pytest.mark.slow  # 47-88 s on the shared 2-core host at load average 18
def test_64_simulated_agents_full_mesh_survives_kill_9_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with simulated(64, tmp_path, delay_s=0.001) as (agents, inventory):
        first = coordinator(inventory, out, False, None, limit_s=240, kill_at_lines=300)
        assert first["killed"], first["stderr"]
        kept = (out / "results.jsonl").read_bytes().count(b"\n")
        assert 300 <= kept < 2016
        second = coordinator(inventory, out, True, None, limit_s=240)
        assert second["rc"] == 0 and not second["killed"], second["stderr"]
        probes, sessions = agents.probes, agents.sessions
    once, paths, lines = check_once(out, 64 * 63 // 2)
    assert once, (paths, lines)
    # the resumed run measured only what was missing (ping-pong + bulk each) + a sample
    assert probes < 2 * (2 * 2016) + 16
    # sessions per agent and run (two pre-flight passes, the probes' one, the interference
    # sample's), not one per probe request (4,000 and more)
    assert sessions <= 2 * 4 * 64, (sessions, probes)
    # one thread per pair of a round (32), one open session per agent (64), a few of its own
    for run in (first, second):
        assert run["threads"] <= 32 + 40 and run["fds"] <= 64 + 32 + 40, run


def test_simulated_agents_answer_the_snapshot_so_the_run_has_a_fleet(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with simulated(4, tmp_path, delay_s=0.001) as (_agents, inventory):
        run = coordinator(inventory, out, False, None, limit_s=120)
    assert run["rc"] == 0 and "no configuration snapshot" not in run["stderr"], run["stderr"]
    fleet = json.loads((out / "results.json").read_text())["fleet"]
    assert sorted(fleet["snapshot"]) == ["a0000", "a0001", "a0002", "a0003"]
    assert fleet["snapshot"]["a0002"] == sim_snapshot() and fleet["outliers"] == []
