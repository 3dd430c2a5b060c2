"""The agent's side of an engine worker (netqual.engines.runner) against fake workers:
real processes that misbehave as an engine can (crash at exit, hang, write garbage), so
the protocol's guarantees are checked without loading any engine."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from netqual.engines import nixl, runner
from netqual.engines.interface import EngineJob, EngineWorkerError, Role
from netqual.model.engine import EngineName


def _job(tmp_path: Path) -> EngineJob:
    return EngineJob(
        Role.INITIATOR, EngineName.NIXL, "127.0.0.1", "127.0.0.1", log_dir=str(tmp_path)
    )


def _fake(tmp_path: Path, body: str) -> list[str]:
    """A worker that reads its job line, then runs ``body`` (``out(obj)`` writes a line)."""
    script = tmp_path / "fake_worker.py"
    script.write_text(
        "import json, os, signal, subprocess, sys, time\n"
        "job = json.loads(sys.stdin.readline())\n"
        "def out(obj):\n"
        "    sys.stdout.write(json.dumps(obj) + '\\n'); sys.stdout.flush()\n"
        + textwrap.dedent(body)
    )
    return [sys.executable, str(script)]


def _worker(tmp_path: Path, body: str, line_s: float = 5.0, total_s: float = 20.0) -> runner.Worker:
    return runner.Worker(_job(tmp_path), time.monotonic() + total_s, line_s, _fake(tmp_path, body))


def test_a_result_written_before_a_crash_at_exit_is_kept(tmp_path: Path) -> None:
    body = """
    out({"type": "phase", "phase": "init"})
    out({"type": "op", "op": "read", "completion_ns": [1000, 2000]})
    out({"type": "result", "version": "fake 1"})
    os.kill(os.getpid(), signal.SIGSEGV)  # NIXL's UCX teardown, as it crashes here
    """
    with _worker(tmp_path, body) as w:
        op = w.message("op", "result")
        result = w.message("op", "result")
        note = w.finish()
    assert op["completion_ns"] == [1000, 2000]
    assert result["version"] == "fake 1"
    assert note == "killed by SIGSEGV"


def test_a_silent_worker_is_killed_with_its_whole_group_and_the_last_phase_named(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "child.pid"
    body = f"""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open({str(pidfile)!r}, "w").write(str(child.pid))
    out({{"type": "phase", "phase": "connect"}})
    time.sleep(600)  # add_remote_agent towards a peer that drops every packet
    """
    t0 = time.monotonic()
    w = _worker(tmp_path, body, line_s=1.5)
    with pytest.raises(EngineWorkerError) as caught:
        w.message("op", "result")
    assert time.monotonic() - t0 < 30
    assert caught.value.phase == "connect"
    assert "silent past its 1.5 s: killed" in str(caught.value)
    assert w.returncode is not None and w.returncode < 0
    child = int(pidfile.read_text())
    for _ in range(50):  # the grandchild went with the group (reaped by init, or a zombie)
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_the_deadline_bounds_a_worker_that_trickles_phases(tmp_path: Path) -> None:
    body = """
    while True:
        out({"type": "phase", "phase": "spinning"})
        time.sleep(0.2)
    """
    t0 = time.monotonic()
    w = _worker(tmp_path, body, line_s=5.0, total_s=2.0)
    with pytest.raises(EngineWorkerError, match="silent past its deadline"):
        w.message("result")
    assert time.monotonic() - t0 < 20


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("print('hello from a native library')\nsys.stdout.flush()\ntime.sleep(60)", "garbage"),
        ("out([1, 2, 3])\ntime.sleep(60)", "garbage"),
        ("out({'kind': 'no type'})\ntime.sleep(60)", "garbage"),
        ("out({'type': 'descriptor'})\ntime.sleep(60)", "expected op or result"),
        ("sys.exit(0)", "exited without a result: exit status 0"),
        ("os.kill(os.getpid(), signal.SIGKILL)", "exited without a result: killed by SIGKILL"),
    ],
)
def test_a_misbehaving_worker_is_an_error_naming_what_it_did(
    tmp_path: Path, body: str, problem: str
) -> None:
    with pytest.raises(EngineWorkerError, match=problem):
        _worker(tmp_path, body).message("op", "result")


def test_an_error_line_names_the_phase_it_came_from(tmp_path: Path) -> None:
    body = """
    out({"type": "phase", "phase": "init"})
    out({"type": "error", "phase": "init", "message": "nixlBackendError: NIXL_ERR_BACKEND"})
    """
    with pytest.raises(EngineWorkerError) as caught:
        _worker(tmp_path, body).message("result")
    assert caught.value.phase == "init"
    assert "NIXL_ERR_BACKEND" in str(caught.value)


def test_an_endless_line_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "MAX_LINE_BYTES", 1 << 16)
    body = "sys.stdout.write('x' * (1 << 20)); sys.stdout.flush(); time.sleep(60)"
    with pytest.raises(EngineWorkerError, match="line over 65536 bytes"):
        _worker(tmp_path, body).message("result")


def test_the_log_tail_comes_with_the_error(tmp_path: Path) -> None:
    body = """
    sys.stderr.write("E0101 transfer_engine.cpp:42] RdmaTransport: No available RNIC\\n")
    sys.stderr.flush()
    sys.exit(3)
    """
    with pytest.raises(EngineWorkerError) as caught:
        _worker(tmp_path, body).message("result")
    assert "No available RNIC" in caught.value.log_tail


def test_the_real_worker_says_why_it_cannot_start(tmp_path: Path) -> None:
    """``python -m netqual.engines.worker`` itself: a job line it cannot read is an error
    line and exit 3; an initiator job without a descriptor stops and names its phase: ``init``
    where NIXL cannot load here, ``connect`` where it starts (no descriptor to connect to)."""
    bad = subprocess.run(
        [*runner.worker_argv()], input=b"not json\n", capture_output=True, timeout=60, check=False
    )
    assert bad.returncode == 3
    line = json.loads(bad.stdout.splitlines()[0])
    assert line["type"] == "error" and line["phase"] == "job"
    assert line["message"].startswith("bad job")
    w = runner.Worker(_job(tmp_path), time.monotonic() + 60, 60)
    with pytest.raises(EngineWorkerError) as caught:
        w.message("result")
    assert caught.value.phase == ("connect" if nixl.version() is not None else "init")
    assert (tmp_path / "worker.log").exists()  # what the worker printed, for the answer
