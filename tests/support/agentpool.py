"""Real agent processes on 127.0.0.1 for tests (the ``agents`` fixture wraps a pool), and
the environment every netqual child process of a test gets."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from paths import REPO

from netqual.base.auth import write_token
from netqual.run.localagents import start_timeout_s

_READY = re.compile(r"listening on (\S+):(\d+)")


def cli_env(**extra: str) -> dict[str, str]:
    """The environment a netqual subprocess gets: this checkout, pinned width, no token."""
    env = {k: v for k, v in os.environ.items() if k != "NETQUAL_TOKEN"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env["NETQUAL_WIDTH"] = "100"
    env.update(extra)
    return env


@dataclass
class AgentProc:
    name: str
    proc: subprocess.Popen[str]
    port: int
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None


class AgentPool:
    """Starts ``netqual agent`` subprocesses; ``close`` stops every one of them."""

    def __init__(self, workdir: Path, token_file: Path) -> None:
        self.workdir = workdir
        self.token_file = token_file
        self.agents: list[AgentProc] = []

    def start(
        self, name: str, *args: str, token: bool = True, timeout_s: float | None = None
    ) -> AgentProc:
        return self.start_many([(name, *args)], token=token, timeout_s=timeout_s)[0]

    def start_many(
        self, specs: list[tuple[str, ...]], token: bool = True, timeout_s: float | None = None
    ) -> list[AgentProc]:
        """Start agents concurrently (``(name, *extra args)`` each); wait until all listen.

        The limit defaults to the one netqual's own local agents get (60 s, or
        $NETQUAL_AGENT_START_S): a loaded machine takes tens of seconds to start Python."""
        started = [self._launch(spec[0], spec[1:], token) for spec in specs]
        end = time.monotonic() + (start_timeout_s() if timeout_s is None else timeout_s)
        for agent in started:
            self._wait_ready(agent, end)
        return started

    def _launch(self, name: str, args: tuple[str, ...], token: bool) -> AgentProc:
        log = self.workdir / f"agent-{name}.log"
        cmd = [sys.executable, "-m", "netqual", "agent", "--listen", "127.0.0.1:0"]
        cmd += ["--name", name, *(["--token-file", str(self.token_file)] if token else []), *args]
        with log.open("w") as err:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=cli_env()
            )
        agent = AgentProc(name, proc, 0, log)
        self.agents.append(agent)
        return agent

    @staticmethod
    def _wait_ready(agent: AgentProc, end: float) -> None:
        stdout = agent.proc.stdout
        assert stdout is not None
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([stdout], [], [], left)
            line = stdout.readline() if ready else ""
            if not line:
                break
            if m := _READY.search(line):
                agent.port = int(m.group(2))
                return
        raise AssertionError(f"agent {agent.name} did not start: {agent.stderr()}")

    def close(self) -> None:
        for a in self.agents:
            if a.alive():
                a.proc.send_signal(signal.SIGTERM)
        for a in self.agents:
            try:
                a.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                a.proc.kill()
                a.proc.wait()
            if a.proc.stdout:
                a.proc.stdout.close()


def new_token_file(directory: Path) -> Path:
    path = directory / "netqual.token"
    write_token(path)
    return path
