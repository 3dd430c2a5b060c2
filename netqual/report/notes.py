"""What the run itself says before any hardware advice (``recommend`` puts these first):
an incomplete run, too few samples, paths that could not be measured, configuration
outliers, and marginal or unstable paths. None of them points at a node or a link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netqual.analysis.narrative import unmeasured_sentence
from netqual.analysis.policy import sample_limited, value_classes
from netqual.analysis.stability import unstable_paths
from netqual.model.path import path_label
from netqual.model.verdict import Verdict
from netqual.report import fmt
from netqual.table.paths import IntArray, PathTable
from netqual.table.run import Results

LISTED = 8


@dataclass(frozen=True)
class Recommendation:
    """A card of "What to do". ``fix``: it advises on something the decision's ranked
    fixes (``Decision.blocking``) or cautions already hold (a node, a tier, a rack pair,
    a path, the sample count, a configuration outlier, loss, marginal or unstable paths):
    report.html shows it only when the decision has no fix, so that each thing to do is
    said once. The others (an incomplete run, a topology that cannot be localised, the
    go-live note, an expired waiver) say what no fix says."""

    severity: str  # css class: unsafe | marginal | safe | info
    title: str
    text: str
    fix: bool = True


def listed(items: Sequence[str], total: int | None = None) -> str:
    """The first LISTED items, then how many more; ``total``: the count when only the
    shown ones were formatted."""
    total = len(items) if total is None else total
    shown = ", ".join(items[:LISTED])
    return shown + (f" and {total - LISTED} more" if total > LISTED else "")


def finish_notes(results: Results) -> list[Recommendation]:
    """Cause 0: the run did not measure every scheduled pair; finishing it comes first."""
    sentence = unmeasured_sentence(results)
    if sentence is None:
        return []
    head, _, action = sentence.partition(": ")
    examples = [f"{path_label(m.src, m.dst)}: {m.reason}" for m in results.not_measured]
    why = f" Not measured (configuration): {listed(examples)}." if examples else ""
    return [
        Recommendation(
            "unsafe",
            f"Incomplete run: {head}",
            f"{action[0].upper()}{action[1:]}.{why} No go-live decision until every "
            "scheduled pair is measured: an unmeasured pair may be the one that fails.",
            fix=False,
        )
    ]


def sample_notes(results: Results) -> list[Recommendation]:
    """Cause 1: the plan was too short to call anything offload-safe."""
    policy = results.run.policy
    few = sample_limited(results.run.policy, results.paths)
    if not few.any():
        return []
    metric = policy.metric
    values = results.paths.values(metric)[few]
    kept = np.unique(results.paths.samples[few]).tolist()
    kept_text = f"{kept[0]:,}" if len(kept) == 1 else f"{kept[0]:,} to {kept[-1]:,}"
    return [
        Recommendation(
            "marginal",
            f"Too few samples to decide on {fmt.plural(int(few.sum()), 'path')}",
            f"Their {metric.value} ({fmt.us(float(values.min()))} to "
            f"{fmt.us(float(values.max()))}) is within "
            f"{fmt.us(policy.safe_max_us)}, but they kept {kept_text} samples and the policy "
            f"needs {policy.min_samples:,} to call a path offload-safe. Re-run with "
            f"--iterations {policy.min_samples} before judging them; nothing here points "
            "at the hardware.",
        )
    ]


def error_notes(results: Results) -> list[Recommendation]:
    """Cause 2: configuration. An unmeasured path says nothing about the network."""
    table = results.paths
    # bool() of each error (None or text) in one C loop, no record per path
    errors = np.flatnonzero(np.array(table.error, dtype=object).astype(bool))
    if not len(errors):
        return []
    first = table.row(int(errors[0]))
    return [
        Recommendation(
            "unsafe",
            f"{fmt.plural(len(errors), 'path')} could not be measured",
            f"For example {path_label(first.src, first.dst)}: {first.error}. Unmeasured "
            "paths count as unsafe. Run netqual check on the inventory, fix what it names, "
            "then re-test.",
        )
    ]


def _by_names(table: PathTable, rows: IntArray) -> IntArray:
    """``rows`` ordered by (src name, dst name), ties in row order (a stable sort)."""
    rank = np.empty(len(table.names), dtype=np.int64)
    rank[np.argsort(np.array(table.names, dtype=object), kind="stable")] = np.arange(
        len(table.names)
    )
    ordered: IntArray = rows[np.lexsort((rank[table.dst[rows]], rank[table.src[rows]]))]
    return ordered


def measurement_notes(results: Results) -> list[Recommendation]:
    policy = results.run.policy
    metric = policy.metric
    table = results.paths
    value = table.values(metric)
    out = []
    # marginal paths whose value itself lies between the lines (not only few samples)
    marginal = np.flatnonzero(
        (table.verdict == Verdict.MARGINAL.rank)
        & table.has_rtt
        & (value_classes(policy, value) == Verdict.MARGINAL.rank)
    )
    if len(marginal):
        shown = _by_names(table, marginal)[:LISTED].tolist()
        labels = [f"{path_label(table.names[table.src[i]], table.names[table.dst[i]])} "
                  f"{fmt.us(float(value[i]))}" for i in shown]  # fmt: skip
        out.append(
            Recommendation(
                "marginal",
                f"{fmt.plural(len(marginal), 'marginal path')}: offload gains shrink here",
                f"Their {metric.value} lies between {fmt.us(policy.safe_max_us)} and "
                f"{fmt.us(policy.unsafe_above_us)} ({listed(labels, len(marginal))}): offload "
                "still works but TTFT gains shrink. Use them only if local NVMe is full, and "
                "re-test them at a quiet time to see whether the tail is congestion.",
            )
        )
    unstable = unstable_paths(results)
    if unstable and (table.verdict != Verdict.SAFE.rank).any():
        out.append(
            Recommendation(
                "info",
                f"{fmt.plural(unstable, 'safe path')} with unstable RTT",
                "Their standard deviation is at least 10% of the mean, and their spread exceeds "
                "that of the other paths of their tier by more than the run's repeatability; "
                "the verdict holds, but re-test them before sign-off to make sure the tail is "
                "not growing.",
            )
        )
    return out


def configuration_notes(results: Results) -> list[Recommendation]:
    """The fleet check's outliers (docs/evidence.md): named before hardware advice."""
    found = results.fleet
    if found is None or not found.outliers:
        return []
    nodes = sorted({o.node for o in found.outliers})
    return [
        Recommendation(
            "unsafe",
            f"Fix the configuration of {listed(nodes)} first",
            f"{fmt.plural(len(found.outliers), 'configuration outlier')}: "
            f"{listed([o.text for o in found.outliers])}. A wrong MTU, GID type or PFC/ECN "
            "setting makes exactly the tails and failures below; fix it and re-test before "
            "acting on any hardware advice.",
        )
    ]
