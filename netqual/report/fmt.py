"""Number formatting for the report; rounding happens here and nowhere earlier."""

from __future__ import annotations

from netqual.models import Verdict
from netqual.narrative import path_label  # one wording for every renderer

__all__ = ["CLASS_CODE", "path_label", "plural", "us"]

CLASS_CODE = {Verdict.SAFE: 1, Verdict.MARGINAL: 2, Verdict.UNSAFE: 3}


def us(value_us: float | None) -> str:
    """'812 us', '48.2 us', '3.41 us': three significant digits, plain ASCII unit."""
    if value_us is None:
        return "-"
    if value_us >= 100:
        return f"{value_us:,.0f} us"
    if value_us >= 10:
        return f"{value_us:.1f} us"
    return f"{value_us:.2f} us"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n:,} {many or word + 's'}"
