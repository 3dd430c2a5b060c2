"""Where the shared agent token comes from: --token-file, else NETQUAL_TOKEN."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from netqual.errors import InputError

TOKEN_ENV = "NETQUAL_TOKEN"
MIN_TOKEN_BYTES = 16


def load_token(token_file: Path | None, insecure: bool = False) -> bytes | None:
    """Return the token bytes, or None when running insecure.

    Raises InputError naming the file when it is missing, empty, too short or readable
    by others (a token anyone on the node can read authenticates nothing).
    """
    if token_file is not None:
        source = str(token_file)
        try:
            raw = token_file.read_bytes()
            mode = token_file.stat().st_mode
        except OSError as err:
            raise InputError(source, f"cannot read token file: {err.strerror or err}") from err
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InputError(source, "token file is readable by group/others; chmod 600 it")
        token = raw.strip()
    elif os.environ.get(TOKEN_ENV):
        source = f"${TOKEN_ENV}"
        token = os.environ[TOKEN_ENV].strip().encode()
    else:
        if insecure:
            return None
        raise InputError(
            "command line",
            "no token: pass --token-file FILE or set NETQUAL_TOKEN "
            "(or --insecure to run without authentication)",
            field="--token-file",
        )
    if len(token) < MIN_TOKEN_BYTES:
        raise InputError(source, f"token is shorter than {MIN_TOKEN_BYTES} bytes")
    return token


def write_token(path: Path) -> None:
    """Create a new random token file readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(path, 0o600)
