"""Creating output files: the one primitive every writer uses.

A run directory may sit in a shared place (/tmp, a project share). Whoever can write there
could plant a symlink named ``results.json.tmp`` or ``results.jsonl`` and have netqual write
through it, or pre-create the directory a run is about to use. So:

- a file is written to a new temporary name (random, created with O_EXCL | O_NOFOLLOW:
  a planted name is never followed) next to its destination, then renamed over it (a
  rename replaces a symlink, it does not write through it): ``write_atomic``;
- an appended file (results.jsonl) is opened with O_NOFOLLOW and must be a regular file
  of ours: ``open_append``;
- an output directory that is a symlink or belongs to another user is refused:
  ``check_out_dir``; a default run directory gets an unpredictable name and is created
  exclusively: ``new_run_dir``;
- ENOSPC, EACCES and the like become one ``OutputError`` line naming the file, with the
  temporary file removed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from netqual.errors import OutputError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _problem(err: OSError) -> str:
    return err.strerror or str(err)


def _check_ours(path: Path, directory: bool) -> None:
    """Refuse (exit 2) a path that is a symlink, of the other kind, or another user's; an
    absent one is fine."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except OSError as err:
        raise OutputError(str(path), _problem(err)) from err
    if stat.S_ISLNK(st.st_mode):
        raise OutputError(str(path), "is a symlink; refusing to write through it")
    if directory and not stat.S_ISDIR(st.st_mode):
        raise OutputError(str(path), "is not a directory")
    if not directory and not stat.S_ISREG(st.st_mode):
        raise OutputError(str(path), "is not a regular file")
    if st.st_uid != os.geteuid():
        raise OutputError(str(path), f"belongs to another user (uid {st.st_uid})")


def check_out_dir(directory: Path) -> None:
    """Refuse (exit 2) an output directory that is a symlink or not ours; an absent one is
    fine (it is created by ``make_out_dir``)."""
    _check_ours(directory, directory=True)


def make_out_dir(directory: Path) -> None:
    """Create the output directory (and parents) if absent, then check it is ours."""
    check_out_dir(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(str(directory), _problem(err)) from err
    check_out_dir(directory)


def new_run_dir(prefix: str, where: Path = Path()) -> Path:
    """``prefix-<UTC date-time>-<random>``, created here and now: nobody can plant it in
    advance, and two runs started in the same second never share it."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    for _ in range(16):
        path = where / f"{prefix}-{stamp}-{secrets.token_hex(3)}"
        try:
            path.mkdir(mode=0o755)
        except FileExistsError:
            continue
        except OSError as err:
            raise OutputError(str(path), _problem(err)) from err
        return path
    raise OutputError(str(where), "could not create a new run directory")


def check_own_file(path: Path) -> None:
    """Refuse (exit 2) a file netqual would read back and append to (results.jsonl) when it
    is a symlink, not a regular file, or another user's; an absent one is fine."""
    _check_ours(path, directory=False)


def _refuse_foreign(path: Path) -> None:
    """An existing destination must be a regular file of ours (or a symlink, which the
    rename replaces without following)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except OSError as err:
        raise OutputError(str(path), _problem(err)) from err
    if not stat.S_ISLNK(st.st_mode) and not stat.S_ISREG(st.st_mode):
        raise OutputError(str(path), "exists and is not a regular file")


def write_atomic(path: Path, write: Callable[[TextIO], object], *, sync: bool = False) -> None:
    """Write ``path`` through a new temporary file beside it, then rename: a reader never
    sees half a file, a planted name is never followed, a failure leaves nothing behind."""
    _refuse_foreign(path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            write(f)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise OutputError(str(path), f"cannot write: {_problem(err)}") from err
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text_atomic(path: Path, text: str, *, sync: bool = False) -> None:
    write_atomic(path, lambda f: f.write(text), sync=sync)


@contextlib.contextmanager
def open_append(path: Path, *, new: bool) -> Iterator[TextIO]:
    """results.jsonl: ``new`` creates it (replacing a regular file of ours, never writing
    through a symlink); else it must already be a regular file of ours, opened to append
    without following a symlink."""
    if new:
        _refuse_foreign(path)
        with contextlib.suppress(FileNotFoundError):
            if path.is_symlink() or path.exists():
                path.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    else:
        flags = os.O_WRONLY | os.O_APPEND

    def opener(name: str, _: int) -> int:
        fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC, 0o644)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            os.close(fd)
            raise OutputError(str(path), "is not a regular file of this user")
        return fd

    try:
        f = open(path, "a", encoding="utf-8", opener=opener)  # noqa: SIM115  (closed below)
    except OSError as err:
        if os.path.islink(path):
            raise OutputError(str(path), "is a symlink; refusing to write through it") from err
        raise OutputError(str(path), f"cannot open: {_problem(err)}") from err
    with f:
        yield f
