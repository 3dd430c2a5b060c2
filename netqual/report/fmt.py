"""Number formatting for the report; rounding happens here and nowhere earlier."""

from __future__ import annotations

from netqual.base.units import format_us, plural
from netqual.model.path import path_label
from netqual.model.verdict import Verdict

__all__ = ["CLASS_CODE", "path_label", "plural", "us"]

CLASS_CODE = {Verdict.SAFE: 1, Verdict.MARGINAL: 2, Verdict.UNSAFE: 3}


def us(value_us: float | None) -> str:
    """'812.0 us': units.format_us with the unit, as the headline and the reasons write it."""
    return format_us(value_us, unit=True)
