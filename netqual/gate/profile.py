"""Gate profiles (TOML): limits for all paths, per-scope limits, baseline rules, waivers.

See docs/gates.md for the format. Every mistake is a ProfileError naming file and field.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from netqual.analysis.policy import DEFAULT_POLICY
from netqual.choices import ChoiceError, parse_choice
from netqual.errors import ProfileError
from netqual.gate.complete import Complete
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
from netqual.models import Metric, Role, Tier, Verdict, Waiver
from netqual.tomlfile import loads_toml

LIMIT_KEYS = (
    "max_unsafe",
    "max_marginal",
    "min_safe_fraction",
    "max_metric_us",
    "min_samples",
    "no_errors",
    "min_workload_verdict",
    "interference_clean",
    "max_interference_p99_ratio",
    "fleet_consistent",
    "fleet_expected",
    "nic_affinity",
    "pcie_link_full",
    "min_fanin_readers",
)
SCOPE_KEYS = ("name", "racks", "roles", "nodes", "tiers", "rails")
BASELINE_KEYS = (
    "required",
    "max_p99_increase_pct",
    "min_delta_us",
    "no_class_drop",
    "no_missing_paths",
)
WAIVER_KEYS = ("src", "dst", "until", "reason", "owner")


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    source: str
    metric: Metric
    rules: tuple[Rule, ...]
    waivers: tuple[Waiver, ...] = ()
    baseline_required: bool = False


class _Fields:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> ProfileError:
        return ProfileError(self.source, problem, field=where)

    def table(self, value: Any, where: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, "expected a table")
        for k in value:
            if k not in allowed:
                raise self.fail(f"{where}.{k}", f"unknown key (allowed: {', '.join(allowed)})")
        return value

    def count(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(where, f"expected a non-negative integer, got {value!r}")
        return value

    def number(self, value: Any, where: str, lo: float = 0.0, hi: float | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < lo:
            raise self.fail(where, f"expected a number >= {lo:g}, got {value!r}")
        if hi is not None and value > hi:
            raise self.fail(where, f"expected a number <= {hi:g}, got {value!r}")
        return float(value)

    def flag(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {value!r}")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"expected a non-empty string, got {value!r}")
        return value

    def strings(self, value: Any, where: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, "expected a list of strings")
        return list(value)


def _limit_rules(
    f: _Fields, t: Mapping[str, Any], where: str, scope: Scope, metric: Metric
) -> list[Rule]:
    rules: list[Rule] = []
    if "max_unsafe" in t:
        rules.append(
            MaxVerdictCount(scope, Verdict.UNSAFE, f.count(t["max_unsafe"], f"{where}.max_unsafe"))
        )
    if "max_marginal" in t:
        limit = f.count(t["max_marginal"], f"{where}.max_marginal")
        rules.append(MaxVerdictCount(scope, Verdict.MARGINAL, limit))
    if "min_safe_fraction" in t:
        frac = f.number(t["min_safe_fraction"], f"{where}.min_safe_fraction", 0.0, 1.0)
        rules.append(MinSafeFraction(scope, frac))
    if "max_metric_us" in t:
        rules.append(
            MaxMetric(scope, metric, f.number(t["max_metric_us"], f"{where}.max_metric_us"))
        )
    if "min_samples" in t:
        rules.append(MinSamples(scope, f.count(t["min_samples"], f"{where}.min_samples")))
    if "no_errors" in t and f.flag(t["no_errors"], f"{where}.no_errors"):
        rules.append(NoErrors(scope))
    if "min_workload_verdict" in t:
        key = f"{where}.min_workload_verdict"
        try:
            verdict = parse_choice(Verdict, f.text(t["min_workload_verdict"], key), key)
        except ChoiceError as err:
            raise f.fail(err.where, err.problem) from err
        rules.append(MinWorkloadVerdict(scope, verdict))
    if "interference_clean" in t and f.flag(t["interference_clean"], f"{where}.interference_clean"):
        rules.append(InterferenceClean(scope))
    if "max_interference_p99_ratio" in t:
        key = f"{where}.max_interference_p99_ratio"
        rules.append(
            MaxInterferenceRatio(scope, f.number(t["max_interference_p99_ratio"], key, 1.0))
        )
    if "fleet_consistent" in t and f.flag(t["fleet_consistent"], f"{where}.fleet_consistent"):
        rules.append(FleetConsistent(scope))
    if "fleet_expected" in t and f.flag(t["fleet_expected"], f"{where}.fleet_expected"):
        rules.append(FleetExpected(scope))
    if "nic_affinity" in t and f.flag(t["nic_affinity"], f"{where}.nic_affinity"):
        rules.append(NicAffinity(scope))
    if "pcie_link_full" in t and f.flag(t["pcie_link_full"], f"{where}.pcie_link_full"):
        rules.append(PcieLinkFull(scope))
    if "min_fanin_readers" in t:
        key = f"{where}.min_fanin_readers"
        rules.append(MinFaninReaders(scope, f.count(t["min_fanin_readers"], key)))
    return rules


def _scope(f: _Fields, t: Mapping[str, Any], where: str) -> Scope:
    try:
        roles = frozenset(
            parse_choice(Role, r, f"{where}.roles")
            for r in f.strings(t.get("roles", []), f"{where}.roles")
        )
        tiers = frozenset(
            parse_choice(Tier, x, f"{where}.tiers")
            for x in f.strings(t.get("tiers", []), f"{where}.tiers")
        )
    except ChoiceError as err:
        raise f.fail(err.where, err.problem) from err
    scope = Scope(
        name=f.text(t.get("name", where), f"{where}.name"),
        racks=frozenset(f.strings(t.get("racks", []), f"{where}.racks")),
        roles=roles,
        nodes=frozenset(f.strings(t.get("nodes", []), f"{where}.nodes")),
        tiers=tiers,
        rails=_rails(f, t.get("rails", []), f"{where}.rails"),
    )
    if scope.is_all:
        raise f.fail(where, "a scope needs at least one of racks, roles, nodes, tiers, rails")
    return scope


def _rails(f: _Fields, value: Any, where: str) -> frozenset[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise f.fail(where, "expected a list of rail numbers (integers >= 0)")
    return frozenset(value)


def _waiver(f: _Fields, t: Any, where: str) -> Waiver:
    t = f.table(t, where, WAIVER_KEYS)
    for k in WAIVER_KEYS:
        if k not in t:
            raise f.fail(f"{where}.{k}", "missing required key")
    until = t["until"]
    if isinstance(until, str):
        try:
            until = dt.date.fromisoformat(until)
        except ValueError as err:
            raise f.fail(f"{where}.until", f"not a date: {until!r} (use 2026-12-31)") from err
    if isinstance(until, dt.datetime) or not isinstance(until, dt.date):
        raise f.fail(f"{where}.until", f"expected a date like 2026-12-31, got {until!r}")
    return Waiver(
        src=f.text(t["src"], f"{where}.src"),
        dst=f.text(t["dst"], f"{where}.dst"),
        until=until,
        reason=f.text(t["reason"], f"{where}.reason"),
        owner=f.text(t["owner"], f"{where}.owner"),
    )


def parse_profile(data: Mapping[str, Any], source: str) -> Profile:
    f = _Fields(source)
    f.table(data, "(top level)", ("profile", "limits", "scope", "baseline", "waiver"))
    head = f.table(data.get("profile", {}), "profile", ("name", "description", "metric"))
    name = f.text(head.get("name", Path(source).stem), "profile.name")
    try:
        metric = parse_choice(
            Metric, head.get("metric", DEFAULT_POLICY.metric.value), "profile.metric"
        )
    except ChoiceError as err:
        raise f.fail(err.where, err.problem) from err
    limits = f.table(data.get("limits", {}), "limits", (*LIMIT_KEYS, "complete"))
    rules = _limit_rules(f, limits, "limits", Scope(), metric)
    scopes = data.get("scope", [])
    if not isinstance(scopes, list):
        raise f.fail("scope", "expected [[scope]] tables")
    for i, s in enumerate(scopes):
        where = f"scope[{i}]"
        t = f.table(s, where, SCOPE_KEYS + LIMIT_KEYS)
        rules += _limit_rules(f, t, where, _scope(f, t, where), metric)
    base = f.table(data.get("baseline", {}), "baseline", BASELINE_KEYS)
    if "max_p99_increase_pct" in base:
        pct = f.number(base["max_p99_increase_pct"], "baseline.max_p99_increase_pct")
        floor = f.number(base.get("min_delta_us", 0.0), "baseline.min_delta_us")
        rules.append(MaxP99IncreasePct(Scope(), pct, floor))
    if f.flag(base.get("no_class_drop", False), "baseline.no_class_drop"):
        rules.append(NoClassDrop(Scope()))
    if f.flag(base.get("no_missing_paths", False), "baseline.no_missing_paths"):
        rules.append(NoMissingPaths(Scope()))
    waivers = data.get("waiver", [])
    if not isinstance(waivers, list):
        raise f.fail("waiver", "expected [[waiver]] tables")
    if not rules:
        raise f.fail("limits", "the profile has no rules")
    # On unless the profile relaxes it: a verdict covers only the pairs that were measured.
    strict = f.flag(limits.get("complete", True), "limits.complete")
    rules.insert(0, Complete(Scope(), relaxed_by=None if strict else "complete = false"))
    names = [r.name for r in rules]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise f.fail("scope", f"two rules are both named {dup!r}; give each scope its own name")
    return Profile(
        name=name,
        description=str(head.get("description", "")),
        source=source,
        metric=metric,
        rules=tuple(rules),
        waivers=tuple(_waiver(f, w, f"waiver[{i}]") for i, w in enumerate(waivers)),
        baseline_required=f.flag(base.get("required", False), "baseline.required"),
    )


def parse_profile_text(text: str, source: str) -> Profile:
    return parse_profile(loads_toml(text, source, ProfileError), source)


def load_profile(path: Path) -> Profile:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ProfileError(str(path), f"cannot read: {err.strerror or err}") from err
    return parse_profile_text(text, str(path))


def default_profile() -> Profile:
    """The built-in profile: every path offload-safe and measured (netqual/gate/default.toml)."""
    text = (files("netqual.gate") / "default.toml").read_text(encoding="utf-8")
    return parse_profile_text(text, "built-in default profile")
