"""Names shortened to fit a column: cut in the middle, so both ends stay.

A NIC endpoint is ``NODE/NIC`` (``h1/to-rail0``): cutting its end, as a narrow table does,
leaves ``h1/to-ra…`` for rail 0 and rail 1 alike. Cutting the middle keeps the node at the
start and the NIC's distinguishing end (``h1/…il0``, ``h1/…il1``); names that were distinct
stay distinct, or are shown whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

ELLIPSIS = "…"


def _cut(name: str, head: int, width: int) -> str:
    if len(name) <= width:
        return name
    tail = width - 1 - head
    return name[:head] + ELLIPSIS + name[len(name) - tail :]


def _heads(names: Sequence[str], width: int) -> Iterator[int]:
    """Head lengths to try, best first: up to and including the '/' of NODE/NIC (the whole
    node, then as much of the NIC's end as fits), then from half the width down and up."""
    slash = max((n.index("/") + 1 for n in names if "/" in n), default=0)
    if 0 < slash <= width - 2:
        yield slash
    half = (width - 1) // 2
    yield from range(half, 0, -1)
    yield from range(half + 1, width - 1)


def abbreviate(names: Sequence[str], width: int) -> list[str]:
    """Each name in at most ``width`` characters, cut in the middle; names distinct before
    are distinct after, else they are returned whole (the table wraps them instead)."""
    if all(len(n) <= width for n in names):
        return list(names)
    if width < 3:
        return list(names)
    distinct = len(set(names))
    for head in _heads(names, width):
        out = [_cut(n, head, width) for n in names]
        if len(set(out)) == distinct:
            return out
    return list(names)
