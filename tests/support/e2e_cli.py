"""Helpers shared by tests (from test_agent_e2e.py)."""

from __future__ import annotations

import subprocess
import sys
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
