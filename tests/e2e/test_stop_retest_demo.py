"""`netqual retest` and `netqual demo` stop like `netqual run`: SIGTERM exits 143 and
SIGINT 130, results.json and report.html are written for what exists, marked incomplete,
and the command says how to continue (a re-test resumes, a demo starts again). Real
agent processes, real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from agentpool import AgentPool, cli_env
from e2e_cli import netqual_here, write_inventory
from eventually import eventually

SHORT = ["--iterations", "400", "--warmup", "20", "--no-bulk", "--allow-short-plan"]


def _stop_after_first_record(cmd: list[str], jsonl: Path, sig: int) -> tuple[int, str]:
    """Start ``cmd``, send ``sig`` once results.jsonl holds a record; exit code, stderr."""
    proc = subprocess.Popen(
        cmd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        eventually(
            lambda: jsonl.is_file() and jsonl.read_text().count("\n") >= 1,
            within_s=120,
            every_s=0.1,
            unless=lambda: proc.poll() is not None,
            what="a record in results.jsonl while the command runs",
        )
        assert proc.poll() is None, "the command finished before it could be stopped"
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, " ".join(stderr.split())


def _incomplete(out: Path, planned: int) -> int:
    """results.json and report.html of a stopped run; the number of pairs they hold."""
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["complete"] is False and doc["run"]["pairs_planned"] == planned
    saved = len(doc["paths"])
    assert 1 <= saved < planned
    html = (out / "report.html").read_text(encoding="utf-8")
    assert f"INCOMPLETE (run interrupted, {saved} of {planned} pairs measured)" in html
    return saved


def test_sigterm_stops_a_retest_that_then_resumes(agents: AgentPool, tmp_path: Path) -> None:
    procs = agents.start_many([(f"n{i}",) for i in range(3)], timeout_s=90)
    inv = tmp_path / "inv.toml"
    write_inventory(inv, procs, agents.token_file)
    run1, out = tmp_path / "run1", tmp_path / "again"
    r = netqual_here("run", str(inv), "--out", str(run1), *SHORT)
    assert r.returncode == 0, r.stderr
    # Long pairs, so the signal (within 0.1 s of the first record) lands while the second
    # one is measured: 20,000 round trips are 0.5-1.5 s here (60,000 made the test 35 s of
    # an idle CI host's suite, where a loopback round trip waits for wake-ups).
    args = ["retest", str(run1), "--path", "n0:n1", "--path", "n1:n2", "--path", "n0:n2"]
    args += ["--iterations", "20000", "--out", str(out)]
    code, err = _stop_after_first_record(
        [sys.executable, "-m", "netqual", *args], out / "results.jsonl", signal.SIGTERM
    )
    assert code == 143, err
    saved = _incomplete(out, 3)
    assert f"{saved} of 3 pairs saved in {out / 'results.jsonl'}" in err
    assert f"resume with netqual {' '.join(args)} --resume" in err
    junit = tmp_path / "gate.xml"
    gate = netqual_here("gate", str(out), "--junit", str(junit))
    assert gate.returncode == 1, gate.stderr
    hint = f"finish the run: netqual retest {run1.resolve()} --out {out} --resume"
    assert hint in junit.read_text()

    r = netqual_here(*args, "--resume")
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"].get("complete", True) is True and doc["retest_of"] == str(run1.resolve())
    assert doc["run"]["kind"] == "retest"
    assert sorted((p["src"], p["dst"]) for p in doc["paths"]) == [
        ("n0", "n1"),
        ("n0", "n2"),
        ("n1", "n2"),
    ]


def test_ctrl_c_stops_a_loopback_demo_that_says_start_again(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    # as the re-test above: the second pair is still being measured when SIGINT lands
    args = ["demo", "--loopback", "--agents", "3", "--iterations", "20000", "--no-bulk"]
    args += ["--out", str(out)]
    code, err = _stop_after_first_record(
        [sys.executable, "-m", "netqual", *args], out / "results.jsonl", signal.SIGINT
    )
    assert code == 130, err
    saved = _incomplete(out, 3)
    assert f"{saved} of 3 pairs saved in {out / 'results.jsonl'}" in err
    assert f"a demo does not resume: start it again with netqual {' '.join(args)}" in err
    assert "--resume" not in err
    assert json.loads((out / "results.json").read_text())["run"]["kind"] == "demo"
    assert json.loads((out / "run.json").read_text())["kind"] == "demo"
    # Report and gate agree: a stopped demo is started again, never resumed.
    report = netqual_here("report", str(out))
    assert report.returncode == 0, report.stderr
    line = f"{3 - saved} of 3 pairs not measured: a demo does not resume, start it again"
    assert line in " ".join(report.stdout.split())
    junit = tmp_path / "gate.xml"
    assert netqual_here("gate", str(out), "--junit", str(junit)).returncode == 1
    assert f"finish the run: netqual demo --out {out} (plus" in junit.read_text()
    assert "--resume" not in junit.read_text()
