"""``eventually``: wait for the event a test is about, never for a guessed time.

Every test that waits on another process (a log line, a record on disk, a socket closed, a
job ended) polls here: the condition, a generous bound that only a broken build reaches
(the host is shared and loaded), and a message that says what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    check: Callable[[], T | None],
    *,
    within_s: float,
    what: str | Callable[[], str],
    every_s: float = 0.05,
    unless: Callable[[], object] | None = None,
) -> T:
    """Poll ``check`` until it returns a true value and return that value.

    Fails (AssertionError naming ``what``) after ``within_s`` seconds, or as soon as
    ``unless()`` holds: the thing that would make the event impossible, e.g. the process
    that should write it has ended. ``what`` may be a callable, read only on failure (a
    log tail)."""
    end = time.monotonic() + within_s
    while True:
        value = check()
        if value:
            return value
        if unless is not None and unless():
            raise AssertionError(f"gave up waiting (it can no longer happen): {_say(what)}")
        if time.monotonic() >= end:
            raise AssertionError(f"not within {within_s:g} s: {_say(what)}")
        time.sleep(every_s)


def _say(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()
