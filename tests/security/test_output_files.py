"""Output files are created safely (netqual.files.outfiles): nothing is written through a planted
symlink, a symlinked or another user's --out or results.jsonl is refused with exit 2,
default run directories cannot be guessed or shared, and a full disk is one line that
leaves no temporary file and says how to resume."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from agentpool import AgentPool, cli_env
from cli_helpers import ROOT
from e2e_cli import netqual_here
from factories import make_results, write_results
from peers import SHORT, write_inventory

from netqual.base.errors import OutputError
from netqual.files.outfiles import check_out_dir, new_run_dir, open_append, write_text_atomic


def cli(*args: str, cwd: Path, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # Python ignores SIGXFSZ: a write past the limit fails with EFBIG
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "netqual", *args],
        cwd=cwd,
        env={**cli_env(), "NETQUAL_WIDTH": "100", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=limit,
    )


def test_a_symlink_at_the_destination_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "report.html").symlink_to(victim)
    write_text_atomic(tmp_path / "report.html", "<html>")
    assert victim.read_text() == "precious"
    assert not (tmp_path / "report.html").is_symlink()
    assert (tmp_path / "report.html").read_text() == "<html>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "victim"]


def test_appending_never_follows_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "results.jsonl").symlink_to(victim)
    with (
        pytest.raises(OutputError, match="symlink"),
        open_append(tmp_path / "results.jsonl", new=False),
    ):
        pass
    with open_append(tmp_path / "results.jsonl", new=True) as f:  # a new run replaces the link
        f.write("{}\n")
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "results.jsonl").read_text() == "{}\n"


def test_default_run_directories_differ_within_one_second(tmp_path: Path) -> None:
    made = {new_run_dir("netqual-run", tmp_path) for _ in range(50)}
    assert len(made) == 50
    assert all(p.is_dir() and p.name.startswith("netqual-run-") for p in made)
    assert all(len(p.name.rsplit("-", 1)[1]) == 6 for p in made)  # 24 random bits


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_out_dir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "theirs"
    d.mkdir()
    os.chown(d, 65534, 65534)
    with pytest.raises(OutputError, match="another user"):
        check_out_dir(d)


def test_run_refuses_a_symlinked_out_or_results_jsonl(agents: AgentPool, tmp_path: Path) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, [(a.name, a.port) for a in started], agents.token_file)
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    r = netqual_here("run", str(inventory), "--out", "linked", *SHORT, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "linked: is a symlink" in r.stderr and "Traceback" not in r.stderr
    assert list(real.iterdir()) == []

    out = tmp_path / "out"
    assert netqual_here("run", str(inventory), "--out", "out", *SHORT, cwd=tmp_path).returncode == 0
    victim = tmp_path / "victim.jsonl"
    victim.write_text("precious\n")
    (out / "results.jsonl").unlink()
    (out / "results.jsonl").symlink_to(victim)
    for extra in (["--resume"], ["--force"]):
        r = netqual_here("run", str(inventory), "--out", "out", *SHORT, *extra, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert "results.jsonl: is a symlink" in r.stderr
    assert victim.read_text() == "precious\n"


def test_a_full_disk_is_one_line_without_temporary_files(tmp_path: Path) -> None:
    write_results(tmp_path / "results.json", make_results(8))
    r = cli("report", "results.json", "--html", "r.html", cwd=tmp_path, fsize=4096)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: r.html: cannot write: File too large")
    assert len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


APPEND_PAST_THE_LIMIT = """
import errno, sys
from pathlib import Path
from netqual.base.errors import OutputError
from netqual.files.outfiles import open_append
out = Path(sys.argv[1])
try:  # a line flushed past the limit: the error raised in the block is the one that leaves
    with open_append(out / "flushed.jsonl", new=True) as f:
        f.write("x" * 5000)
        f.flush()
except OSError as err:
    print("flushed", errno.errorcode[err.errno], err.__context__)
try:  # a line still buffered when the file closes: closing says which file
    with open_append(out / "closed.jsonl", new=True) as f:
        f.write("x" * 5000)
except OutputError as err:
    print("closed", err)
"""


def test_appending_past_the_file_size_limit_raises_one_error_naming_the_file(
    tmp_path: Path,
) -> None:
    """results.jsonl's writer on a full disk: the error from the write that failed is the
    one that leaves (its unwritten line failing again as the file closed once replaced it:
    a traceback instead of "cannot write" and the command to resume), and a failure only
    at closing names the file, not its descriptor ("4: cannot write")."""
    r = subprocess.run(
        [sys.executable, "-c", APPEND_PAST_THE_LIMIT, str(tmp_path)],
        env={**cli_env(), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000)),
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines() == [
        "flushed EFBIG None",
        f"closed {tmp_path / 'closed.jsonl'}: cannot write: File too large",
    ]


def test_a_run_that_runs_out_of_space_says_how_to_resume(agents: AgentPool, tmp_path: Path) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, [(a.name, a.port) for a in started], agents.token_file)
    r = cli("run", str(inventory), "--out", "out", *SHORT, cwd=tmp_path, fsize=3000)
    assert r.returncode == 2, r.stderr
    assert "cannot write: File too large" in r.stderr and "Traceback" not in r.stderr
    said = " ".join(r.stderr.split())
    assert "then resume with netqual run" in said and said.endswith("--resume")
    assert "--out out" in said
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]
    again = netqual_here("run", str(inventory), "--out", "out", *SHORT, "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # the command it printed finishes the run
    assert (tmp_path / "out" / "results.json").is_file()
