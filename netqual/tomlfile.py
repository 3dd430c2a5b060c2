"""Reading TOML input files with errors that name the file and the field."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from netqual.errors import InputError
from netqual.filedata import MAX_DEPTH, checked

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")
_KEY_LINE = re.compile(r"^\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)\s*=")
_TABLE_LINE = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.-]+)\s*\]")


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
    """TOML text -> data within ``netqual.filedata``'s bounds (depth, integers, floats)."""
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


class Fields:
    """Typed access to one TOML table; every mistake names file and dotted field."""

    def __init__(
        self,
        source: str,
        table: Mapping[str, Any],
        prefix: str,
        error: Callable[[str, str, str | None], InputError],
    ) -> None:
        self.source = source
        self.table = table
        self.prefix = prefix
        self.error = error

    def name(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def fail(self, key: str, problem: str) -> InputError:
        return self.error(self.source, problem, self.name(key))

    def check_keys(self, allowed: set[str]) -> None:
        for key in self.table:
            if key not in allowed:
                raise self.fail(key, f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def string(self, key: str, default: str | None = None, required: bool = False) -> str | None:
        if key not in self.table:
            if required:
                raise self.fail(key, "missing required field")
            return default
        value = self.table[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {value!r}")
        return value.strip()

    def integer(
        self, key: str, default: int, low: int | None = None, high: int | None = None
    ) -> int:
        value = self.table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {value!r}")
        if low is not None and value < low:
            raise self.fail(key, f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise self.fail(key, f"must be <= {high}, got {value}")
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
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"expected a number, got {value!r}")
        if positive and not value > 0:
            raise self.fail(key, f"must be a positive number, got {value}")
        if low is not None and value < low:
            raise self.fail(key, f"must be >= {low:g}, got {value:g}")
        if high is not None and value > high:
            raise self.fail(key, f"must be <= {high:g}, got {value:g}")
        return float(value)

    def table_of_strings(self, key: str) -> dict[str, str]:
        value = self.table.get(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.fail(key, "expected a table of string values")
        return dict(value)
