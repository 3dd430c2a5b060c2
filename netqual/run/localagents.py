"""Agents as child processes on this host (``netqual demo`` and tests): real processes,
real sockets, each on a port the kernel picks."""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from netqual.base.auth import write_token
from netqual.base.errors import InputError, NetqualError
from netqual.model.node import Node, Role

_READY = re.compile(r"listening on (\S+):(\d+)")
START_TIMEOUT_ENV = "NETQUAL_AGENT_START_S"
DEFAULT_START_TIMEOUT_S = 60.0  # a loaded machine (CI, shared VMs) can take many seconds


class AgentStartError(NetqualError):
    pass


def start_timeout_s() -> float:
    """How long an agent may take to start: ``$NETQUAL_AGENT_START_S``, else 60 s.

    Python under emulation (a TCG guest) needs 30-55 s just to import netqual."""
    text = os.environ.get(START_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_START_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 86_400:
        raise InputError(
            "environment", f"{text!r} is not a number of seconds in (0, 86400)", START_TIMEOUT_ENV
        )
    return value


def start_agent(
    name: str,
    token_file: Path,
    host: str = "127.0.0.1",
    timeout_s: float | None = None,
    extra_args: tuple[str, ...] = (),
    netns: str | None = None,
) -> tuple[subprocess.Popen[str], int]:
    """Start one agent; returns the process and the port it listens on. ``timeout_s``:
    how long it may take to print that it listens [``start_timeout_s()``]."""
    if timeout_s is None:
        timeout_s = start_timeout_s()
    cmd = [
        sys.executable,
        "-m",
        "netqual",
        "agent",
        "--listen",
        f"{host}:0",
        "--name",
        name,
        "--token-file",
        str(token_file),
        *extra_args,
    ]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        if m := _READY.search(line):
            return proc, int(m.group(2))
    proc.kill()
    proc.wait()
    raise AgentStartError(f"agent {name} did not start within {timeout_s:g} s")


def stop_agents(procs: list[subprocess.Popen[str]], timeout_s: float = 5.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    end = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if p.stdout:
            p.stdout.close()


@contextlib.contextmanager
def local_agents(count: int, host: str = "127.0.0.1") -> Iterator[tuple[list[Node], Path]]:
    """Start ``count`` agents; yields their nodes and the token file; stops them on exit."""
    with tempfile.TemporaryDirectory(prefix="netqual-demo-") as tmp:
        token_file = Path(tmp) / "token"
        write_token(token_file)
        procs: list[subprocess.Popen[str]] = []
        nodes: list[Node] = []
        try:
            for i in range(1, count + 1):
                proc, port = start_agent(f"node{i}", token_file, host)
                procs.append(proc)
                nodes.append(
                    Node(
                        name=f"node{i}",
                        address=host,
                        port=port,
                        role=Role.ANY,
                        rack="local",
                        labels={"site": "local"},
                    )
                )
            yield nodes, token_file
        finally:
            stop_agents(procs)
