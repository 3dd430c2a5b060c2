"""Bounds on what a parsed input file may hold: nesting depth, integer size, float range.

A results file, run.json, a Hugging Face config.json, a kubectl listing or a TOML file may
come from anywhere. Parsers recurse per nesting level and Python integers have no size:
without bounds, ``[[[[...`` is a RecursionError, ``2**70`` an OverflowError in numpy and
``1e308`` an overflow in arithmetic further on. Every such file is checked here, right
after parsing, so a hostile one is one line naming the file (exit 2).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from netqual.base.errors import InputError

MAX_DEPTH = 32  # our files nest 6 levels at most; kubectl's pods about 10
MAX_INT = 2**63 - 1  # what every column and counter holds (int64)
MAX_FLOAT = 1e15  # beyond any time in microseconds (31 years), size or rate we read

Error = Callable[[str, str], InputError]


def problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` (parsed JSON or TOML) is out of bounds, or None. Iterative: a deep
    value cannot exhaust the stack here."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_INT:
                return f"an integer beyond +-{MAX_INT:,} ({str(item)[:20]}...)"
        elif isinstance(item, float):
            if not math.isfinite(item) or abs(item) > MAX_FLOAT:
                return f"a number out of range ({item!r}; the limit is +-{MAX_FLOAT:g})"
        elif isinstance(item, (dict, list)):
            if depth >= max_depth:
                return f"nesting deeper than {max_depth} levels"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


def _big_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # before int(): a 5,000-digit int is a ValueError there
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load_json(raw: str | bytes, source: str, error: Error) -> Any:
    """Parse JSON text and check its bounds; every failure is ``error(source, problem)``."""
    try:
        data = json.loads(raw, parse_int=_big_int, parse_constant=_no_constant)
    except RecursionError as err:
        raise error(source, f"holds nesting deeper than {MAX_DEPTH} levels") from err
    except json.JSONDecodeError as err:
        raise error(source, f"not valid JSON: {err}") from err
    except ValueError as err:  # bad UTF-8, NaN, a huge integer
        raise error(source, f"not usable JSON: {str(err)[:200]}") from err
    checked(data, source, error)
    return data


def checked(data: Any, source: str, error: Error) -> Any:
    """``data`` if within bounds, else ``error(source, why)``."""
    if (why := problem(data)) is not None:
        raise error(source, f"holds {why}")
    return data
