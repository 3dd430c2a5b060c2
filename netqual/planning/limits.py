"""Checks on a plan before any agent is contacted: every request it makes fits the
agents' limits (``AgentLimits``). (That it schedules a pair at all: ``schedule.require_pairs``.)

A plan over a limit would otherwise reach the agents, be refused on every path and come
back as a page of ``unsafe`` verdicts blaming the network for a command-line value. The
refusal is a usage error (exit 2) that names the option and the limit; the limits are the
agents' defaults, and the pre-flight check compares them with what each agent reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from netqual.base.errors import UsageError
from netqual.model.limits import AgentLimits
from netqual.model.plan import ProbePlan

DEFAULT_LIMITS = AgentLimits()


def limit_problem(plan: ProbePlan, limits: AgentLimits = DEFAULT_LIMITS) -> tuple[str, str] | None:
    """(option, problem) for the first part of ``plan`` over ``limits``; None if it fits.

    Each option is checked on its own with ``AgentLimits``' own checks, so the message
    names the option to change (``--iterations``, ``--size``, ``--chunk``, ``--depth``,
    ``--bulk-bytes``, ``--timeout``)."""
    rounds = plan.warmup + plan.iterations
    if (problem := limits.check_pingpong(rounds, 0)) is not None:
        return "--iterations", problem
    if (problem := limits.check_pingpong(0, plan.size_bytes)) is not None:
        return "--size", problem
    if plan.timeout_s > limits.max_duration_s:
        return "--timeout", limits.check(plan) or ""
    if plan.bulk:
        usual = dataclasses.replace(plan, bulk_bytes=ProbePlan().bulk_bytes)
        for chunk in plan.chunks_bytes:
            if (problem := limits.check_bulk(chunk, plan.reads_for(chunk), 1)) is not None:
                # the chunk fits at the default bytes per cell: --bulk-bytes raised it past
                fits = limits.check_bulk(chunk, usual.reads_for(chunk), 1) is None
                return ("--bulk-bytes" if fits else "--chunk"), problem
        for depth in plan.depths:
            smallest = min(plan.chunks_bytes, default=1)
            if problem := limits.check_bulk(smallest, plan.reads_for(smallest), depth):
                return "--depth", problem
    return None


def check_limits(plan: ProbePlan, limits: AgentLimits = DEFAULT_LIMITS) -> None:
    """A usage error (exit 2) naming the option when ``plan`` exceeds the agents' limits."""
    found = limit_problem(plan, limits)
    if found is not None:
        option, problem = found
        raise UsageError(option, f"{problem}: every agent would refuse it (agent limit)")


def reported_limits(info: Mapping[str, Any]) -> AgentLimits | None:
    """The limits an agent's ``info`` reports (older agents report none: None)."""
    raw = info.get("limits")
    if not isinstance(raw, Mapping):
        return None
    known = {f.name: f.type for f in dataclasses.fields(AgentLimits)}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        if name in known and isinstance(value, (int, float)) and not isinstance(value, bool):
            values[name] = value
    return dataclasses.replace(DEFAULT_LIMITS, **values)


def limits_differ(limits: AgentLimits) -> list[str]:
    """The plan-relevant limits where an agent differs from this coordinator's defaults."""
    keys = ("max_iterations", "max_message_bytes", "max_chunk_bytes", "max_depth",
            "max_bulk_bytes", "max_reads", "max_duration_s")  # fmt: skip
    return [
        f"{k}={getattr(limits, k):g} (expected {getattr(DEFAULT_LIMITS, k):g})"
        for k in keys
        if getattr(limits, k) != getattr(DEFAULT_LIMITS, k)
    ]
