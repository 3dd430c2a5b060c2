"""Every measurement is on disk the moment it exists, and a run stopped in any phase
resumes from that phase: real agent processes, real signals, real ``--resume``.

One 8-agent run (aligned schedule: every ping-pong, then bulk waves, then the interference
check) is stopped five times, once in each phase: SIGTERM in ping-pong, kill -9 in bulk,
SIGTERM and kill -9 in the interference check, then finished; kill -9 in the pre-flight
check has its own small run. Each stop is checked for what it must leave behind, and the
finished run for every pair exactly once, measured once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentpool import AgentPool, cli_env
from e2e_cli import write_inventory
from eventually import eventually

AGENTS = 8
PAIRS = AGENTS * (AGENTS - 1) // 2
ROUNDS = AGENTS - 1
# A ping-pong takes 0.15-0.4 s here (25-75 us a round trip: a loaded host is the faster,
# an idle one waits for cross-CPU wake-ups), one pair at a time, and the test sends its
# signal within 20 ms of the record it waits for: each phase still has pairs to measure
# when it is stopped. Short of the policy's 10,000 samples (preliminary verdicts): what
# the test checks is what is on disk and measured once, never a verdict. With 20,000 the
# test took 60 s of an idle CI host's suite.
PLAN = ["--iterations", "5000", "--warmup", "100", "--chunk", "64KiB", "--depth", "1"]
PLAN += ["--allow-short-plan", "--interference-sample", "8", "--progress", "plain"]

Records = list[dict[str, Any]]


def _records(jsonl: Path) -> Records:
    """The records on disk now; a line still being written is left out."""
    out = []
    for line in jsonl.read_text().splitlines() if jsonl.exists() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


def _kind(r: dict[str, Any]) -> str:
    return str(r.get("record", "path"))


def _key(r: dict[str, Any]) -> tuple[str, str]:
    p = r.get("path", r)
    return (p["src"], p["dst"])


def _count(records: Records, kind: str) -> int:
    return sum(1 for r in records if _kind(r) == kind)


class Stopped:
    def __init__(self, proc: subprocess.Popen[bytes], stdout: Path, stderr: Path) -> None:
        self.returncode = proc.returncode
        self.stdout = stdout.read_text()
        self.stderr = " ".join(stderr.read_text().split())


def _run_until(
    cmd: list[str], out: Path, tmp: Path, when: Callable[[Records], bool], sig: int
) -> Stopped:
    """Start ``netqual run``; send ``sig`` once results.jsonl satisfies ``when``."""
    stdout, stderr = tmp / "stdout.txt", tmp / "stderr.txt"
    with stdout.open("wb") as so, stderr.open("wb") as se:
        proc = subprocess.Popen(cmd, env=cli_env(), stdout=so, stderr=se)
        try:
            eventually(
                lambda: when(_records(out / "results.jsonl")),
                within_s=150,
                every_s=0.02,
                unless=lambda: proc.poll() is not None,
                what=lambda: f"the records to signal on, while the run runs: {stderr.read_text()}",
            )
            assert proc.poll() is None, f"the run ended before the signal: {stderr.read_text()}"
            proc.send_signal(sig)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return Stopped(proc, stdout, stderr)


def _check_interrupted(stop: Stopped, out: Path, code: int, phase: str) -> dict[str, Any]:
    """What any interrupt leaves: exit code, results.json and report.html marked
    incomplete, the resume command; returns results.json."""
    assert stop.returncode == code, stop.stderr
    assert f"interrupted during the {phase} phase" in stop.stderr
    assert f"--out {out}" in stop.stderr and "--resume" in stop.stderr
    doc: dict[str, Any] = json.loads((out / "results.json").read_text())
    assert doc["run"]["complete"] is False and doc["run"]["pairs_planned"] == PAIRS
    assert doc["run"]["schedule"]["interrupted_during"] == phase
    assert "INCOMPLETE" in (out / "report.html").read_text(encoding="utf-8")
    return doc


def test_stopped_in_every_phase_resumes_with_every_pair_exactly_once(
    agents: AgentPool, tmp_path: Path
) -> None:
    procs = agents.start_many([(f"n{i}",) for i in range(AGENTS)], timeout_s=90)
    inv = tmp_path / "inv.toml"
    write_inventory(inv, procs, agents.token_file)
    out = tmp_path / "run"
    jsonl = out / "results.jsonl"
    first = [sys.executable, "-m", "netqual", "run", str(inv), "--out", str(out), *PLAN]
    resume = [*first, "--resume"]

    # 1. SIGTERM during ping-pong: every ping-pong finished so far is on disk, exit 143.
    stop = _run_until(first, out, tmp_path, lambda rs: _count(rs, "pingpong") >= 3, signal.SIGTERM)
    doc = _check_interrupted(stop, out, 143, "ping-pong")
    held = _records(jsonl)
    assert _count(held, "path") == 0 and _count(held, "pingpong") >= 3
    # results.json shows exactly the ping-pongs the journal holds, none finished yet
    assert doc["run"]["schedule"]["pairs_pingpong_only"] == _count(held, "pingpong")
    assert len(doc["paths"]) == _count(held, "pingpong")
    assert all(p["verdict"] != "offload-safe" for p in doc["paths"])
    assert f"ping-pong: round 1/{ROUNDS}, pairs 0/{PAIRS}" in stop.stdout
    assert "pre-flight: agents" in stop.stdout
    started_at = json.loads((out / "run.json").read_text())["started_at"]

    # 2. kill -9 during the bulk waves: resumed ping-pongs are not measured again.
    pingpongs_before = _count(held, "pingpong")
    stop = _run_until(resume, out, tmp_path, lambda rs: _count(rs, "path") >= 1, signal.SIGKILL)
    assert stop.returncode == -signal.SIGKILL
    held = _records(jsonl)
    assert _count(held, "pingpong") == PAIRS and 1 <= _count(held, "path") < PAIRS
    assert "bulk: wave 1/" in stop.stdout
    assert f"ping-pong: round 1/{ROUNDS}, pairs {pingpongs_before}/{PAIRS}" in stop.stdout

    # 3. SIGTERM during the interference check: exit 143, results and report written.
    stop = _run_until(resume, out, tmp_path, lambda rs: _count(rs, "alone") >= 1, signal.SIGTERM)
    doc = _check_interrupted(stop, out, 143, "interference")
    assert len(doc["paths"]) == PAIRS and "interference" not in doc
    assert "interference: paths re-measured alone 0/8" in stop.stdout

    # 4. kill -9 during the interference check again, one more path later.
    alone_before = _count(_records(jsonl), "alone")
    stop = _run_until(
        resume,
        out,
        tmp_path,
        lambda rs: _count(rs, "alone") > alone_before,
        signal.SIGKILL,
    )
    assert stop.returncode == -signal.SIGKILL

    # 5. Finished: every pair once, each ping-pong measured once, the sample kept.
    r = subprocess.run(
        resume, env=cli_env(), capture_output=True, text=True, timeout=240, check=False
    )
    assert r.returncode == 0, r.stderr
    held = _records(jsonl)
    pingpong = Counter(_key(x) for x in held if _kind(x) == "pingpong")
    finished = Counter(_key(x) for x in held if _kind(x) == "path")
    alone = Counter(_key(x) for x in held if _kind(x) == "alone")
    samples = [x for x in held if _kind(x) == "interference-sample"]
    assert len(pingpong) == len(finished) == PAIRS
    assert set(pingpong.values()) == set(finished.values()) == {1}
    assert len(samples) == 1 and set(alone.values()) == {1}
    sample = [tuple(k) for k in samples[0]["pairs"]]
    assert set(alone) == set(sample) and len(sample) == 8
    rtt = {_key(x): x["path"]["rtt_us"] for x in held if _kind(x) == "pingpong"}
    assert all(x["rtt_us"] == rtt[_key(x)] for x in held if _kind(x) == "path")
    doc = json.loads((out / "results.json").read_text())
    keys = [(p["src"], p["dst"]) for p in doc["paths"]]
    assert len(keys) == len(set(keys)) == PAIRS
    assert doc["run"].get("complete", True) is True and doc["run"]["started_at"] == started_at
    assert [(p["src"], p["dst"]) for p in doc["interference"]["paths"]] == sample
    assert "interference: paths re-measured alone" in r.stdout


def test_killed_in_the_preflight_check_resumes(agents: AgentPool, tmp_path: Path) -> None:
    procs = agents.start_many([(f"n{i}",) for i in range(3)], timeout_s=90)
    inv = tmp_path / "inv.toml"
    write_inventory(inv, procs, agents.token_file)
    out = tmp_path / "run"
    plan = ["--iterations", "500", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
    plan += ["--interference-sample", "0", "--progress", "plain"]
    cmd = [sys.executable, "-m", "netqual", "run", str(inv), "--out", str(out), *plan]

    # run.json and results.jsonl exist before the pre-flight check starts (run.json first:
    # killed between the two, there is no results.jsonl to resume from).
    def started(_: Records) -> bool:
        return (out / "run.json").exists() and (out / "results.jsonl").exists()

    stop = _run_until(cmd, out, tmp_path, started, signal.SIGKILL)
    assert stop.returncode == -signal.SIGKILL
    assert (out / "results.jsonl").exists()
    r = subprocess.run(
        [*cmd, "--resume"], env=cli_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr
    finished = [_key(x) for x in _records(out / "results.jsonl") if _kind(x) == "path"]
    assert len(finished) == len(set(finished)) == 3
