"""ProbePlan <-> JSON: one mapping for the agent wire (``probe`` request) and the results
file (``run.plan``). Knows nothing about either channel or file."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from netqual.model.plan import PlanFieldError, ProbePlan

_FIELDS = tuple(f.name for f in dataclasses.fields(ProbePlan))


def plan_to_dict(p: ProbePlan) -> dict[str, Any]:
    return {
        "iterations": p.iterations,
        "warmup": p.warmup,
        "size_bytes": p.size_bytes,
        "chunks_bytes": list(p.chunks_bytes),
        "depths": list(p.depths),
        "bulk": p.bulk,
        "bulk_bytes": p.bulk_bytes,
        "min_reads": p.min_reads,
        "timeout_s": p.timeout_s,
        **({"fetch_profile": p.fetch_profile} if p.fetch_profile else {}),
    }


def plan_from_dict(d: object) -> ProbePlan:
    """Inverse of plan_to_dict; missing keys take the defaults, unknown keys are ignored.

    Raises PlanFieldError naming the field for anything else (a list instead of an
    object, a string for a number, a value out of range).
    """
    if not isinstance(d, Mapping):
        raise PlanFieldError("plan", f"must be an object, got {type(d).__name__}")
    fields = {k: d[k] for k in _FIELDS if k in d}
    for key in ("chunks_bytes", "depths"):
        if key in fields:
            if not isinstance(fields[key], list):
                raise PlanFieldError(key, "must be a list of integers")
            fields[key] = tuple(fields[key])
    if isinstance(fields.get("timeout_s"), int) and not isinstance(fields["timeout_s"], bool):
        fields["timeout_s"] = float(min(fields["timeout_s"], 10**12))
    try:
        return dataclasses.replace(ProbePlan(), **fields)
    except OverflowError as err:
        raise PlanFieldError("timeout_s", str(err)) from err
