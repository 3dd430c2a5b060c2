"""Plain-language sentences derived from results, shared by every renderer."""

from __future__ import annotations

from collections.abc import Sequence, Set

import numpy as np

from netqual.analysis.interference import headline
from netqual.base.units import format_us
from netqual.model.node import Node
from netqual.model.path import path_label
from netqual.model.policy import Waiver
from netqual.model.run import RunKind
from netqual.model.verdict import Verdict
from netqual.table.run import Results


def verdict_sentence(results: Results) -> str:
    """E.g. '41 of 42 paths offload-safe; 1 unsafe: gpu03 -> stor02, p99 812 us'."""
    text = _counts_sentence(results) if results.paths else "No paths were measured."
    if results.preliminary:
        text = f"{preliminary_note(results)}: {text}"
    if results.incomplete:
        text = f"{incomplete_note(results)}: {text}"
    return text


def nodes_text(nodes: Sequence[Node]) -> str:
    """ "8 nodes", or with endpoints below the node (docs/rails.md) "8 NICs on 4 nodes":
    terminal and report say the same."""
    if not any(n.nic is not None for n in nodes):
        return f"{len(nodes):,} nodes"
    hosts = len({n.node_name for n in nodes})
    return f"{len(nodes):,} NICs on {hosts:,} nodes"


def incomplete_note(results: Results) -> str:
    """E.g. 'INCOMPLETE (run interrupted, 5 of 28 pairs measured)'."""
    planned = results.run.pairs_planned
    of = f" of {planned:,}" if planned else ""
    parts = ["run interrupted"] if not results.run.complete else []
    partial = results.pingpong_only  # bulk phase never ran: not measured
    parts.append(f"{len(results.paths) - partial:,}{of} pairs measured")
    if partial:
        parts.append(f"{partial:,} more with ping-pong only")
    if results.not_measured:
        parts.append(f"{len(results.not_measured):,} not measured (configuration)")
    return f"INCOMPLETE ({', '.join(parts)})"


def is_demo(results: Results) -> bool:
    """A ``netqual demo`` run: its agents are new each time, so it starts again, it never
    resumes."""
    return results.run.kind is RunKind.DEMO


def interference_headline(results: Results) -> str | None:
    """``interference.headline`` for ``results``, with the options its command has and
    the ``--parallel`` it used (``run.schedule.parallel``)."""
    if results.interference is None:
        return None
    sched = results.run.schedule
    parallel = sched.get("parallel")
    return headline(
        results.interference,
        str(sched.get("name")),
        results.run.kind,
        parallel if isinstance(parallel, int) and not isinstance(parallel, bool) else None,
    )


def unmeasured_sentence(results: Results) -> str | None:
    """E.g. '23 of 28 pairs not measured: finish the run with --resume'; None when complete."""
    missing = results.unmeasured
    if not results.incomplete:
        return None
    planned = results.run.pairs_planned
    of = f" of {planned:,}" if planned else ""
    head = "pairs not measured" if missing is None else f"{missing:,}{of} pairs not measured"
    if missing == 1 and not of:
        head = "1 pair not measured"
    if not len(results.paths):
        head = f"no pair measured ({len(results.paths)}{of})"
    if results.not_measured and results.run.complete:
        return f"{head}: fix the configuration (netqual check), then measure them with --resume"
    if is_demo(results):
        return f"{head}: a demo does not resume, start it again (netqual demo)"
    return f"{head}: finish the run with the same command plus --resume"


def preliminary_note(results: Results) -> str:
    pol, plan = results.run.policy, results.run.plan
    return (
        f"PRELIMINARY ({plan.iterations:,} samples per path, the policy needs {pol.min_samples:,})"
    )


def _counts_sentence(results: Results) -> str:
    total = len(results.paths)
    counts = results.summary.counts
    safe = counts.get(Verdict.SAFE, 0)
    metric = results.run.policy.metric
    text = f"{safe:,} of {total:,} paths offload-safe"
    table = results.paths
    worst_rows = [i for i in table.rows_of(results.summary.worst) if i is not None]
    for verdict in (Verdict.UNSAFE, Verdict.MARGINAL):
        n = counts.get(verdict, 0)
        if not n:
            continue
        row = next((i for i in worst_rows if table.verdict[i] == verdict.rank), None)
        text += f"; {n:,} {verdict.value}"
        if row is not None:
            worst = table.row(row)
            label = path_label(worst.src, worst.dst)
            text += f" (worst {label}, " if n > 1 else f": {label}, "
            text += (
                f"{metric.value} {format_us(worst.rtt.value(metric))} us"
                if worst.rtt
                else (worst.error or "no measurement")
            )
            text += ")" if n > 1 else ""
    return text


def used_names(results: Results) -> set[str]:
    """The node list's names and every name a path has at either end."""
    table = results.paths
    used = np.zeros(len(table.names), dtype=np.bool_)
    used[table.src] = True
    used[table.dst] = True
    return {n.name for n in results.nodes} | {table.names[i] for i in np.flatnonzero(used).tolist()}


def waiver_problems(results: Results, waivers: Sequence[Waiver]) -> list[str | None]:
    """``waiver_problem`` of each waiver, in time linear in paths plus waivers."""
    names = used_names(results)
    keys = [k for w in waivers for k in ((w.src, w.dst), (w.dst, w.src))]
    rows = results.paths.rows_of(keys)
    out: list[str | None] = []
    for i, w in enumerate(waivers):
        unknown = [n for n in (w.src, w.dst) if n not in names]
        if unknown:
            which = " and ".join(repr(n) for n in dict.fromkeys(unknown))
            out.append(f"names {which}, not a node of this run (a typo, or another inventory?)")
        elif rows[2 * i] is None and rows[2 * i + 1] is None:
            out.append("names a path this run did not measure")
        else:
            out.append(None)
    return out


def waiver_problem(results: Results, waiver: Waiver, names: Set[str] | None = None) -> str | None:
    """Why a waiver cannot apply to this run (a node or path it does not have), or None.

    Read from the path columns (node codes), not from rows: a run can have half a million
    paths and a profile several waivers. ``names``: ``used_names(results)``, computed once
    by a caller that checks many waivers."""
    names = used_names(results) if names is None else names
    unknown = [n for n in (waiver.src, waiver.dst) if n not in names]
    if unknown:
        which = " and ".join(repr(n) for n in dict.fromkeys(unknown))
        return f"names {which}, not a node of this run (a typo, or another inventory?)"
    forward, reverse = results.paths.rows_of([(waiver.src, waiver.dst), (waiver.dst, waiver.src)])
    if forward is None and reverse is None:
        return "names a path this run did not measure"
    return None
