"""ProbePlan <-> JSON: one mapping for the agent wire (``probe`` request) and the results
file (``run.plan``). Knows nothing about either channel or file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netqual.models import ProbePlan


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
    }


def plan_from_dict(d: Mapping[str, Any]) -> ProbePlan:
    """Inverse of plan_to_dict; unknown keys are ignored, wrong types raise TypeError/ValueError."""
    base = ProbePlan()
    ints = ("iterations", "warmup", "size_bytes", "bulk_bytes", "min_reads")
    kwargs: dict[str, Any] = {}
    for key in ints:
        if key in d:
            v = d[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"plan.{key} must be a non-negative integer, got {v!r}")
            kwargs[key] = v
    for key in ("chunks_bytes", "depths"):
        if key in d:
            v = d[key]
            if (
                not isinstance(v, list)
                or not v
                or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)
            ):
                raise ValueError(f"plan.{key} must be a list of positive integers, got {v!r}")
            kwargs[key] = tuple(v)
    if "bulk" in d:
        kwargs["bulk"] = bool(d["bulk"])
    if "timeout_s" in d:
        t = d["timeout_s"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
            raise ValueError(f"plan.timeout_s must be positive, got {t!r}")
        kwargs["timeout_s"] = float(t)
    return ProbePlan(**{**base.__dict__, **kwargs})
