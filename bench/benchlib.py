"""Shared plumbing for the bench scripts: loopback ports, reference servers, two agents.

Importing this module starts nothing; every process is started inside a context manager
that stops it again, also on errors and Ctrl-C.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from netqual.base.auth import load_token, write_token
from netqual.model.node import Node
from netqual.run.localagents import start_agent, stop_agents

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 the kernel just handed out (for tools that need a number)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} not listening on {HOST}:{port} after {timeout_s:g} s")


def pinned(argv: Sequence[str], cpu: int | None) -> list[str]:
    """``argv`` run under ``taskset -c CPU`` when a CPU is given."""
    return ["taskset", "-c", str(cpu), *argv] if cpu is not None else list(argv)


@contextmanager
def reference_server(
    argv: Sequence[str], port: int, cpu: int | None = None, timeout_s: float = 10.0
) -> Iterator[int]:
    """Run a reference tool's server (``argv`` already names ``port``); stop it on exit."""
    proc = subprocess.Popen(pinned(argv, cpu), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc, argv[0], timeout_s)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class AgentPair:
    src: Node  # the initiator's agent
    dst: Node  # the responder's agent
    token: bytes | None


@contextmanager
def two_agents(cpu: int | None = None) -> Iterator[AgentPair]:
    """Two netqual agents on 127.0.0.1 (kernel-picked ports) sharing a fresh token.

    With ``cpu``, both agents are confined to that CPU before any session starts (session
    threads inherit the listener thread's affinity).
    """
    with tempfile.TemporaryDirectory(prefix="netqual-bench-") as tmp:
        token_file = Path(tmp) / "token"
        write_token(token_file)
        procs: list[subprocess.Popen[str]] = []
        try:
            nodes = []
            for name in ("bench-a", "bench-b"):
                proc, port = start_agent(name, token_file, HOST)
                procs.append(proc)
                if cpu is not None:
                    os.sched_setaffinity(proc.pid, {cpu})
                nodes.append(Node(name=name, address=HOST, port=port))
            yield AgentPair(nodes[0], nodes[1], load_token(token_file))
        finally:
            stop_agents(procs)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Right-aligned plain-text table (stable, greppable output)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)
