"""Outputs a user can trust: a run never replaces another run's results unless --force,
the default --out is new for every run, and Ctrl-C leaves a finalised, resumable run that
report, gate and diff read (directory, results.json or results.jsonl)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from agentpool import AgentPool, cli_env
from e2e_cli import netqual_here, write_inventory
from eventually import eventually

SHORT = ["--iterations", "300", "--warmup", "20", "--no-bulk", "--allow-short-plan"]


def test_existing_out_is_refused_unless_force(agents: AgentPool, tmp_path: Path) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    out = tmp_path / "out"
    assert netqual_here("run", str(inventory), "--out", str(out), *SHORT).returncode == 0
    before = (out / "results.json").read_bytes()
    again = netqual_here("run", str(inventory), "--out", str(out), *SHORT)
    assert again.returncode == 2, again.stderr
    assert f"{out} already holds a run (results.json, results.jsonl)" in " ".join(
        again.stderr.split()
    )
    assert (out / "results.json").read_bytes() == before
    forced = netqual_here("run", str(inventory), "--out", str(out), "--force", *SHORT)
    assert forced.returncode == 0, forced.stderr
    assert (out / "results.json").read_bytes() != before


def test_default_out_is_a_new_directory_per_run(agents: AgentPool, tmp_path: Path) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    for _ in range(2):
        r = netqual_here("run", str(inventory), *SHORT, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    # No pause between the two: the name's random part keeps two runs started in the same
    # second (its clock part has one-second resolution) apart.
    runs = sorted(p.name for p in tmp_path.glob("netqual-run-*"))
    assert len(runs) == 2, runs
    assert all((tmp_path / name / "results.json").is_file() for name in runs)


def test_ctrl_c_saves_finalises_and_says_how_to_resume(agents: AgentPool, tmp_path: Path) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    out = tmp_path / "out"
    jsonl = out / "results.jsonl"
    # Long pairs (the three share one host, so they run one at a time): 20,000 round trips
    # are 0.5-1.5 s here, and SIGINT lands within 0.05 s of the first record, while the
    # second pair is measured (150,000 made this 17 s of an idle CI host's suite).
    cmd = [sys.executable, "-m", "netqual", "run", str(inventory), "--out", str(out)]
    cmd += ["--iterations", "20000", "--warmup", "100", "--no-bulk"]
    proc = subprocess.Popen(
        cmd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        eventually(
            lambda: jsonl.is_file() and jsonl.read_text().count("\n") >= 1,
            within_s=240,
            unless=lambda: proc.poll() is not None,
            what="a record in results.jsonl while the run runs",
        )
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    err = " ".join(stderr.split())
    saved = len(jsonl.read_text().splitlines())
    assert 1 <= saved < 3
    assert f"interrupted during the ping-pong phase: {saved} of 3 pairs saved in {jsonl}" in err
    assert f"resume with netqual run {inventory} --out {out}" in err and "--resume" in err
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["complete"] is False and doc["run"]["pairs_planned"] == 3
    assert len(doc["paths"]) == saved
    html = (out / "report.html").read_text(encoding="utf-8")
    assert f"INCOMPLETE (run interrupted, {saved} of 3 pairs measured)" in html

    r = netqual_here("report", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"INCOMPLETE (run interrupted, {saved} of 3 pairs measured)")
    # What a crash leaves (no results.json): report, gate and diff read results.jsonl.
    (out / "results.json").unlink()
    for args in (["report", str(jsonl)], ["report", str(out)], ["diff", str(jsonl), str(jsonl)]):
        r = netqual_here(*args)
        assert r.returncode == 0, (args, r.stderr)
    g = netqual_here("gate", str(jsonl))
    assert g.returncode == 1, g.stderr  # an interrupted run fails the gate's complete rule
    assert "INCOMPLETE" in g.stdout
