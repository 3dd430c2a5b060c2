"""Output directories someone else can touch: a run directory swapped for a symlink (or
another directory) between netqual's check and its write, and a directory netqual may not
write, hit by a real unprivileged user (the suite runs as root, which EACCES never stops).

docs/security.md, "Output files", says what is protected; ``netqual/files/outfiles.py`` is the one
place that creates files."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest
from agentpool import AgentPool, cli_env
from cli_helpers import finished_paths
from eventually import eventually
from factories import make_results, write_results
from peers import SHORT, write_inventory

from netqual.base.errors import OutputError
from netqual.files.outfiles import (
    forget_checked,
    make_out_dir,
    new_run_dir,
    open_append,
    write_atomic,
    write_text_atomic,
)

NOBODY = 65534


def _swap(run: Path, target: Path) -> Path:
    """What a hostile owner of run's parent does: move the run directory away and put a
    symlink to ``target`` at its name. Returns where the real directory went."""
    moved = run.with_name(run.name + ".moved")
    run.rename(moved)
    run.symlink_to(target, target_is_directory=True)
    return moved


@pytest.mark.parametrize("made_by", ["make_out_dir", "new_run_dir"])
def test_a_run_directory_swapped_for_a_symlink_is_never_written_through(
    tmp_path: Path, made_by: str
) -> None:
    if made_by == "make_out_dir":
        run = tmp_path / "run1"
        make_out_dir(run)
    else:
        run = new_run_dir("netqual-run", tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    _swap(run, victim)
    with pytest.raises(OutputError, match="no longer the directory netqual checked") as err:
        write_text_atomic(run / "results.json", "{}")
    assert err.value.source == str(run)
    with (
        pytest.raises(OutputError, match="no longer the directory netqual checked"),
        open_append(run / "results.jsonl", new=True),
    ):
        pass
    assert list(victim.iterdir()) == []


def test_a_run_directory_replaced_by_another_of_ours_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run1"
    make_out_dir(run)
    other = tmp_path / "other"
    other.mkdir()
    run.rename(tmp_path / "run1.moved")
    other.rename(run)  # same name, a real directory of this user, but not the one checked
    with pytest.raises(OutputError, match=r"no longer the directory .*another directory"):
        write_text_atomic(run / "results.json", "{}")
    with pytest.raises(OutputError, match="another directory"):
        make_out_dir(run)  # checking it again does not adopt the impostor
    assert list(run.iterdir()) == []
    # a later command (cli.main forgets what the last one checked) checks it afresh, as a
    # process of its own would: the same --out, removed and made again, is its own
    forget_checked()
    make_out_dir(run)
    write_text_atomic(run / "results.json", "{}")
    assert [p.name for p in run.iterdir()] == ["results.json"]


def test_a_swap_during_the_write_does_not_redirect_the_file(tmp_path: Path) -> None:
    """The temporary file and the rename both go through one descriptor of the directory
    opened before the swap: the file lands in the directory that was checked."""
    run = tmp_path / "run1"
    make_out_dir(run)
    victim = tmp_path / "victim"
    victim.mkdir()
    moved: list[Path] = []

    def write(f: TextIO) -> None:
        f.write("measured")
        moved.append(_swap(run, victim))  # between the temporary file and the rename

    write_atomic(run / "results.json", write)
    assert list(victim.iterdir()) == []
    assert (moved[0] / "results.json").read_text() == "measured"
    assert [p.name for p in moved[0].iterdir()] == ["results.json"]  # no temporary left


def test_a_symlinked_directory_the_user_names_is_still_followed(tmp_path: Path) -> None:
    """Only run directories netqual checked are pinned: `report --html link/r.html`
    writes where the user's own symlink points, as before."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    write_text_atomic(tmp_path / "link" / "r.html", "<html>")
    assert (real / "r.html").read_text() == "<html>"


# -- EACCES, as a real unprivileged user --------------------------------------------------
@contextlib.contextmanager
def _nobody_dir() -> Iterator[Path]:
    """A directory owned by ``nobody`` that ``nobody`` can reach (pytest's tmp_path sits
    under a root-only directory)."""
    base = Path(tempfile.mkdtemp(prefix="netqual-eacces-"))
    try:
        base.chmod(0o755)
        os.chown(base, NOBODY, NOBODY)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


