"""Judging a path by a workload: the chunk fetch time against the budget.

The fetch time of one chunk for all ranks of a node is the bulk cell at chunk
``chunk_bytes`` and depth ``ranks_per_node`` (``--workload`` adds it to the probe plan).
On an older run without that cell, it is estimated from the nearest measured cells and
the result says so (``interpolated``).
"""

from __future__ import annotations

import dataclasses

from netqual.analysis.decision import decide, undecided
from netqual.base.errors import UsageError, WorkloadError
from netqual.base.units import format_bytes
from netqual.model.limits import AgentLimits
from netqual.model.path import PathResult
from netqual.model.plan import PlanFieldError, ProbePlan
from netqual.model.workload import Workload
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.workload.columns import judge_columns


def add_to_plan(plan: ProbePlan, w: Workload, limits: AgentLimits | None = None) -> ProbePlan:
    """The plan with the workload's cell (chunk_bytes at depth ranks_per_node) in its grid."""
    if not plan.bulk:
        raise UsageError("--no-bulk", "a workload is judged by bulk reads; drop --no-bulk")
    limits = limits or AgentLimits()
    if w.chunk_bytes > limits.max_chunk_bytes:
        raise WorkloadError(
            w.source,
            f"one chunk per rank is {format_bytes(w.chunk_bytes)}, over the agent's limit of "
            f"{format_bytes(limits.max_chunk_bytes)} per read: lower chunk_tokens",
            "workload.chunk_tokens",
        )
    if w.ranks_per_node > limits.max_depth:
        raise WorkloadError(
            w.source,
            f"{w.ranks_per_node} reads in flight is over the agent's limit of {limits.max_depth}",
            "workload.ranks_per_node",
        )
    chunks = plan.chunks_bytes
    depths = plan.depths
    if w.chunk_bytes not in chunks:
        chunks = (*chunks, w.chunk_bytes)
    if w.ranks_per_node not in depths:
        depths = (*depths, w.ranks_per_node)
    try:
        return dataclasses.replace(plan, chunks_bytes=chunks, depths=depths)
    except PlanFieldError as err:  # 64 --chunk values and the workload's makes 65
        raise WorkloadError(
            w.source, f"the plan with this workload's chunk: {err.problem}", f"plan.{err.field}"
        ) from err


def judged(path: PathResult, w: Workload | None) -> PathResult:
    """One path judged by a workload as a run finishes it: ``judge_columns`` over a one-row
    table, so a path is judged by the same rule as a whole run (``apply``)."""
    if w is None:
        return path
    table = PathTable.from_paths([path])
    row = dataclasses.replace(table, workload=judge_columns(table, w)).row(0)
    return dataclasses.replace(path, workload=row.workload)


def apply(results: Results, w: Workload) -> Results:
    """Re-judge every path of a run by a workload, on the columns (a 1,024-node full mesh is
    half a million paths), and decide the run again: the workload is evidence of every
    path's verdict (``netqual.analysis.decision``), the RTT classes stay as they are."""
    table = undecided(results.paths)
    return decide(
        dataclasses.replace(
            results,
            paths=dataclasses.replace(table, workload=judge_columns(table, w)),
            workload=w,
        )
    )
