"""Where an interrupt may land: everywhere but inside ``atomic`` blocks.

A run stops on SIGINT or SIGTERM by a KeyboardInterrupt raised where it is, so that a
probe waiting on the network stops at once. A block that writes a record and notes it in
memory must not be cut in two (the record on disk but missing from the results.json the
interrupt writes, or the reverse): a signal handler calls ``deliver``, which defers the
interrupt to the end of such a block. Signal handlers run in the main thread, the only
one that writes records, so the state is not shared between threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class _State:
    depth = 0
    pending = False


@contextlib.contextmanager
def atomic() -> Iterator[None]:
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
    if _State.depth == 0 and _State.pending:
        _State.pending = False
        raise KeyboardInterrupt


def deliver() -> None:
    """From a signal handler: interrupt now, or at the end of the atomic block."""
    if _State.depth:
        _State.pending = True
        return
    raise KeyboardInterrupt
