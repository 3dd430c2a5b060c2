"""Reading TOML input files with errors that name the file and the field."""

from __future__ import annotations

import datetime as dt
import enum
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from netqual.base.errors import InputError
from netqual.base.fields import FieldReader, is_integer, is_number
from netqual.files.filedata import MAX_DEPTH, checked

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


E = TypeVar("E", bound=enum.Enum)

_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")
_KEY_LINE = re.compile(r"^\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)\s*=")
_TABLE_LINE = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.-]+)\s*\]")


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string that reads back as ``text``: backslash, quote and
    control characters escaped, everything else (an emoji too) written as itself. A JSON
    string is not one: JSON writes characters beyond U+FFFF as surrogate pairs
    (``\\ud83d\\ude00``), which TOML rejects. A lone surrogate has no TOML form: ValueError."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"holds a lone surrogate (U+{code:04X}), which TOML cannot hold")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _syntax_field(text: str, lineno: int) -> str:
    """Best-effort dotted field for a syntax error on ``lineno``: 'node[1].address (line 7)'."""
    lines = text.splitlines()
    table = ""
    arrays: dict[str, int] = {}
    for line in lines[: lineno - 1]:
        if m := _TABLE_LINE.match(line):
            name = m.group(2)
            if m.group(1) == "[[":
                arrays[name] = arrays.get(name, -1) + 1
                table = f"{name}[{arrays[name]}]"
            else:
                table = name
    current = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
    if m := _KEY_LINE.match(current):
        key = re.sub(r"\s+", "", m.group(1))
        return f"{table}.{key} (line {lineno})" if table else f"{key} (line {lineno})"
    return f"line {lineno}"


def read_toml(path: Path, error: Callable[[str, str, str | None], InputError]) -> dict[str, Any]:
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise error(source, f"cannot read: {err.strerror or err}", None) from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(source, "not UTF-8 text", None) from err
    return loads_toml(text, source, error)


