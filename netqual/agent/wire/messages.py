"""Checking what a peer sent: every field of every message is read through ``Fields``.

This is the one place where a value from the network becomes a Python value. A missing
field, a wrong type, a non-finite number, an out-of-range integer, an unprintable string
or a malformed address raises ``BadRequestError`` naming ``kind.field``; nothing a peer
sends reaches the rest of the code unchecked (so nothing it sends can end in "internal").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from netqual.base.errors import BadRequestError
from netqual.base.fields import REQUIRED, FieldReader, is_integer, is_number
from netqual.base.names import address_problem, name_problem, printable

MAX_TEXT_CHARS = 4096
MAX_LIST_ITEMS = 64


class Fields(FieldReader[BadRequestError]):
    """Typed, checked access to one message body. ``where`` names it in errors."""

    def __init__(self, body: object, where: str, peer: str) -> None:
        if not isinstance(body, Mapping):
            raise BadRequestError(peer, where, "must be an object")
        super().__init__(body, where)
        self.peer = peer

    @property
    def body(self) -> Mapping[str, Any]:
        return self.data

    def error(self, field: str, problem: str) -> BadRequestError:
        return BadRequestError(self.peer, field, problem)

    def integer(self, key: str, low: int, high: int, default: Any = REQUIRED) -> int:
        return self.integer_value(self.value(key, default), key, low, high)

    def integer_value(self, value: object, key: str, low: int, high: int) -> int:
        if not is_integer(value):
            raise self.fail(key, f"must be an integer, got {type(value).__name__}")
        if not low <= value <= high:
            shown = value if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
            raise self.fail(key, f"{shown} outside [{low}, {high}]")
        return value

    def number(self, key: str, low: float, high: float, default: Any = REQUIRED) -> float:
        value = self.value(key, default)
        if not is_number(value):
            raise self.fail(key, f"must be a number, got {type(value).__name__}")
        try:
            number = float(value)
        except OverflowError:
            raise self.fail(key, "number too large") from None
        if not math.isfinite(number) or not low <= number <= high:
            raise self.fail(key, f"{number:g} outside [{low:g}, {high:g}]")
        return number

    def flag(self, key: str, default: Any = REQUIRED) -> bool:
        value = self.value(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {type(value).__name__}")
        return value

    def string(self, key: str, max_chars: int = MAX_TEXT_CHARS, default: Any = REQUIRED) -> str:
        value = self.value(key, default)
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {type(value).__name__}")
        if len(value) > max_chars:
            raise self.fail(key, f"longer than {max_chars} characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise self.fail(key, "not valid Unicode (lone surrogate)") from None
        if any(c in value for c in "\x00\r\n"):
            raise self.fail(key, "holds a control character")
        return value

    def text(self, key: str, default: Any = REQUIRED) -> str:
        """Free text (an error message): any string, made printable and bounded."""
        value = self.value(key, default)
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {type(value).__name__}")
        return printable(value)

    def choice(self, key: str, allowed: tuple[str, ...], default: Any = REQUIRED) -> str:
        value = self.value(key, default)
        if value not in allowed:
            shown = repr(value)[:40]
            raise self.fail(key, f"{shown} is not one of {', '.join(allowed)}")
        return str(value)

    def name(self, key: str, default: Any = REQUIRED) -> str:
        value = self.value(key, default)
        if (problem := name_problem(value)) is not None:
            raise self.fail(key, problem[:120])
        return str(value)

    def optional_name(self, key: str) -> str | None:
        return None if self.body.get(key) is None else self.name(key)

    def address(self, key: str) -> str:
        value = self.value(key, REQUIRED)
        if (problem := address_problem(value)) is not None:
            raise self.fail(key, problem)
        return str(value)

    def hex(self, key: str, nbytes: int) -> bytes:
        value = self.value(key, REQUIRED)
        if not isinstance(value, str) or len(value) != 2 * nbytes or not value.isascii():
            raise self.fail(key, f"must be {2 * nbytes} hex digits")
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise self.fail(key, f"must be {2 * nbytes} hex digits") from None

    def ints(self, key: str, low: int, high: int, default: Any = REQUIRED) -> tuple[int, ...]:
        value = self.value(key, default)
        if not isinstance(value, (list, tuple)) or not 0 < len(value) <= MAX_LIST_ITEMS:
            raise self.fail(key, f"must be a list of 1-{MAX_LIST_ITEMS} integers")
        return tuple(self.integer_value(v, f"{key}[{i}]", low, high) for i, v in enumerate(value))

    def strings(self, key: str, max_chars: int = 64) -> tuple[str, ...]:
        value = self.value(key, ())
        if not isinstance(value, (list, tuple)) or len(value) > MAX_LIST_ITEMS:
            raise self.fail(key, f"must be a list of at most {MAX_LIST_ITEMS} strings")
        for i, item in enumerate(value):
            if not isinstance(item, str) or len(item) > max_chars or not item.isprintable():
                raise self.fail(f"{key}[{i}]", f"must be a printable string of <= {max_chars}")
        return tuple(value)

    def obj(self, key: str, default: Any = REQUIRED) -> Fields | None:
        value = self.value(key, default)
        if value is None and default is None:
            return None
        return Fields(value, f"{self.where}.{key}", self.peer)

    def mapping(self, key: str) -> Mapping[str, Any] | None:
        """An optional object passed on as is (checked by its own decoder later)."""
        value = self.body.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.fail(key, "must be an object")
        return value
