"""Helpers shared by tests (from test_agent_e2e.py)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import warnings
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
    process, with what a process of its own would show on stderr (warnings, log records of
    WARNING and above, as Python prints them where nothing configured logging), exit code
    returned; an exception main() does not turn into an exit code fails the test. For a
    command whose process is not what the test checks (no signal, kill, timing, or log of
    that process): a child costs ~0.5 s of CPU to start on this host, the command's own
    work is the same."""
    from netqual.cli import main  # main starts knowing no run directory, as a process does

    out, err = io.StringIO(), io.StringIO()
    last_resort = logging.StreamHandler(err)  # logging.lastResort, to this stderr
    last_resort.setLevel(logging.WARNING)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_child_env())
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        logging.getLogger().addHandler(last_resort)
        stack.callback(logging.getLogger().removeHandler, last_resort)
        rc = main(list(args))
    for w in caught:  # those Python's default filters show outside __main__
        if not issubclass(w.category, _HIDDEN_WARNINGS):
            err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    return subprocess.CompletedProcess(["netqual", *args], rc, out.getvalue(), err.getvalue())


_HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