def loads_toml(
    text: str, source: str, error: Callable[[str, str, str | None], InputError]
) -> dict[str, Any]:
    """TOML text -> data within ``netqual.files.filedata``'s bounds (depth, integers, floats)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        at = _AT_LINE.search(str(err))
        field = _syntax_field(text, int(at.group(1))) if at else None
        raise error(source, f"TOML syntax error: {err}", field) from err
    except RecursionError as err:
        raise error(source, f"holds nesting deeper than {MAX_DEPTH} levels", None) from err
    except ValueError as err:  # an integer of more than 4,300 digits
        raise error(source, f"not usable TOML: {str(err)[:200]}", None) from err
    checked(data, source, lambda s, why: error(s, why, None))
    return data


class Fields(FieldReader[InputError]):
    """Typed access to one TOML table: the one field reader of every input file (inventory,
    policy, workload, gate profile, campaign, lab topology). Every mistake names the file
    and the dotted field (``node[2].port``); ``make_error`` makes the file kind's
    InputError."""

    MISSING = "missing required field"

    def __init__(
        self,
        source: str,
        table: Mapping[str, Any],
        prefix: str,
        make_error: Callable[[str, str, str | None], InputError],
    ) -> None:
        super().__init__(table, prefix)
        self.source = source
        self.make_error = make_error

    @property
    def table(self) -> Mapping[str, Any]:
        return self.data

    @property
    def prefix(self) -> str:
        return self.where

    def error(self, field: str, problem: str) -> InputError:
        return self.make_error(self.source, problem, field)

    def check_keys(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        for key in self.table:
            if key not in allowed:
                raise self.fail(key, f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def _child(self, key: str, table: Mapping[str, Any], allowed: Iterable[str] | None) -> Fields:
        child = Fields(self.source, table, self.field(key), self.make_error)
        if allowed is not None:
            child.check_keys(allowed)
        return child

    def sub(
        self, key: str, allowed: Iterable[str] | None = None, missing: str | None = None
    ) -> Fields:
        """The table ``[key]`` (empty when absent, or ``missing`` is the problem)."""
        if key not in self.table and missing is not None:
            raise self.fail(key, missing)
        value = self.table.get(key, {})
        if not isinstance(value, Mapping):
            raise self.fail(key, "expected a table")
        return self._child(key, value, allowed)

    def tables(self, key: str, allowed: Iterable[str] | None = None) -> list[Fields]:
        """The array of tables ``[[key]]`` (empty when absent), each named ``key[i]``."""
        value = self.table.get(key, [])
        if not isinstance(value, list):
            raise self.fail(key, f"expected an array of tables ([[{key}]])")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise self.fail(f"{key}[{i}]", "expected a table")
            out.append(self._child(f"{key}[{i}]", item, allowed))
        return out

    def string(
        self, key: str, default: str | None = None, required: bool = False, empty_ok: bool = False
    ) -> str | None:
        if key not in self.table:
            if required:
                raise self.fail(key, self.MISSING)
            return default
        value = self.table[key]
        if not isinstance(value, str) or not (empty_ok or value.strip()):
            raise self.fail(key, f"expected a non-empty string, got {value!r}")
        return value.strip()

    def text(self, key: str, default: str | None = None) -> str:
        """A string that must be there (``default`` when absent, if given)."""
        value = self.string(key, default, required=default is None)
        assert value is not None
        return value

    def strings(self, key: str) -> list[str]:
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "expected a list of strings")
        return list(value)

    def choice(self, kind: type[E], key: str, default: E) -> E:
        """A member of ``kind`` named by its value; one wording (``netqual.base.choices``)."""
        return self.member(kind, self.text(key, str(default.value)), key)

    def choices(self, kind: type[E], key: str) -> frozenset[E]:
        return frozenset(self.member(kind, v, key) for v in self.strings(key))

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {value!r}")
        return value

    def integer(
        self, key: str, default: int, low: int | None = None, high: int | None = None
    ) -> int:
        value = self.table.get(key, default)
        if not is_integer(value):
            raise self.fail(key, f"expected an integer, got {value!r}")
        if low is not None and value < low:
            raise self.fail(key, f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise self.fail(key, f"must be <= {high}, got {value}")
        return value

    def count(self, key: str, default: int = 0) -> int:
        value = self.table.get(key, default)
        if not is_integer(value) or value < 0:
            raise self.fail(key, f"expected a non-negative integer, got {value!r}")
        return value

    def number(
        self,
        key: str,
        default: float,
        positive: bool = True,
        low: float | None = None,
        high: float | None = None,
    ) -> float:
        value = self.table.get(key, default)
        if not is_number(value):
            raise self.fail(key, f"expected a number, got {value!r}")
        if positive and not value > 0:
            raise self.fail(key, f"must be a positive number, got {value}")
        if low is not None and value < low:
            raise self.fail(key, f"must be >= {low:g}, got {value:g}")
        if high is not None and value > high:
            raise self.fail(key, f"must be <= {high:g}, got {value:g}")
        return float(value)

    def maybe_number(
        self,
        key: str,
        positive: bool = True,
        low: float | None = None,
        high: float | None = None,
    ) -> float | None:
        """``number`` for a field whose absence means something (None)."""
        return self.number(key, 0.0, positive, low, high) if key in self.table else None

    def date(self, key: str, required: bool = False) -> dt.date | None:
        """A TOML date (``2026-12-31``) or the same as a string; not a date-time."""
        if key not in self.table:
            if required:
                raise self.fail(key, self.MISSING)
            return None
        value = self.table[key]
        if isinstance(value, str):
            try:
                value = dt.date.fromisoformat(value)
            except ValueError:
                raise self.fail(key, f"not a date: {value!r} (use 2026-12-31)") from None
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise self.fail(key, f"expected a date like 2026-12-31, got {value!r}")
        return value

    def table_of_strings(self, key: str) -> dict[str, str]:
        value = self.table.get(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.fail(key, "expected a table of string values")
        return dict(value)
