"""Every gate rule key in one place: its section, the type of its value, what it means and
the rule it builds. Parsing (``netqual.gate.profile``), evaluation (``netqual.gate.evaluate``:
which rules judge paths, so that an empty scope is a SKIP) and docs/gates.md (its key table,
held to this one by tests/unit/gate/test_registry.py) all read it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from netqual.files.tomlfile import Fields
from netqual.gate.decision import NoBlocking
from netqual.gate.fanin import MinFaninReaders
from netqual.gate.fleet import FleetConsistent, FleetExpected
from netqual.gate.hostpath import NicAffinity, PcieLinkFull
from netqual.gate.interference import InterferenceClean, MaxInterferenceRatio
from netqual.gate.model import Scope
from netqual.gate.regression import MaxP99IncreasePct, NoClassDrop, NoMissingPaths
from netqual.gate.rules import (
    MaxMetric,
    MaxVerdictCount,
    MinSafeFraction,
    MinSamples,
    MinWorkloadVerdict,
    NoErrors,
    Rule,
)
from netqual.model.decision import EvidenceKind
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict


class Value(enum.Enum):
    """The type of a key's value, as the profile writes it."""

    FLAG = "true | false"
    COUNT = "integer >= 0"
    FRACTION = "number 0..1"
    MICROSECONDS = "number >= 0 (us)"
    RATIO = "number >= 1"
    PERCENT = "number >= 0 (%)"
    VERDICT = "offload-safe | marginal"
    KINDS = "true | list of evidence kinds"


Build = Callable[[Scope, Any, Metric, Fields], Rule]


@dataclass(frozen=True)
class RuleSpec:
    key: str
    value: Value
    meaning: str  # one line: the docs' table says exactly this
    build: Build
    section: str = "limits"  # "limits" (and every [[scope]]) or "baseline"
    paths: bool = True  # judges the paths of its scope: an empty scope is a SKIP


def _read(f: Fields, spec: RuleSpec) -> Any:
    """The key's value, checked as its type says; None: the key asks for no rule."""
    key = spec.key
    if spec.value is Value.FLAG:
        return True if f.flag(key) else None
    if spec.value is Value.KINDS:
        if isinstance(f.table.get(key), list):
            return f.choices(EvidenceKind, key) or None
        return frozenset(EvidenceKind) if f.flag(key) else None
    if key not in f.table:
        return None
    if spec.value is Value.COUNT:
        return f.count(key)
    if spec.value is Value.FRACTION:
        return f.number(key, 0.0, positive=False, low=0.0, high=1.0)
    if spec.value in (Value.MICROSECONDS, Value.PERCENT):
        return f.number(key, 0.0, positive=False, low=0.0)
    if spec.value is Value.RATIO:
        return f.number(key, 1.0, positive=False, low=1.0)
    return f.choice(Verdict, key, Verdict.SAFE)


def _p99_rise(scope: Scope, pct: float, metric: Metric, f: Fields) -> Rule:
    return MaxP99IncreasePct(scope, pct, f.number("min_delta_us", 0.0, positive=False, low=0.0))


