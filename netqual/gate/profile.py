"""Gate profiles (TOML): limits for all paths, per-scope limits, baseline rules, waivers.

See docs/gates.md for the format. Every mistake is a ProfileError naming file and field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from netqual.analysis.policy import DEFAULT_POLICY
from netqual.base.errors import ProfileError
from netqual.files.tomlfile import Fields, loads_toml
from netqual.gate.complete import Complete
from netqual.gate.model import Scope
from netqual.gate.registry import keys, rules_of
from netqual.gate.rules import Rule
from netqual.model.node import Role
from netqual.model.path import Tier
from netqual.model.policy import Waiver
from netqual.model.stats import Metric

LIMIT_KEYS = keys("limits")
SCOPE_KEYS = ("name", "racks", "roles", "nodes", "tiers", "rails")
BASELINE_KEYS = keys("baseline")
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


def _scope(f: Fields) -> Scope:
    scope = Scope(
        name=f.text("name", f.prefix),
        racks=frozenset(f.strings("racks")),
        roles=f.choices(Role, "roles"),
        nodes=frozenset(f.strings("nodes")),
        tiers=f.choices(Tier, "tiers"),
        rails=_rails(f),
    )
    if scope.is_all:
        raise f.fail("", "a scope needs at least one of racks, roles, nodes, tiers, rails")
    return scope


def _rails(f: Fields) -> frozenset[int]:
    value = f.table.get("rails", [])
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise f.fail("rails", "expected a list of rail numbers (integers >= 0)")
    return frozenset(value)


def _waiver(f: Fields) -> Waiver:
    until = f.date("until", required=True)
    assert until is not None
    return Waiver(
        src=f.text("src"),
        dst=f.text("dst"),
        until=until,
        reason=f.text("reason"),
        owner=f.text("owner"),
    )


def parse_profile(data: Mapping[str, Any], source: str) -> Profile:
    f = Fields(source, data, "", ProfileError)
    f.check_keys(("profile", "limits", "scope", "baseline", "waiver"))
    head = f.sub("profile", ("name", "description", "metric"))
    name = head.text("name", Path(source).stem)
    metric = head.choice(Metric, "metric", DEFAULT_POLICY.metric)
    limits = f.sub("limits", LIMIT_KEYS)
    rules = rules_of(limits, Scope(), metric, "limits")
    for s in f.tables("scope", SCOPE_KEYS + tuple(k for k in LIMIT_KEYS if k != "complete")):
        rules += rules_of(s, _scope(s), metric, "limits")
    base = f.sub("baseline", BASELINE_KEYS)
    rules += rules_of(base, Scope(), metric, "baseline")
    waivers = f.tables("waiver", WAIVER_KEYS)
    if not rules:
        raise f.fail("limits", "the profile has no rules")
    # On unless the profile relaxes it: a verdict covers only the pairs that were measured.
    strict = limits.flag("complete", True)
    rules.insert(0, Complete(Scope(), relaxed_by=None if strict else "complete = false"))
    names = [r.name for r in rules]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise f.fail("scope", f"two rules are both named {dup!r}; give each scope its own name")
    return Profile(
        name=name,
        description=head.string("description", "", empty_ok=True) or "",
        source=source,
        metric=metric,
        rules=tuple(rules),
        waivers=tuple(_waiver(w) for w in waivers),
        baseline_required=base.flag("required"),
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
