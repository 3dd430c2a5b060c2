"""Text as the report's HTML shows it: a number never leaves its unit at a line end, a path's
arrow never splits, an option keeps its value and a command in backticks reads as code.

Two entry points: ``keep_units`` for every string a template prints (the environment's
finalize; safe in attributes too: it only swaps a space for U+00A0), and ``prose`` for
running text (headline, reasons, recommendations), which may add markup.
"""

from __future__ import annotations

import re

import markupsafe

from netqual.base.names import visible

NBSP = "\u00a0"
# A number, a space, and a unit (or "x" of a speedup): the space becomes U+00A0, so
# "1,435 us" or "7.8 MiB" wraps as one word. "s" only after a digit, never inside words.
_UNIT = re.compile(
    r"(?<=\d) (?=(?:us|µs|ms|s|ns|B|KiB|MiB|GiB|TiB|kB|MB|GB|Gbit/s|Mbit/s|kbit/s|%)(?![\w/]))"
)
_OPTION = re.compile(r"(--[a-z][a-z0-9-]*(?: [0-9][0-9,]*)?)")
_CODE = re.compile(r"`([^`\n]+)`")
_ARROW = re.compile(r"-&gt;|&lt;-&gt;")


def keep_units(text: str) -> str:
    """``text`` with the space between each number and its unit made non-breaking."""
    return _UNIT.sub(NBSP, text)


def prose(text: str) -> markupsafe.Markup:
    """Escaped running text: numbers keep their units, each option ("--iterations 10000")
    and each arrow ("->", "<->") stays on one line, `netqual gate` becomes code."""
    escaped = str(markupsafe.escape(keep_units(visible(text, newlines=True))))
    escaped = _ARROW.sub(lambda m: f'<span class="nw">{m.group(0)}</span>', escaped)
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    return markupsafe.Markup(_OPTION.sub(r'<span class="opt">\1</span>', escaped))
