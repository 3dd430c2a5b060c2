"""The probe plan: what to measure on one path, validated on construction."""

from __future__ import annotations

import math
from dataclasses import dataclass

from netqual.base.units import KIB, MIB
from netqual.model.fetchprofile import PROFILES


class FieldError(ValueError):
    """A record's field out of its range; each input (option, inventory key, wire field,
    results file) names ``field`` its own way."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class PlanFieldError(FieldError):
    """A ProbePlan field out of its range."""


# Field -> (lowest, highest) for the integer fields of a ProbePlan. Wide enough for any
# real plan; their job is to keep absurd values (negative, 4300-digit) out of arithmetic.
_PLAN_INT_RANGES = {
    "iterations": (1, 10**9),
    "warmup": (0, 10**9),
    "size_bytes": (1, 1 << 30),
    "bulk_bytes": (0, 1 << 50),
    "min_reads": (1, 10**9),
}


_PLAN_LIST_RANGES = {"chunks_bytes": (1, 1 << 40), "depths": (1, 1 << 20)}


_PLAN_MAX_TIMEOUT_S = 7 * 86400.0


PLAN_MAX_LIST_ITEMS = 64


def check_int(field: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanFieldError(field, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        shown = value if abs(value) < 10**30 else f"a {value.bit_length()}-bit number"
        bound = f">= {low}" if value < low else f"<= {high}"
        raise PlanFieldError(field, f"must be {bound}, got {shown}")


@dataclass(frozen=True)
class ProbePlan:
    """What to measure on one path. Defaults: docs/inventory.md "[probe]".

    Validated on construction (PlanFieldError naming the field): no other place checks a
    plan's own consistency; ``AgentLimits.check`` adds what one agent allows.
    """

    iterations: int = 10_000
    warmup: int = 1_000
    size_bytes: int = 64
    chunks_bytes: tuple[int, ...] = (64 * KIB, 1 * MIB, 8 * MIB)
    depths: tuple[int, ...] = (1, 8)
    bulk: bool = True
    # Bytes moved per (chunk, depth) bulk cell; reads = max(min_reads, bulk_bytes // chunk).
    bulk_bytes: int = 128 * MIB
    min_reads: int = 32
    timeout_s: float = 120.0
    # A connector's access pattern for the bulk cells (netqual.model.fetchprofile); "" = plain
    # reads at every depth, as without a profile.
    fetch_profile: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.fetch_profile, str) or (
            self.fetch_profile and self.fetch_profile not in PROFILES
        ):
            raise PlanFieldError("fetch_profile", f"unknown, known: {', '.join(PROFILES)}")
        for name, (low, high) in _PLAN_INT_RANGES.items():
            check_int(name, getattr(self, name), low, high)
        for name, (low, high) in _PLAN_LIST_RANGES.items():
            values = getattr(self, name)
            if not isinstance(values, tuple) or not 0 < len(values) <= PLAN_MAX_LIST_ITEMS:
                raise PlanFieldError(name, f"must be 1-{PLAN_MAX_LIST_ITEMS} values")
            for v in values:
                check_int(name, v, low, high)
        if not isinstance(self.bulk, bool):
            raise PlanFieldError("bulk", "must be true or false")
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise PlanFieldError("timeout_s", f"must be a number, got {type(t).__name__}")
        if not (math.isfinite(t) and 0 < t <= _PLAN_MAX_TIMEOUT_S):
            raise PlanFieldError("timeout_s", f"must be in (0, {_PLAN_MAX_TIMEOUT_S:g}], got {t}")

    def reads_for(self, chunk_bytes: int) -> int:
        return max(self.min_reads, self.bulk_bytes // max(1, chunk_bytes))
