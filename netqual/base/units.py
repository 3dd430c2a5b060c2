"""Parsing and formatting of sizes and durations. Rounding happens only when formatting."""

from __future__ import annotations

import re
from fractions import Fraction

# IEC binary units in any case ("64KiB", "64kib"), SI decimal units as SI spells them
# ("64kB", "8MB", "1GB"), bytes ("64", "64B"). A spelling that could mean either ("64kb",
# "64KB", "64k", "8mb", "8M") is refused with both readings: a chunk 2.4% smaller than
# the engine's block is a different measurement, and nothing should pick it silently.
_BINARY = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
_DECIMAL = {"kB": 1000, "MB": 1000**2, "GB": 1000**3}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Parse ``64``, ``64KiB``, ``1.5MiB``, ``64kB`` (SI), ``1GB`` into bytes; a fraction
    must come to whole bytes. Raises ValueError."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 64, 64KiB, 1.5MiB, 8MiB)")
    number, suffix = m.groups()
    if suffix.lower() in ("", "b"):
        factor = 1
    elif suffix.lower() in _BINARY:
        factor = _BINARY[suffix.lower()]
    elif suffix in _DECIMAL:
        factor = _DECIMAL[suffix]
    else:
        binary = next((k for k in _BINARY if k[0] == suffix[0].lower()), None)
        if binary is None:
            raise ValueError(f"unknown size suffix {suffix!r} in {text!r} (use B, KiB, MiB, GiB)")
        si = next(k for k in _DECIMAL if k[0].lower() == binary[0])
        exact = Fraction(number)
        raise ValueError(
            f"{text!r} is ambiguous: write {number}{binary[0].upper()}iB "
            f"({_whole(exact * _BINARY[binary]):,} bytes) or {number}{si} "
            f"({_whole(exact * _DECIMAL[si]):,} bytes)"
        )
    n_bytes = Fraction(number) * factor
    if n_bytes.denominator != 1:
        raise ValueError(f"{text!r} is not a whole number of bytes ({float(n_bytes):,.1f})")
    return int(n_bytes)


def _whole(x: Fraction) -> float | int:
    return int(x) if x.denominator == 1 else float(x)


def format_size(n_bytes: int) -> str:
    """Binary units chosen by magnitude, exact when two decimals can say it: 65536 ->
    '64KiB', 8126464 -> '7.75MiB' (not '7936KiB'), 1536 -> '1.5KiB', 100 -> '100B';
    otherwise three figures in the largest unit: 100000 -> '97.7KiB'. The report's script
    mirrors it (templates/_report.js size())."""
    for unit, factor in _BINARY_UNITS:
        if n_bytes >= factor and n_bytes * 100 % factor == 0:
            return f"{n_bytes / factor:.2f}".rstrip("0").rstrip(".") + unit
    for unit, factor in _BINARY_UNITS:
        if n_bytes >= factor:
            v = n_bytes / factor
            return f"{v:.{2 if v < 10 else 1 if v < 100 else 0}f}{unit}"
    return f"{n_bytes}B"


_BINARY_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_us(value_us: float | None, unit: bool = False) -> str:
    """Microseconds as every output writes them (terminal, reasons, report; the report's
    script mirrors it): '3.41', '48.2', '812.0', '1,250'; with ``unit``: '812.0 us'."""
    if value_us is None:
        return "-"
    if value_us < 10:
        text = f"{value_us:.2f}"
    elif value_us < 1000:
        text = f"{value_us:.1f}"
    else:
        text = f"{value_us:,.0f}"
    return f"{text} us" if unit else text


def format_bytes(n_bytes: int) -> str:
    """Sizes for sentences: '40 KiB', '31.5 KiB', '10.0 MiB', '1.25 GiB', '512 B'."""
    if n_bytes >= 1 << 30:
        return f"{n_bytes / (1 << 30):.2f} GiB"
    if n_bytes >= 1 << 20:
        return f"{n_bytes / (1 << 20):.1f} MiB"
    if n_bytes >= 1 << 10:
        kib = n_bytes / (1 << 10)
        return f"{n_bytes >> 10} KiB" if n_bytes % (1 << 10) == 0 else f"{kib:.1f} KiB"
    return f"{n_bytes} B"


def format_duration_us(value_us: float) -> str:
    """Durations for sentences: '850 us', '12.8 ms', '1.28 s'."""
    if value_us >= 1e6:
        return f"{value_us / 1e6:.2f} s"
    if value_us >= 1e3:
        return f"{value_us / 1e3:.1f} ms"
    return f"{value_us:.0f} us"


def format_speedup(value: float | None) -> str:
    """A workload speedup (budget / fetch p99): '2.4x', 'inf' (no fetch time), '-' (none)."""
    if value is None:
        return "-"
    return "inf" if value == float("inf") else f"{value:.1f}x"


def format_gbps(value_gbps: float) -> str:
    """Rates for tables and sentences, three digits in the unit that suits them:
    '330 Mbit/s', '1.32 Gbit/s', '25.0 Gbit/s', '950 kbit/s', '1,200 Gbit/s'."""
    for unit, factor in (("Gbit/s", 1.0), ("Mbit/s", 1e-3), ("kbit/s", 1e-6)):
        if abs(value_gbps) >= factor * 0.9995 or unit == "kbit/s":
            v = value_gbps / factor
            digits = 2 if abs(v) < 9.995 else 1 if abs(v) < 99.95 else 0
            return f"{v:,.{digits}f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


KIB = 1 << 10
MIB = 1 << 20


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 path', '2 paths', '1,024 paths' ('many': an irregular plural)."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {many or word + 's'}"
