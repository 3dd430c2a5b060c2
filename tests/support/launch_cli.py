"""Helpers shared by tests (from test_launch_inventory.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_in_process

from netqual.planning.inventory import load_inventory


def _inv(tmp_path: Path, text: str) -> list[tuple[str, str, int, str, str | None]]:
    path = tmp_path / "generated.toml"
    path.write_text(text)
    inv = load_inventory(path)
    return [(n.name, n.address, n.port, n.role.value, n.rack) for n in inv.nodes]


def _cli(
    tmp_path: Path, mp: pytest.MonkeyPatch, cap: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    r = run_in_process(["inventory", *args], tmp_path, mp, cap)
    return r.returncode, r.stdout, r.stderr.replace("\n", " ")
