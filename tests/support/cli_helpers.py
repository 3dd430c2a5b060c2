"""Run the CLI as a user does: a subprocess with the console width pinned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import GOLDEN, REPO

ROOT = REPO


def netqual(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NETQUAL_WIDTH": "100", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "netqual", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )


def finished_paths(jsonl: Path) -> list[dict[str, Any]]:
    """The finished pairs of a results.jsonl (bare path objects), leaving out its other
    record kinds (a pair's ping-pong, the interference sample and its alone paths)."""
    docs = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    return [d for d in docs if "record" not in d]


def check_golden(name: str, actual: str) -> None:
    """Compare with tests/golden/NAME; UPDATE_GOLDEN=1 rewrites it (review the diff!).

    The one golden switch: every golden-file test goes through here."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8"), f"output differs from {path}"


class Run:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def run_in_process(
    args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Run:
    """The same entry point as the `netqual` script, without a process start (about 1.5 s here)."""
    from netqual.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setenv("NETQUAL_WIDTH", "100")
    capsys.readouterr()
    rc = main(args)
    out, err = capsys.readouterr()
    return Run(rc, out, err)
