"""Plain-language sentences derived from results, shared by every renderer."""

from __future__ import annotations

import numpy as np

from netqual.models import PathResult, Results, Verdict, Waiver
from netqual.units import format_us


def path_label(p: PathResult) -> str:
    return f"{p.src} -> {p.dst}"


def verdict_sentence(results: Results) -> str:
    """E.g. '41 of 42 paths offload-safe; 1 unsafe: gpu03 -> stor02, p99 812 us'."""
    text = _counts_sentence(results) if results.paths else "No paths were measured."
    if results.preliminary:
        text = f"{preliminary_note(results)}: {text}"
    if not results.run.complete:
        text = f"{incomplete_note(results)}: {text}"
    return text


def incomplete_note(results: Results) -> str:
    planned = results.run.pairs_planned
    of = f" of {planned:,}" if planned else ""
    return f"INCOMPLETE (run interrupted, {len(results.paths):,}{of} pairs measured)"


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
    text = f"{safe} of {total} paths offload-safe"
    by_key = {p.key: p for p in results.paths}
    for verdict in (Verdict.UNSAFE, Verdict.MARGINAL):
        n = counts.get(verdict, 0)
        if not n:
            continue
        worst = next(
            (
                by_key[k]
                for k in results.summary.worst
                if k in by_key and by_key[k].verdict is verdict
            ),
            None,
        )
        text += f"; {n} {verdict.value}"
        if worst is not None:
            text += f" (worst {path_label(worst)}, " if n > 1 else f": {path_label(worst)}, "
            text += (
                f"{metric.value} {format_us(worst.rtt.value(metric))} us"
                if worst.rtt
                else (worst.error or "no measurement")
            )
            text += ")" if n > 1 else ""
    return text


def waiver_problem(results: Results, waiver: Waiver) -> str | None:
    """Why a waiver cannot apply to this run (a node or path it does not have), or None.

    Read from the path columns (node codes), not from rows: a run can have half a million
    paths and a profile several waivers."""
    paths = results.paths
    used = np.zeros(len(paths.names), dtype=np.bool_)
    used[paths.src] = True
    used[paths.dst] = True
    measured = {n for n, u in zip(paths.names, used.tolist(), strict=True) if u}
    names = {n.name for n in results.nodes} | measured
    unknown = [n for n in (waiver.src, waiver.dst) if n not in names]
    if unknown:
        which = " and ".join(repr(n) for n in dict.fromkeys(unknown))
        return f"names {which}, not a node of this run (a typo, or another inventory?)"
    code = {n: i for i, n in enumerate(paths.names)}
    a, b = code.get(waiver.src, -1), code.get(waiver.dst, -1)
    there = ((paths.src == a) & (paths.dst == b)) | ((paths.src == b) & (paths.dst == a))
    if not there.any():
        return "names a path this run did not measure"
    return None
