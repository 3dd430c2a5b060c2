"""examples/slurm/qualify.sbatch on a real single-host Slurm cluster that the test starts
(examples/slurm/single_host_cluster.py): sbatch with four agent tasks on the one node
(distinct ports), the inventory from `inventory from-slurm` (NodeAddr and the topology's
leaf switch from the real scontrol), results.json, report.html, the gate's verdict as the
job's exit status, and no agent process left after the job, after scancel, or after the
batch step is killed with SIGKILL."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentpool import cli_env
from eventually import eventually
from paths import REPO

sys.path.insert(0, str(REPO / "examples" / "slurm"))
from single_host_cluster import SlurmCluster, SlurmUnavailable

from netqual.files.schema import validate

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SBATCH = REPO / "examples" / "slurm" / "qualify.sbatch"
TASKS = 4
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except SlurmUnavailable as err:
        cluster.stop()
        print(f"\nslurm tests skipped: {err}")
        pytest.skip(f"Slurm cannot run here: {err}")
    try:
        yield cluster
    finally:
        cluster.stop()


def _submit(cluster: SlurmCluster, job_dir: Path, port: int, run_args: str) -> str:
    job_dir.mkdir()
    env = cli_env(
        SLURM_CONF=str(cluster.conf),
        NETQUAL=f"{sys.executable} -m netqual",
        NETQUAL_TASKS_PER_NODE=str(TASKS),
        NETQUAL_PORT=str(port),
        NETQUAL_OUT=str(job_dir / "out"),
        NETQUAL_RUN_ARGS=run_args,
    )
    done = subprocess.run(
        ["sbatch", "--parsable", "--nodes=1", f"--ntasks-per-node={TASKS}", str(SBATCH)],
        cwd=job_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def _free_ports(count: int) -> int:
    """A base port whose next ``count`` ports are free for TCP and UDP right now."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 30000 - count)
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + count):
                    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                        sock = stack.enter_context(socket.socket(socket.AF_INET, kind))
                        sock.bind(("0.0.0.0", port))
            return base
        except OSError:
            continue
    pytest.fail(f"no {count} consecutive free ports in 20000-30000")


def _job(cluster: SlurmCluster, job_id: str) -> dict[str, str]:
    text = cluster.scontrol("show", "job", job_id, "--oneliner")
    return dict(w.split("=", 1) for w in text.split() if "=" in w)


def _wait(cluster: SlurmCluster, job_id: str, job_dir: Path, timeout_s: float) -> dict[str, str]:
    def ended() -> dict[str, str] | None:
        job = _job(cluster, job_id)
        return job if job.get("JobState") in FINAL_STATES else None

    try:  # one scontrol call a poll; a job's end is what the test waits on
        return eventually(ended, within_s=timeout_s, every_s=0.2, what=f"job {job_id} ends")
    except AssertionError:
        subprocess.run(["scancel", job_id], env=cluster.env(), check=False, timeout=30)
        out = "".join(p.read_text(errors="replace") for p in job_dir.glob("netqual-*.out"))
        pytest.fail(f"job {job_id} still running after {timeout_s:g} s\n{out}")


def _agents_of(out_dir: Path) -> list[str]:
    """Command lines of live processes started with this job's token (its agents)."""
    token = str(out_dir / "token")
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in args]
        if "agent" in words and token in words:
            found.append(" ".join(words))
    return found


def _gone(out_dir: Path, timeout_s: float) -> None:
    """Until no agent of this job is left; fails naming the ones still running."""
    eventually(
        lambda: not _agents_of(out_dir),
        within_s=timeout_s,
        every_s=0.2,
        what=lambda: f"every agent of the job ends; left: {_agents_of(out_dir)}",
    )


POLICY = """\
[policy]
metric = "p99"
safe_max_us = 200.0
unsafe_above_us = 500.0
min_samples = 300
"""


def test_sbatch_qualifies_the_job_nodes(slurm: SlurmCluster, tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(POLICY)
    run_args = f"--iterations 300 --warmup 30 --no-bulk --policy {tmp_path / 'policy.toml'}"
    job_dir = tmp_path / "job"
    job_id = _submit(slurm, job_dir, _free_ports(TASKS), run_args)
    job = _wait(slurm, job_id, job_dir, timeout_s=150)
    log = (job_dir / f"netqual-{job_id}.out").read_text(errors="replace")
    out = job_dir / "out"

    assert f"{TASKS} agents listening" in log, log
    assert stat.S_IMODE((out / "token").stat().st_mode) == 0o600
    results = json.loads((out / "results.json").read_text())
    validate(results, "results.json")
    nodes = {n["name"]: n for n in results["nodes"]}
    assert sorted(nodes) == [f"{slurm.node}-{i}" for i in range(TASKS)]
    # NodeAddr and the leaf switch come from the cluster's own scontrol.
    assert {(n["address"], n["rack"]) for n in nodes.values()} == {("127.0.0.1", slurm.leaf)}
    assert len(results["paths"]) == TASKS * (TASKS - 1) // 2
    assert all(p["error"] is None for p in results["paths"]), results["paths"]
    html = (out / "report.html").read_text()
    assert f"{slurm.node}-3" in html

    # The job's exit status is the gate's verdict, the same one `netqual gate` gives now.
    gate = subprocess.run(
        [sys.executable, "-m", "netqual", "gate", str(out / "results.json")],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert gate.returncode in (0, 1), gate.stderr
    assert (out / "gate.exit").read_text().strip() == str(gate.returncode)
    assert job["ExitCode"] == f"{gate.returncode}:0", job
    assert ("GATE FAILED" in log) == (gate.returncode == 1), log
    assert (out / "gate.xml").read_text().startswith("<?xml")
    _gone(out, timeout_s=10)


@pytest.mark.parametrize("how", ["scancel", "kill-batch-step"])
def test_no_agent_survives_a_cancelled_job(slurm: SlurmCluster, tmp_path: Path, how: str) -> None:
    job_dir = tmp_path / "job"
    port = _free_ports(TASKS)
    # A run far longer than the test: the job is ended from outside while it measures.
    job_id = _submit(slurm, job_dir, port, "--iterations 100000000 --no-bulk")
    out = job_dir / "out"
    eventually(
        lambda: len(_agents_of(out)) >= TASKS and (out / "inventory.toml").exists(),
        within_s=90,
        every_s=0.2,
        what=lambda: f"the job's {TASKS} agents and inventory: {_job(slurm, job_id)}",
    )
    if how == "scancel":
        cmd = ["scancel", job_id]
    else:  # SIGKILL to the batch shell only: its trap cannot run, Slurm must clean up
        cmd = ["scancel", "--batch", "--signal=KILL", job_id]
    subprocess.run(cmd, env=slurm.env(), check=True, timeout=30)
    _gone(out, timeout_s=30)
    assert _wait(slurm, job_id, job_dir, timeout_s=60)["JobState"] in ("CANCELLED", "FAILED")
