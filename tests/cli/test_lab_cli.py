"""`netqual lab` as a user sees it when the lab cannot run (no root needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from netqual.base.errors import EXIT_RUNTIME
from netqual.cli import main
from netqual.lab import system


@pytest.mark.parametrize("command", [["lab", "up"], ["lab", "down"]])
def test_not_root_gets_a_clear_message_and_exit_3(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NETQUAL_WIDTH", "100")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(command) == EXIT_RUNTIME
    err = capsys.readouterr().err
    assert "error: the lab needs root" in err
    assert "sudo" in err


def test_status_without_a_lab_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NETQUAL_WIDTH", "100")
    assert main(["lab", "status", "--state-dir", str(tmp_path)]) == 1
    assert f"no lab in {tmp_path}" in capsys.readouterr().out


def test_bad_topology_file_exits_2_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NETQUAL_WIDTH", "200")
    monkeypatch.setattr(system, "unavailable_reason", lambda: None)
    topo = tmp_path / "t.toml"
    topo.write_text('[lab]\nmtu = "big"\n')
    assert main(["lab", "up", "--topology", str(topo), "--state-dir", str(tmp_path)]) == 2
    assert "t.toml: lab.mtu: expected a number, got 'big'" in capsys.readouterr().err
