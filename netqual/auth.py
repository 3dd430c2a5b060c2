"""Where the shared agent token comes from: --token-file, else NETQUAL_TOKEN."""

from __future__ import annotations

import math
import os
import stat
import string
from pathlib import Path

from netqual.errors import InputError

TOKEN_ENV = "NETQUAL_TOKEN"
MIN_TOKEN_BYTES = 16
MIN_TOKEN_BITS = 128  # 16 random bytes
MAKE_TOKEN = (
    "python3 -c 'import secrets; print(secrets.token_hex(32))' > netqual.token "
    "&& chmod 600 netqual.token"
)
# Alphabets a token is usually drawn from, smallest first: a token using only characters
# of one is credited log2(its size) bits per character, no more.
_ALPHABETS = (
    string.digits,
    string.hexdigits.lower(),
    string.hexdigits.upper() + string.digits,
    string.ascii_lowercase + string.digits,
    string.ascii_letters + string.digits,
    string.ascii_letters + string.digits + "+/=-_",
    string.printable.strip(),
)


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
    if (problem := token_problem(token)) is not None:
        raise InputError(source, f"{problem}; make a good one with: {MAKE_TOKEN}")
    return token


def token_problem(token: bytes) -> str | None:
    """Why ``token`` is too weak to authenticate anything, or None.

    An estimate, not a proof: length times the bits per character of the smallest usual
    alphabet it fits, and a refusal of the trivially repetitive (few distinct characters,
    or one short piece repeated).
    """
    n = len(token)
    if n < MIN_TOKEN_BYTES:
        return f"token is shorter than {MIN_TOKEN_BYTES} bytes"
    for unit in range(1, min(n // 2, 256) + 1):
        if token == (token[:unit] * (n // unit + 1))[:n]:
            return f"token is trivially repetitive (a {unit}-byte piece repeated)"
    if len(set(token)) < 8:
        return f"token is trivially repetitive (only {len(set(token))} distinct characters)"
    text = token.decode("latin-1")
    size = next((len(set(a)) for a in _ALPHABETS if set(text) <= set(a)), 256)
    bits = n * math.log2(size)
    if bits < MIN_TOKEN_BITS:
        return (
            f"token holds about {bits:.0f} bits of entropy, under {MIN_TOKEN_BITS} "
            f"({MIN_TOKEN_BITS // 8} random bytes)"
        )
    return None


def write_token(path: Path) -> None:
    """Create a new random token file readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(path, 0o600)
