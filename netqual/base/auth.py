"""Where the shared agent token comes from: --token-file, else NETQUAL_TOKEN."""

from __future__ import annotations

import itertools
import math
import os
import stat
import string
from pathlib import Path

from netqual.base.errors import InputError

TOKEN_ENV = "NETQUAL_TOKEN"
MIN_TOKEN_BYTES = 16
MIN_TOKEN_BITS = 128  # 16 random bytes
PATTERN_SLACK_BITS = 16
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
        directory = token_file.absolute().parent
        try:
            dir_mode = directory.stat().st_mode
        except OSError as err:
            raise InputError(source, f"cannot read its directory: {err.strerror or err}") from err
        if dir_mode & stat.S_IWOTH:  # anyone could replace the token with their own
            raise InputError(
                source,
                f"token file's directory {directory} is writable by others; "
                "keep the token in a directory only you can write (chmod o-w)",
            )
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

    An estimate, not a proof (``guess_bits``): the cheapest way to write the token as
    random characters of the smallest usual alphabet it fits, dictionary words, keyboard
    walks and runs (``qwerty``, ``abcdef``, ``123456``), repeated characters and repeats
    of an earlier part. A random token costs its full length; ``changeme...`` or
    ``correcthorsebatterystaple`` a few words.
    """
    n = len(token)
    if n < MIN_TOKEN_BYTES:
        return f"token is shorter than {MIN_TOKEN_BYTES} bytes"
    if len(set(token)) < 8:
        return f"token is trivially repetitive (only {len(set(token))} distinct characters)"
    text = token.decode("latin-1")
    plain = n * _alphabet_bits(text)
    bits = guess_bits(text)
    # A random token shows a few short patterns by chance (a 16-byte hex token loses a
    # few bits to them): those within PATTERN_SLACK_BITS are noise, not a weakness.
    if plain < MIN_TOKEN_BITS or bits < MIN_TOKEN_BITS - PATTERN_SLACK_BITS:
        bits = min(bits, plain)
        return (
            f"token holds about {bits:.0f} bits of entropy (patterns such as words, keyboard "
            f"walks and repeats counted as such), under {MIN_TOKEN_BITS} "
            f"({MIN_TOKEN_BITS // 8} random bytes)"
        )
    return None


# Common words of weak secrets (and of this tool's own vocabulary): a token built from
# them is guessed a word at a time, not a character at a time.
_WORDS = frozenset(
    """
    password passwd secret token changeme change letmein welcome admin administrator root
    default master login access shadow trustno1 iloveyou sunshine princess dragon monkey
    football baseball superman batman qwerty azerty hello world test testing guest user
    correct horse battery staple netqual cluster network offload cache agent node gpu
    storage rack key keys private public secure security insecure example sample demo please
    open sesame abc123 summer winter spring autumn love money freedom
    """.split()  # noqa: SIM905  (a word list reads better as words)
)
_WORD_BITS = math.log2(len(_WORDS)) + 1.0  # which word, and its capitalisation
_MIN_WORD = 4
_MAX_WORD = max(map(len, _WORDS))
_ROWS = ("1234567890-=", "qwertyuiop[]", "asdfghjkl;'", "zxcvbnm,./", "azertyuiop", "qwertzuiop")
_RUN_MIN = 4
_ANALYSED = 512  # characters looked at for patterns; a longer token is long enough


def _alphabet_bits(text: str) -> float:
    size = next((len(set(a)) for a in _ALPHABETS if set(text) <= set(a)), 256)
    return math.log2(size)


def _is_walk(piece: str) -> bool:
    """A keyboard row or an alphabet/digit run, either direction (``qwer``, ``cba``, ``789``)."""
    low = piece.lower()
    if any(low in row or low[::-1] in row for row in _ROWS):
        return True
    steps = {ord(b) - ord(a) for a, b in itertools.pairwise(low)}
    return steps in ({1}, {-1})


def guess_bits(text: str) -> float:
    """About how many bits a guesser needs for ``text``: the cheapest cover of it by
    random characters and patterns (dynamic programming over its positions)."""
    text = text[:_ANALYSED]
    n = len(text)
    per_char = _alphabet_bits(text)
    low = text.lower()
    best = [0.0] + [math.inf] * n
    for j in range(n):  # best[j] is final: extend every cover ending at j
        here = best[j]
        best[j + 1] = min(best[j + 1], here + per_char)
        for end in range(j + _MIN_WORD, min(n, j + _MAX_WORD) + 1):
            if low[j:end] in _WORDS:
                best[end] = min(best[end], here + _WORD_BITS)
        end = j + 1
        while end < n and text[end] == text[j]:  # one character repeated (3 or more)
            end += 1
            if end - j >= _RUN_MIN - 1:
                best[end] = min(best[end], here + per_char + math.log2(end - j))
        end = j + _RUN_MIN
        while end <= n and _is_walk(text[j:end]):  # a walk: where it starts, how long
            best[end] = min(best[end], here + 6.0 + math.log2(end - j))
            end += 1
        for end in range(j + 4, min(n, j + 64) + 1):  # a repeat of an earlier part
            k = text.find(text[j:end], 0, end - 1)
            if k < 0 or k >= j:
                break
            best[end] = min(best[end], here + math.log2(j + 1) + math.log2(end - j))
    return best[n]


def write_token(path: Path) -> None:
    """Create a new random token file readable by its owner only (0600, whatever the
    umask; a symlink planted at ``path`` is never followed: OSError ELOOP)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
