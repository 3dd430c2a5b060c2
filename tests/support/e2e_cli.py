"""Helpers shared by tests (from test_agent_e2e.py)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from agentpool import AgentProc, cli_env


def write_inventory(path: Path, agents: list[AgentProc], token_file: Path) -> None:
    """An inventory as docs/inventory.md documents it (agent ports were picked by the kernel);
    the token file by its name beside the inventory, by its full path elsewhere (agents a
    module shares)."""
    token = token_file.name if token_file.parent == path.parent else str(token_file)
    lines = ["[defaults]", "port = 18515", f'token_file = "{token}"', ""]
    for i, a in enumerate(agents):
        lines += [
            "[[node]]",
            f'name = "{a.name}"',
            'address = "127.0.0.1"',
            f"port = {a.port}",
            f'role = "{"storage" if i == len(agents) - 1 else "compute"}"',
            f'rack = "r{1 + i // 2}"',
            f'labels = {{ leaf = "leaf{1 + i // 2}", pod = "p1" }}',
            "",
        ]
    path.write_text("\n".join(lines))


def netqual_cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netqual", *args]
    return subprocess.run(
        cmd, env=cli_env(), capture_output=True, text=True, timeout=timeout_s, check=False
    )


@contextlib.contextmanager
def _child_env() -> Iterator[None]:
    """This process's environment as ``cli_env`` makes a child's: width 100, no token."""
    saved = {k: os.environ.get(k) for k in ("NETQUAL_TOKEN", "NETQUAL_WIDTH")}
    os.environ.pop("NETQUAL_TOKEN", None)
    os.environ["NETQUAL_WIDTH"] = "100"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def netqual_here(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``netqual_cli`` without the process: the `netqual` script's entry point in this
    process, its stdout and stderr caught, exit code returned. For a command whose process
    is not what the test checks (no signal, kill, timing, or log of that process): a child
    costs ~0.5 s of CPU to start on this host, the command's own work is the same."""
    from netqual.cli import main
    from netqual.files import outfiles

    # a new process knows no run directory yet: one checked by an earlier command here
    # (the same --out, removed and made again since) is not this command's
    outfiles._checked.clear()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_child_env())
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        rc = main(list(args))
    return subprocess.CompletedProcess(["netqual", *args], rc, out.getvalue(), err.getvalue())