RULES: tuple[RuleSpec, ...] = (
    RuleSpec(
        "no_blocking",
        Value.KINDS,
        "the run's decision has nothing blocking (of these kinds: rtt, workload, loss, config, "
        "bandwidth, fanin, engine): each subject that holds a path below offload-safe (NODE, "
        "NODE/NIC, storage node, path, workload) fails it with its cause",
        lambda s, v, m, f: NoBlocking(s, v),
        paths=False,
    ),
    RuleSpec(
        "max_unsafe",
        Value.COUNT,
        "at most this many unsafe paths (decided verdicts)",
        lambda s, v, m, f: MaxVerdictCount(s, Verdict.UNSAFE, v),
    ),
    RuleSpec(
        "max_marginal",
        Value.COUNT,
        "at most this many marginal paths (decided verdicts)",
        lambda s, v, m, f: MaxVerdictCount(s, Verdict.MARGINAL, v),
    ),
    RuleSpec(
        "min_safe_fraction",
        Value.FRACTION,
        "share of offload-safe paths (waived paths count as safe)",
        lambda s, v, m, f: MinSafeFraction(s, v),
    ),
    RuleSpec(
        "max_metric_us",
        Value.MICROSECONDS,
        "no path's metric above this; a path without it, or whose metric rests on too few "
        "samples to be trusted, fails",
        lambda s, v, m, f: MaxMetric(s, m, v),
    ),
    RuleSpec(
        "min_samples",
        Value.COUNT,
        "every path has at least this many kept RTT samples",
        lambda s, v, m, f: MinSamples(s, v),
    ),
    RuleSpec(
        "no_errors",
        Value.FLAG,
        "no path failed to measure",
        lambda s, v, m, f: NoErrors(s),
    ),
    RuleSpec(
        "min_workload_verdict",
        Value.VERDICT,
        "every path's workload verdict at least this good; a path without one fails",
        lambda s, v, m, f: MinWorkloadVerdict(s, v),
    ),
    RuleSpec(
        "interference_clean",
        Value.FLAG,
        "no tier of the interference sample is affected; fails without an interference check",
        lambda s, v, m, f: InterferenceClean(s),
        paths=False,
    ),
    RuleSpec(
        "max_interference_p99_ratio",
        Value.RATIO,
        "median run/alone p99 over the sampled paths at most this",
        lambda s, v, m, f: MaxInterferenceRatio(s, v),
        paths=False,
    ),
    RuleSpec(
        "fleet_consistent",
        Value.FLAG,
        "no node's configuration differs from the majority of its role; fails without snapshots",
        lambda s, v, m, f: FleetConsistent(s),
        paths=False,
    ),
    RuleSpec(
        "fleet_expected",
        Value.FLAG,
        "every node has the values the policy's [fleet] expects; fails without snapshots",
        lambda s, v, m, f: FleetExpected(s),
        paths=False,
    ),
    RuleSpec(
        "nic_affinity",
        Value.FLAG,
        "every GPU has a PIX or PXB NIC on its rail; fails without a host audit",
        lambda s, v, m, f: NicAffinity(s),
        paths=False,
    ),
    RuleSpec(
        "pcie_link_full",
        Value.FLAG,
        "every GPU and NIC trained at its maximum PCIe speed and width",
        lambda s, v, m, f: PcieLinkFull(s),
        paths=False,
    ),
    RuleSpec(
        "min_fanin_readers",
        Value.COUNT,
        'every swept storage node "safe up to" at least this many readers (with --engine, '
        "through the engine too); fails without a sweep, on an unjudged node and on a "
        "preliminary sweep",
        lambda s, v, m, f: MinFaninReaders(s, v),
        paths=False,
    ),
    RuleSpec(
        "max_p99_increase_pct",
        Value.PERCENT,
        "no path's p99 up more than this percentage over the baseline (and min_delta_us)",
        _p99_rise,
        section="baseline",
    ),
    RuleSpec(
        "no_class_drop",
        Value.FLAG,
        "no path moved to a worse class than in the baseline",
        lambda s, v, m, f: NoClassDrop(s),
        section="baseline",
    ),
    RuleSpec(
        "no_missing_paths",
        Value.FLAG,
        "every baseline pair was measured again",
        lambda s, v, m, f: NoMissingPaths(s),
        section="baseline",
    ),
)

# Keys that set how rules behave rather than asking for one.
SETTINGS: dict[str, tuple[str, Value, str]] = {
    "complete": (
        "limits",
        Value.FLAG,
        "every scheduled pair measured (on unless false; false makes it a SKIP)",
    ),
    "required": ("baseline", Value.FLAG, "without --baseline: exit 2 (else baseline rules SKIP)"),
    "min_delta_us": ("baseline", Value.MICROSECONDS, "max_p99_increase_pct's noise floor"),
}

BY_KEY: dict[str, RuleSpec] = {r.key: r for r in RULES}


def keys(section: str) -> tuple[str, ...]:
    """Every key a section accepts: its rules' and its settings'."""
    rules = tuple(r.key for r in RULES if r.section == section)
    return rules + tuple(k for k, (sec, _, _) in SETTINGS.items() if sec == section)


def rules_of(f: Fields, scope: Scope, metric: Metric, section: str) -> list[Rule]:
    """The rules a profile table asks for, in registry order."""
    out = []
    for spec in RULES:
        if spec.section != section:
            continue
        value = _read(f, spec)
        if value is not None:
            out.append(spec.build(scope, value, metric, f))
    return out


def judges_paths(rule: Rule) -> bool:
    """Whether the rule judges the paths of its scope (else nodes, sweeps, the run)."""
    spec = BY_KEY.get(rule.key)
    return spec is not None and spec.paths


def compares_baseline(rule: Rule) -> bool:
    """Whether the rule judges the run against a baseline run (its key is [baseline]'s)."""
    spec = BY_KEY.get(rule.key)
    return spec is not None and spec.section == "baseline"


def docs_table() -> str:
    """docs/gates.md's key table: key, section, value, meaning."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| key | section | value | meaning |", "|---|---|---|---|"]
    for r in RULES:
        section = "[limits], [[scope]]" if r.section == "limits" else "[baseline]"
        lines.append(f"| `{r.key}` | {section} | {cell(r.value.value)} | {cell(r.meaning)} |")
    for key, (sec, value, meaning) in SETTINGS.items():
        lines.append(f"| `{key}` | [{sec}] | {cell(value.value)} | {cell(meaning)} |")
    return "\n".join(lines)
