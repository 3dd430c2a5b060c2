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
- a directory above the run's can belong to someone else, who could swap the run
  directory for a symlink (or another directory) after it was checked. So every file is
  created, renamed and appended *relative to a descriptor of its directory* (``dir_fd``),
  opened once per write with O_DIRECTORY | O_NOFOLLOW; a run directory, once checked, is
  remembered by device and inode (``_checked``), and a write into one that is no longer
  that very directory is refused: ``_open_parent``;
- a database file that a library opens by name (DuckDB's store and its write-ahead log)
  cannot be opened relative to a descriptor or without following a symlink: its
  directory must be one nobody else can write to (ours, not group- or world-writable,
  sticky or not: a sticky directory still lets anyone create the log's name first), and
  the files, when present, regular files of ours: ``check_private_dir``,
  ``check_own_file``;
- files are created with mode 0666 less the umask (no mode is forced), except private
  ones (``private=True``: a campaign's store, tokens), 0600;
- ENOSPC, EACCES and the like become one ``OutputError`` line naming the file, with the
  temporary file removed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from netqual.base.errors import OutputError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

# Run directories this process checked (absolute path -> (st_dev, st_ino)): writes into
# them must land in that very directory, whatever its path resolves to later.
_checked: dict[str, tuple[int, int]] = {}


def forget_checked() -> None:
    """A new command starts knowing no run directory: one an earlier command of this
    process checked (the same --out, removed and made again since) is not this one's.
    ``cli.main`` calls it, so a command run in-process (tests, a library caller) checks
    its run directories as a process of its own does."""
    _checked.clear()


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
    _remember(directory)


def _remember(directory: Path) -> None:
    """Check the directory through a descriptor (no symlink followed, ours) and remember
    which one it is: later writes go into this one or nowhere. A directory checked before
    in this process must still be the same one."""
    os.close(_open_checked(directory, strict=True))


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
        _remember(path)
        return path
    raise OutputError(str(where), "could not create a new run directory")


def check_private_dir(directory: Path) -> None:
    """Refuse (exit 2) a directory where another user could plant or swap a file before a
    library opens it by name: a symlink's target is checked, it must be ours and writable
    by nobody else. An absent one is fine (``make_out_dir`` creates it)."""
    try:
        st = directory.stat()
    except FileNotFoundError:
        return
    except OSError as err:
        raise OutputError(str(directory), _problem(err)) from err
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(str(directory), "is not a directory")
    if st.st_uid != os.geteuid():
        raise OutputError(
            str(directory),
            f"belongs to another user (uid {st.st_uid}), who could plant the files netqual "
            "opens there; use a directory of your own",
        )
    if st.st_mode & 0o022:
        raise OutputError(
            str(directory),
            f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o}), who could plant the "
            f"files netqual opens there; chmod go-w {directory}",
        )


def check_own_file(path: Path) -> None:
    """Refuse (exit 2) a file netqual would read back and append to (results.jsonl) when it
    is a symlink, not a regular file, or another user's; an absent one is fine."""
    _check_ours(path, directory=False)


_REPLACED = "is no longer the directory netqual checked"


def _open_dir(directory: Path, checked: bool) -> int:
    """A descriptor of ``directory``. A checked run directory is opened without following a
    symlink and must be a directory of ours; any other directory is opened as given (the
    user named it, symlinks included)."""
    flags = os.O_RDONLY | _DIRECTORY | _CLOEXEC | (_NOFOLLOW if checked else 0)
    try:
        fd = os.open(directory, flags)
    except OSError as err:
        if checked and err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OutputError(
                str(directory), f"{_REPLACED} (now a symlink or a file); not written"
            ) from err
        raise OutputError(str(directory), _problem(err)) from err
    st = os.fstat(fd)
    if checked and st.st_uid != os.geteuid():
        os.close(fd)
        raise OutputError(str(directory), f"belongs to another user (uid {st.st_uid})")
    return fd


def _open_checked(directory: Path, *, strict: bool = False) -> int:
    """A descriptor of ``directory``; a run directory checked before must still be that
    very one. ``strict``: check it as a run directory and remember it."""
    key = os.path.abspath(directory)
    want = _checked.get(key)
    fd = _open_dir(directory, strict or want is not None)
    st = os.fstat(fd)
    if want is not None and (st.st_dev, st.st_ino) != want:
        os.close(fd)
        raise OutputError(str(directory), f"{_REPLACED} (now another directory); not written")
    if strict:
        _checked[key] = (st.st_dev, st.st_ino)
    return fd


def _open_parent(path: Path) -> int:
    """The descriptor every write of ``path`` goes through (see the module's docstring)."""
    return _open_checked(path.parent)


def _refuse_foreign(path: Path, dfd: int) -> None:
    """An existing destination must be a regular file of ours (or a symlink, which the
    rename replaces without following)."""
    try:
        st = os.stat(path.name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as err:
        raise OutputError(str(path), _problem(err)) from err
    if not stat.S_ISLNK(st.st_mode) and not stat.S_ISREG(st.st_mode):
        raise OutputError(str(path), "exists and is not a regular file")


def _new_temp(path: Path, dfd: int) -> tuple[int, str]:
    """A new file with a random name beside ``path`` (O_EXCL | O_NOFOLLOW: a planted name is
    never followed or reused)."""
    for _ in range(16):
        name = f".{path.name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        try:
            return os.open(name, flags, 0o600, dir_fd=dfd), name
        except FileExistsError:
            continue
    raise OutputError(str(path), "could not create a temporary file beside it")


def _file_mode(private: bool) -> int:
    """0600 for a private file; else 0666 less the process's umask (as open(2) would)."""
    if private:
        return 0o600
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(
    path: Path,
    write: Callable[[TextIO], object],
    *,
    sync: bool = False,
    private: bool = False,
) -> None:
    """Write ``path`` through a new temporary file beside it, then rename: a reader never
    sees half a file, a planted name is never followed, a failure leaves nothing behind.
    Created and renamed relative to one descriptor of the directory: a directory swapped
    meanwhile does not redirect the file. Mode: the umask's, or 0600 when ``private``."""
    dfd = _open_parent(path)
    tmp: str | None = None
    try:
        _refuse_foreign(path, dfd)
        fd, tmp = _new_temp(path, dfd)
        os.fchmod(fd, _file_mode(private))
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            write(f)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
        if sync:
            os.fsync(dfd)  # the rename itself survives a crash
    except OSError as err:
        raise OutputError(str(path), f"cannot write: {_problem(err)}") from err
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
        os.close(dfd)


def write_text_atomic(path: Path, text: str, *, sync: bool = False, private: bool = False) -> None:
    write_atomic(path, lambda f: f.write(text), sync=sync, private=private)


@contextlib.contextmanager
def open_append(path: Path, *, new: bool) -> Iterator[TextIO]:
    """results.jsonl: ``new`` creates it (replacing a regular file of ours, never writing
    through a symlink); else it must already be a regular file of ours, opened to append
    without following a symlink. Opened relative to its directory's descriptor."""
    dfd = _open_parent(path)
    try:
        fd = _open_for_append(path, dfd, new)
    finally:
        os.close(dfd)
    f = os.fdopen(fd, "a", encoding="utf-8")
    f.buffer.raw.name = str(path)  # type: ignore[attr-defined]  # errors name the file, not fd 4
    try:
        yield f
    except BaseException:
        # A write that failed (no space, a file size limit) left its line in the buffer and
        # closing tries it again: the error on its way already says so (its traceback once
        # replaced "cannot write: File too large" and the command to resume).
        with contextlib.suppress(OSError):
            f.close()
        raise
    try:
        f.close()
    except OSError as err:
        raise OutputError(str(path), f"cannot write: {_problem(err)}") from err


def _open_for_append(path: Path, dfd: int, new: bool) -> int:
    name = path.name
    if new:
        _refuse_foreign(path, dfd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dfd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    else:
        flags = os.O_WRONLY | os.O_APPEND
    try:
        fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=dfd)  # less the umask
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OutputError(str(path), "is a symlink; refusing to write through it") from err
        raise OutputError(str(path), f"cannot open: {_problem(err)}") from err
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise OutputError(str(path), "is not a regular file of this user")
    return fd
