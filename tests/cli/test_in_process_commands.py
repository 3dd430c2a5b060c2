"""The CLI's entry point called twice in one process (tests, a library caller) behaves as
two processes would: each command checks its own run directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from netqual.base.errors import OutputError
from netqual.cli import main
from netqual.files.outfiles import make_out_dir


def test_a_command_does_not_inherit_the_last_ones_checked_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    make_out_dir(run)  # an earlier command's --out, checked and remembered
    other = tmp_path / "other"
    other.mkdir()
    run.rename(tmp_path / "run.old")
    other.rename(run)  # made again: to that command, not the directory it checked
    with pytest.raises(OutputError, match="another directory"):
        make_out_dir(run)
    assert main(["--version"]) == 0  # a new command
    assert "netqual" in capsys.readouterr().out
    make_out_dir(run)  # checked afresh, as in a process of its own
