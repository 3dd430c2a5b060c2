"""`netqual run --resume`: a coordinator killed with SIGKILL, then resumed, measures every
pair exactly once; a torn last line is measured again; another run's directory is refused."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from agentpool import AgentPool, cli_env
from e2e_cli import netqual_here, write_inventory
from eventually import eventually

# Slow enough per pair (0.15-0.4 s here: 25-75 us a round trip, the idle host the slower)
# that the kill, within 20 ms of the third line, lands mid-run with pairs to go. Short of
# the policy's 10,000 samples: the test checks which pairs are measured, never a verdict
# (20,000 made it 27 s of an idle CI host's suite).
PLAN = ["--iterations", "5000", "--warmup", "100", "--no-bulk", "--allow-short-plan"]
PLAN += ["--interference-sample", "0"]
AGENTS = 6
PAIRS = AGENTS * (AGENTS - 1) // 2


def _lines(jsonl: Path) -> list[str]:
    return jsonl.read_text().splitlines()


def _pairs_of_lines(jsonl: Path) -> list[tuple[str, str]]:
    """Finished pairs, in file order (other record kinds left out)."""
    return [(d["src"], d["dst"]) for d in map(json.loads, _lines(jsonl)) if "record" not in d]


def _kill_mid_run(inv: Path, out: Path, after_lines: int) -> int:
    cmd = [sys.executable, "-m", "netqual", "run", str(inv), "--out", str(out), *PLAN]
    proc = subprocess.Popen(
        cmd, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    jsonl = out / "results.jsonl"
    try:
        eventually(
            lambda: jsonl.exists() and len(_lines(jsonl)) >= after_lines,
            within_s=90,
            every_s=0.02,
            unless=lambda: proc.poll() is not None,
            what=f"{after_lines} records while the run runs",
        )
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    return len(_lines(jsonl))


def test_sigkill_then_resume_measures_every_pair_exactly_once(
    agents: AgentPool, tmp_path: Path
) -> None:
    procs = agents.start_many([(f"n{i}",) for i in range(AGENTS)], timeout_s=90)
    inv = tmp_path / "inv.toml"
    write_inventory(inv, procs, agents.token_file)
    out = tmp_path / "run"
    finished = _kill_mid_run(inv, out, after_lines=3)
    assert 3 <= finished < PAIRS
    jsonl = out / "results.jsonl"
    # A crash mid-write leaves half a line: that pair must be measured again, not lost.
    lines = _lines(jsonl)
    torn_pair = _pairs_of_lines(jsonl)[-1]
    jsonl.write_text("".join(x + "\n" for x in lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    before = [(d["src"], d["dst"]) for d in map(json.loads, lines[:-1])]
    started_at = json.loads((out / "run.json").read_text())["started_at"]

    r = netqual_here("run", str(inv), "--out", str(out), "--resume", *PLAN)
    assert r.returncode == 0, r.stderr
    after = _pairs_of_lines(jsonl)
    assert after[: len(before)] == before, "finished pairs were measured again"
    assert len(after) == len(set(after)) == PAIRS
    assert torn_pair in after[len(before) :]
    doc = json.loads((out / "results.json").read_text())
    keys = [(p["src"], p["dst"]) for p in doc["paths"]]
    assert len(keys) == len(set(keys)) == PAIRS
    assert set(keys) == set(after)
    assert doc["run"]["started_at"] == started_at
    assert sum(doc["summary"]["counts"].values()) == PAIRS


def test_resume_refuses_another_plan_unless_forced(agents: AgentPool, tmp_path: Path) -> None:
    procs = agents.start_many([(f"n{i}",) for i in range(3)], timeout_s=90)
    inv = tmp_path / "inv.toml"
    write_inventory(inv, procs, agents.token_file)
    out = tmp_path / "run"
    small = ["--iterations", "500", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
    small += ["--interference-sample", "0"]
    assert netqual_here("run", str(inv), "--out", str(out), *small).returncode == 0
    jsonl = out / "results.jsonl"
    kept = _lines(jsonl)[:1]
    jsonl.write_text(kept[0] + "\n")

    other = ["--iterations", "600", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
    other += ["--interference-sample", "0"]
    r = netqual_here("run", str(inv), "--out", str(out), "--resume", *other)
    assert r.returncode == 2, r.stderr
    assert "different run" in r.stderr and "plan.iterations 500 -> 600" in r.stderr
    assert _lines(jsonl) == kept, "a refused resume must not touch the directory"

    r = netqual_here("run", str(inv), "--out", str(out), "--resume", "--force", *other)
    assert r.returncode == 0, r.stderr
    assert len(set(_pairs_of_lines(jsonl))) == len(_lines(jsonl)) == 3
    assert _lines(jsonl)[0] == kept[0]

    r = netqual_here("run", str(inv), "--out", str(tmp_path / "empty"), "--resume", *small)
    assert r.returncode == 2 and "nothing to resume" in r.stderr

    # Killed after run.json and before the first record (issue 36: exit 2 "results.jsonl
    # does not exist: nothing to resume"): --resume starts from nothing under run.json's
    # identity, and still refuses another plan without touching the directory.
    for name in ("results.jsonl", "results.json", "report.html"):
        (out / name).unlink()
    started_at = json.loads((out / "run.json").read_text())["started_at"]
    r = netqual_here("run", str(inv), "--out", str(out), "--resume", *small)
    assert r.returncode == 2 and "plan.iterations 600 -> 500" in r.stderr, r.stderr
    assert not jsonl.exists()
    r = netqual_here("run", str(inv), "--out", str(out), "--resume", *other)
    assert r.returncode == 0, r.stderr
    assert len(set(_pairs_of_lines(jsonl))) == len(_lines(jsonl)) == 3
    assert json.loads((out / "results.json").read_text())["run"]["started_at"] == started_at
