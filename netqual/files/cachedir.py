"""netqual's per-user cache: ``$XDG_CACHE_HOME/netqual`` (``~/.cache/netqual``).

What a cache holds may be executed or trusted later (compiled templates, a guest kernel),
so a folder is used only when it is this user's own and nobody else can write to it: a
real directory (not a link), owned by the effective user, not group- or other-writable.
Anything else is no cache at all, never an error: a cache only saves time."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/netqual``, else ``~/.cache/netqual``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netqual"


def private_dir(path: Path) -> Path | None:
    """``path``, created (mode 0700) where missing, when it is a directory this user owns
    and only this user can write to; ``None`` when it is not or cannot be made so."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return None
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    return path
