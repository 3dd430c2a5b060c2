"""The agent's side of an engine worker: start it, talk JSON lines with it, end it.

A worker is its own session (``start_new_session``) so that killing its process group
ends whatever the engine started. Every read has a timeout (``line_timeout_s``, and the
job's deadline over all lines): an engine that blocks forever (NIXL's add_remote_agent
towards a peer that silently drops packets) is killed, and the error names the last phase
the worker reported. A line that is not a JSON object, or longer than ``MAX_LINE_BYTES``,
ends the worker too. A worker that crashes after its result (NIXL's teardown) keeps the
result: ``exit_note`` says how it ended, nothing is discarded.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from netqual.base.names import printable
from netqual.engines.interface import EngineJob, EngineWorkerError
from netqual.engines.worker import LOG_NAME

MAX_LINE_BYTES = 4 << 20
LOG_TAIL_CHARS = 1200
EXIT_GRACE_S = 5.0


def worker_argv() -> list[str]:
    return [sys.executable, "-m", "netqual.engines.worker"]


class Worker:
    """One running worker process."""

    def __init__(
        self,
        job: EngineJob,
        deadline: float,
        line_timeout_s: float,
        argv: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.job = job
        self.deadline = deadline
        self.line_timeout_s = line_timeout_s
        self.phase = "spawn"
        self.log_dir = Path(job.log_dir)
        self._buf = b""
        self._eof = False
        self.returncode: int | None = None
        with (self.log_dir / LOG_NAME).open("ab") as log:
            self.proc = subprocess.Popen(
                list(argv or worker_argv()),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,  # what it prints before it takes over its own fds
                start_new_session=True,
                env=dict(env) if env is not None else None,
                close_fds=True,
            )
        self.send(json.dumps(job.to_json()))

    # -- talking -------------------------------------------------------------------------
    def send(self, line: str) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        with contextlib.suppress(OSError):  # a worker that died is found by the next read
            stdin.write(line.encode() + b"\n")
            stdin.flush()

    def close_input(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def message(self, *kinds: str) -> dict[str, Any]:
        """The next message of one of ``kinds`` (phases update ``phase`` on the way). An
        ``error`` message, EOF, a timeout or garbage raise EngineWorkerError."""
        while True:
            line = self._line()
            try:
                msg = json.loads(line)
            except ValueError:
                raise self._fail(f"worker wrote garbage: {printable(line[:120])!r}") from None
            if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
                raise self._fail(f"worker wrote garbage: {printable(line[:120])!r}")
            kind = msg["type"]
            if kind == "phase":
                self.phase = printable(str(msg.get("phase")), 40)
                continue
            if kind == "error":
                where = printable(str(msg.get("phase", self.phase)), 40)
                self.phase = where
                raise self._fail(printable(str(msg.get("message", "failed")), 600))
            if kind in kinds:
                return msg
            raise self._fail(f"worker wrote {printable(kind, 40)!r}, expected {' or '.join(kinds)}")

    def _line(self) -> str:
        fd = self.proc.stdout.fileno() if self.proc.stdout is not None else -1
        end = min(self.deadline, time.monotonic() + self.line_timeout_s)
        while b"\n" not in self._buf:
            if self._eof:
                raise self._fail(self._ended("without a result"))
            left = end - time.monotonic()
            if left <= 0:
                what = "deadline" if end >= self.deadline else f"{self.line_timeout_s:g} s"
                raise self._fail(f"worker silent past its {what}: killed")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self._eof = True
                continue
            self._buf += chunk
            if len(self._buf) > MAX_LINE_BYTES and b"\n" not in self._buf:
                raise self._fail(f"worker wrote a line over {MAX_LINE_BYTES} bytes")
        raw, _, self._buf = self._buf.partition(b"\n")
        return raw.decode("utf-8", errors="replace")

    def _ended(self, what: str) -> str:
        rc = self.wait(EXIT_GRACE_S)
        return f"worker exited {what}: {describe_exit(rc)}"

    def _fail(self, problem: str) -> EngineWorkerError:
        self.kill()
        return EngineWorkerError(self.phase, problem, self.log_tail())

    # -- ending --------------------------------------------------------------------------
    def wait(self, timeout_s: float) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.returncode = self.proc.wait(timeout=timeout_s)
        return self.returncode

    def kill(self) -> None:
        """The whole process group, at once; reaped."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.returncode = self.proc.wait(timeout=EXIT_GRACE_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def finish(self, grace_s: float = EXIT_GRACE_S) -> str | None:
        """After its last message: let it exit, else kill it. None when it exited 0, else
        how it ended (a crash at exit is noted, never a failed measurement)."""
        self.close_input()
        rc = self.wait(grace_s)
        if rc is None:
            self.kill()
            return "did not exit after its result: killed"
        self.kill()  # reaps, closes the pipes; a group member left behind goes too
        return None if rc == 0 else describe_exit(rc)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            text = (self.log_dir / LOG_NAME).read_text(errors="replace")
            return printable(text[-LOG_TAIL_CHARS:], LOG_TAIL_CHARS)
        return ""

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-rc).name}"
        return f"killed by signal {-rc}"
    return f"exit status {rc}"
