"""The one base of every typed reader of a mapping: an input file's table
(``files.tomlfile.Fields``), a peer's message (``agent.wire.messages.Fields``), a results
file's objects (``results.decode``, ``results.suspects_codec``) and an RDMA peer's
connection details (``transports.rdma.conninfo``).

What they share lives here: the mapping and where it sits (a dotted field such as
``node[2]`` or ``probe.result``), how a key inside it is named (``node[2].port``), a
missing key, a nested object, an enum member from its text, and which values count as an
integer or a number (never a bool). How a mistake reads is each reader's own: its
``error`` makes the file or peer kind's error naming the field, with that kind's words.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Generic, TypeGuard, TypeVar

from netqual.base.choices import ChoiceError, parse_choice

E = TypeVar("E", bound=enum.Enum)
X = TypeVar("X", bound=Exception)

REQUIRED: Any = object()  # ``value``'s default: the key must be there


def is_integer(value: object) -> TypeGuard[int]:
    """An integer, not a bool (JSON and TOML ``true`` is a Python int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An integer or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class FieldReader(Generic[X]):
    """Typed reads from one mapping, ``data``, found at ``where`` ("" at the top); its
    mistakes are ``X``s."""

    MISSING = "missing"  # what a missing key is called

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    def field(self, key: str) -> str:
        """The dotted field of ``key`` in this mapping; "" names the mapping itself."""
        if not key:
            return self.where
        return f"{self.where}.{key}" if self.where else key

    def error(self, field: str, problem: str) -> X:
        """The reader's error for ``problem`` at the dotted ``field``."""
        raise NotImplementedError

    def fail(self, key: str, problem: str) -> X:
        return self.error(self.field(key), problem)

    def value(self, key: str, default: Any = REQUIRED) -> Any:
        """The raw value of ``key``; ``default`` when it is absent (else ``MISSING``)."""
        if key in self.data:
            return self.data[key]
        if default is REQUIRED:
            raise self.fail(key, self.MISSING)
        return default

    def member(self, kind: type[E], text: str, key: str) -> E:
        """The member of ``kind`` that ``text`` names, or the one wording of
        ``base.choices`` at ``key``."""
        try:
            return parse_choice(kind, text, key)
        except ChoiceError as err:
            raise self.fail(err.where, err.problem) from None
