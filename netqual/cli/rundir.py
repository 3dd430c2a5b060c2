"""Where a run writes, and how it stops: never over another run's results unless
``--force``, and a Ctrl-C or SIGTERM, in any phase, that leaves a finalised, resumable
partial run and exits 130 or 143."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Annotated, NoReturn

import typer

from netqual.base.errors import NetqualError, RunStopped, UsageError
from netqual.base.interrupts import deliver
from netqual.files.outfiles import check_out_dir, check_own_file, new_run_dir
from netqual.files.rundir import RESULT_FILES, RunDir
from netqual.model.run import RunKind
from netqual.results import load
from netqual.run.resume import recorded_kind
from netqual.table.run import Results

ProgressOpt = Annotated[
    str,
    typer.Option(
        "--progress",
        metavar="MODE",
        help="rich (live bar), plain (a line per phase and at most one per 30 s: for logs) "
        "or none.  [default: rich on a terminal, else plain]",
        show_default=False,
    ),
]


def default_out() -> Path:
    """A fresh directory per run, created now under a name nobody can guess in advance
    (netqual-run-<UTC date-time>-<random>), so a second run never replaces the first."""
    return new_run_dir("netqual-run")


def _writable(path: Path, option: str) -> None:
    """A usage error unless ``path`` can be created: its nearest existing ancestor is a
    directory this user may write (checked before any agent is contacted)."""
    parent = path.parent if path.parent != path else path
    while not parent.exists() and parent.parent != parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(option, f"cannot create {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(option, f"cannot create {path}: {parent} is not writable")


def check_out(out: Path, force: bool, resume: bool, demo_ok: bool = False) -> None:
    """Refuse an --out that cannot hold a run, a symlinked or another user's --out or
    results file (whatever the flags), and a new run over the results of another (exit 2)
    unless forced. ``demo_ok``: a previous demo there may be replaced."""
    check_out_dir(out)
    for name in RESULT_FILES:
        check_own_file(out / name)
    if out.exists() and not out.is_dir():
        raise UsageError("--out", f"{out} is a file, not a directory: choose another --out")
    if out.is_dir() and not os.access(out, os.W_OK | os.X_OK):
        raise UsageError("--out", f"{out} is not writable")
    _writable(out, "--out")
    if resume or force or (demo_ok and holds_demo(out)):
        return
    held = [name for name in RESULT_FILES if (out / name).exists()]
    if held:
        raise UsageError(
            "--out",
            f"{out} already holds a run ({', '.join(held)}): choose another --out, "
            "--resume to continue it, or --force to replace it",
        )


def check_file_out(path: Path, force: bool, option: str) -> None:
    """Refuse to replace an existing file (exit 2) unless forced, and a path that cannot
    be written, before anything is computed."""
    if path.is_dir():
        raise UsageError(option, f"{path} is a directory: name a file")
    if path.exists() and not force:
        raise UsageError(option, f"{path} already exists: choose another file, or --force")
    _writable(path, option)


_OLDER_DEMO_BYTES = 1 << 20  # a demo's results.json is small; a cluster run's may be 500 MB


def holds_demo(out: Path) -> bool:
    """``out`` holds a finished ``netqual demo`` (which the next demo may replace) and no
    other run: its run.json says it is a demo and its results.json exists. A directory of
    an older netqual (run.json without a kind): its results.json says, if demo-sized."""
    results_json = RunDir(out).results_json
    if not results_json.is_file():
        return False
    kind = recorded_kind(out)
    if kind is None:
        try:
            if results_json.stat().st_size > _OLDER_DEMO_BYTES:
                return False
            kind = load(results_json).run.kind
        except (OSError, NetqualError):
            return False
    return kind is RunKind.DEMO


@dataclass
class Caught:
    """The signal that stopped a run, if one did."""

    signum: int | None = None

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports it: SIGINT 130, SIGTERM 143."""
        return 128 + (self.signum or signal.SIGINT)


@contextlib.contextmanager
def interrupts() -> Iterator[Caught]:
    """SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop, kill) stop a run the same way: the
    first raises KeyboardInterrupt where the run is, which finalises what it measured;
    later ones are noted and ignored so that finalising (atomic file writes) completes."""
    caught = Caught()

    def handler(signum: int, frame: FrameType | None) -> None:
        if caught.signum is None:
            caught.signum = signum
            deliver()

    try:
        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: leave signals alone
        yield caught
        return
    try:
        yield caught
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class RunInterrupted(RunStopped):
    """The run was stopped; what it measured is saved and finalised. ``again``: how to
    continue, e.g. 'resume with netqual run ... --resume'."""

    def __init__(self, results: Results, out: Path, again: str, exit_code: int) -> None:
        planned = results.run.pairs_planned
        of = f" of {planned}" if planned else ""
        sched = results.run.schedule or {}
        during = sched.get("interrupted_during")
        where = f" during the {during} phase" if during else ""
        partial = sched.get("pairs_pingpong_only")
        partial = partial if isinstance(partial, int) else 0
        finished = len(results.paths) - partial
        also = f" (and {partial} with ping-pong only)" if partial else ""
        super().__init__(
            f"interrupted{where}: {finished}{of} pairs saved{also} in "
            f"{out / 'results.jsonl'} (report: {out / 'report.html'}, marked incomplete); "
            f"{again}",
            exit_code,
        )


def resume_command(out: Path, resume: bool = True) -> str:
    """The command line that continues this run: the same arguments plus --out and
    --resume (``resume=False``: the same command again, for a demo)."""
    args = [a for a in sys.argv[1:] if a not in ("--resume", "--force")]
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return "netqual " + " ".join([*args, "--resume"] if resume else args)


def abandon_threads_and_exit(code: int) -> NoReturn:
    """Probe threads of an interrupted run may still wait on their agents; the results are
    written, so exit now instead of joining them."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