# setpriv drops every capability at the exec (the CLI runs with CapEff 0: EACCES is real),
# yet may still exec an interpreter that sits below a directory nobody cannot enter.
SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _as_nobody(*args: str, cwd: Path, wait: bool = True) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*SETPRIV, sys.executable, "-m", "netqual", *args],
        cwd=cwd,
        env={**cli_env(), "HOME": str(cwd)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if wait:
        proc.wait(timeout=180)
    return proc


def _nobody_problem() -> str | None:
    """Why this host cannot run the CLI as nobody (None when it can)."""
    if os.geteuid() != 0:
        return "switching to nobody needs root"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    probe = [*SETPRIV, sys.executable, "-c", "import os, netqual.cli; print(os.geteuid())"]
    r = subprocess.run(
        probe, env=cli_env(), cwd="/", capture_output=True, text=True, timeout=120, check=False
    )
    if r.returncode != 0 or r.stdout.strip() != str(NOBODY):
        return f"nobody cannot run this interpreter and checkout: {r.stderr.strip()[-200:]}"
    return None


def _own(path: Path) -> None:
    os.chown(path, NOBODY, NOBODY)


@pytest.fixture(scope="module")
def as_nobody() -> None:
    if (problem := _nobody_problem()) is not None:
        pytest.skip(problem)


@pytest.mark.usefixtures("as_nobody")
def test_an_unwritable_html_is_refused_up_front_naming_the_file() -> None:
    with _nobody_dir() as base:
        write_results(base / "results.json", make_results(8))
        _own(base / "results.json")
        before = (base / "results.json").read_bytes()
        shut = base / "shut"
        shut.mkdir(mode=0o755)  # root's: nobody may read it, not create files in it
        p = _as_nobody("report", "results.json", "--html", "shut/r.html", cwd=base)
        err = p.stderr.read() if p.stderr else ""
        assert p.returncode == 2, err
        # Found before anything is computed (os.access as nobody, not root's answer).
        assert (
            err == "error: command line: --html: cannot create shut/r.html: shut is not writable\n"
        )
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert list(shut.iterdir()) == []  # no temporary file
        assert (base / "results.json").read_bytes() == before


@pytest.mark.usefixtures("as_nobody")
def test_a_run_that_loses_write_permission_keeps_every_pair_and_resumes(
    agents: AgentPool,
) -> None:
    """`netqual run` as nobody; once its first pair is on disk the out directory turns
    read-only (as a quota, a remount or an admin's chmod would): exit 2, one line naming
    results.json and the resume command; the pairs measured stay in results.jsonl, and the
    printed --resume measures only the rest."""
    started = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    with _nobody_dir() as base:
        token = base / "token"
        shutil.copyfile(agents.token_file, token)
        token.chmod(0o600)
        _own(token)
        inventory = base / "inventory.toml"
        write_inventory(inventory, [(a.name, a.port) for a in started], token)
        out = base / "out"
        out.mkdir()
        _own(out)
        args = ["run", "inventory.toml", "--out", "out", *SHORT, "--progress", "plain"]
        # long enough to act mid-run: 0.15-0.4 s a pair here, the chmod within 5 ms
        args[args.index("--iterations") + 1] = "5000"
        proc = _as_nobody(*args, cwd=base, wait=False)
        jsonl = out / "results.jsonl"
        eventually(
            lambda: jsonl.is_file() and jsonl.stat().st_size > 0,
            within_s=120,
            every_s=0.005,
            unless=lambda: proc.poll() is not None,
            what="a record in results.jsonl while the run runs",
        )
        out.chmod(0o555)
        _, err = proc.communicate(timeout=180)
        assert out.stat().st_mode & 0o777 == 0o555, f"the run ended first: {err}"
        assert proc.returncode == 2, err
        said = " ".join(err.split())
        assert "error: out/results.json: cannot write: Permission denied" in said, err
        assert "the pairs measured so far are kept" in said and "Traceback" not in err
        assert said.endswith("--resume") and "--out out" in said
        finished = [(r["src"], r["dst"]) for r in finished_paths(jsonl)]
        assert finished and not [p for p in out.iterdir() if p.name.endswith(".tmp")]

        out.chmod(0o755)
        again = _as_nobody(*args, "--resume", cwd=base)
        rerr = again.stderr.read() if again.stderr else ""
        assert again.returncode == 0, rerr
        results = json.loads((out / "results.json").read_text())
        pairs = [(p["src"], p["dst"]) for p in results["paths"]]
        assert len(pairs) == len(set(pairs)) == 3
        done = [(r["src"], r["dst"]) for r in finished_paths(jsonl)]
        assert sorted(done) == sorted(pairs)  # each pair finished exactly once
        assert done[: len(finished)] == finished  # the first run's pairs were not re-measured
