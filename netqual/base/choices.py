"""One way to read a value from a fixed set (an enum) out of text a person typed, and one
wording for the error: ``unknown metric 'p95' (p50, p90, p99 or p999)``.

The list of allowed values comes from the enum itself, so adding a member updates every
message that names the choices. ``ChoiceError`` carries the field (or option) and the
problem; each reader turns it into its own error (policy, inventory, profile, option).
"""

from __future__ import annotations

import enum
from typing import TypeVar

E = TypeVar("E", bound=enum.Enum)


class ChoiceError(ValueError):
    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


def choices_text(kind: type[enum.Enum]) -> str:
    """The allowed values in order: 'a', 'a or b', 'a, b or c'."""
    values = [str(m.value) for m in kind]
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


def parse_choice(kind: type[E], text: object, where: str, noun: str | None = None) -> E:
    """The member of ``kind`` whose value is ``text``; else ChoiceError naming ``where``.
    ``noun``: what the message calls a value (default: the enum's name, lower case)."""
    for member in kind:
        if member.value == text:
            return member
    what = noun or kind.__name__.lower()
    raise ChoiceError(where, f"unknown {what} {text!r} ({choices_text(kind)})")
