"""The fleet configuration check (docs/evidence.md): which nodes' configuration differs.

Two rules over the nodes' snapshots (``model.fleet``). Consistency: within each inventory
role, every fleet key not in ``allow_differ`` should have one value; the nodes that do not
hold the majority value are outliers, listed with it and the nodes that have it (a tie has
no majority: every node of the key is listed). Expectations: a key the policy's ``[fleet]``
gives a value must have it on every node; a node that cannot say (``unknown``) is listed
too, since nothing shows that it matches. A key with an expectation is judged by it only.
Unknown values never count towards a majority.

A node whose inventory entry lists its ``nics`` (docs/rails.md) has its MTU compared on the
interfaces its probes use: per listed NIC, as ``mtu[railR]`` against the other nodes' NIC
on rail R, and on its main interface (the one its inventory address uses, which bipartite
and fan-in runs measure) as ``mtu[main]``; an expected ``mtu`` holds for each of them. A
management NIC at 1500 beside data NICs at 9000 is not an outlier, a data NIC at 1500 is,
named with its node and NIC (an agent that cannot say which interface its address uses,
without iproute2 or on a loopback route, has no ``mtu[main]``). Without ``nics`` the node's
``mtu`` covers every up (or operstate ``unknown`` and administratively up: TUN devices,
drivers without carrier), non-loopback interface, its main one among them.

Also the ``[fleet]`` section of the policy file, and the results file's ``fleet`` key.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from netqual.base.errors import PolicyError, ResultsFileError
from netqual.base.names import visible
from netqual.files.tomlfile import Fields, read_toml
from netqual.model.fleet import (
    FLEET_KEYS,
    KEY_PATTERN,
    MAIN_INTERFACE,
    MAJORITY_NAMED,
    MAX_KEYS,
    MAX_VALUE_CHARS,
    UNKNOWN,
    ComparedKey,
    ConfigSnapshot,
    FleetOutlier,
    FleetPolicy,
    FleetResult,
    SnapshotKey,
    value_text,
)
from netqual.model.node import Nic

GID_TYPES = {"roce v2": "RoCE v2", "rocev2": "RoCE v2", "roce v1": "RoCE v1", "rocev1": "RoCE v1"}
GID_TYPES["ib"] = "IB"
MAX_NODES = 10_000_000  # a count of nodes read from a file: beyond any fleet


def compared(snap: ConfigSnapshot, nics: Sequence[Nic] = ()) -> dict[str, tuple[str, str | None]]:
    """What is compared of one node: fleet key (or ``mtu[railR]``, ``mtu[main]``) ->
    (value, its interface)."""
    values: dict[str, tuple[str, str | None]] = {k: (v, None) for k, v in snap.fleet.items()}
    if not nics:
        return values
    del values["mtu"]
    for nic in sorted(nics, key=lambda n: n.rail):
        key = ComparedKey("mtu", f"rail{nic.rail}").text
        values[key] = (snap.of(SnapshotKey.nic(nic.name, "mtu")), nic.name)
    main = snap.get(MAIN_INTERFACE)
    if main != UNKNOWN and main not in {n.name for n in nics}:
        values[ComparedKey("mtu", "main").text] = (snap.of(SnapshotKey.nic(main, "mtu")), main)
    return values


def _base(key: str) -> str:
    return ComparedKey.parse(key).field  # mtu[rail1] -> mtu


def evaluate(
    snapshots: Sequence[ConfigSnapshot],
    roles: Mapping[str, str] | None = None,
    policy: FleetPolicy | None = None,
    nics: Mapping[str, Sequence[Nic]] | None = None,
) -> FleetResult:
    """Outliers of ``snapshots``: expectations first, then consistency, node order kept.
    ``nics``: the inventory's NICs per node (per-NIC ``mtu``)."""
    policy = policy or FleetPolicy()
    roles, nics = roles or {}, nics or {}
    expected = dict(policy.expected)
    values = {s.node: compared(s, nics.get(s.node, ())) for s in snapshots}
    outliers: list[FleetOutlier] = []
    for want_key, want in policy.expected:
        for snap in snapshots:
            role = roles.get(snap.node, "any")
            for key, (have, nic) in values[snap.node].items():
                if _base(key) == want_key and have != want:
                    outliers.append(
                        FleetOutlier(snap.node, key, have, expected=want, role=role, nic=nic)
                    )
    groups: dict[str, list[ConfigSnapshot]] = {}
    for snap in snapshots:
        groups.setdefault(roles.get(snap.node, "any"), []).append(snap)
    for role, members in groups.items():
        keys = dict.fromkeys(k for s in members for k in values[s.node])
        for key in keys:
            if _base(key) in expected or _base(key) in policy.allow_differ:
                continue
            found = [(s.node, values[s.node][key]) for s in members if key in values[s.node]]
            outliers += _differ(role, key, found)
    return FleetResult(tuple(snapshots), tuple(outliers), policy)


def retest(
    before: FleetResult | None,
    fresh: Sequence[ConfigSnapshot],
    roles: Mapping[str, str] | None = None,
    nics: Mapping[str, Sequence[Nic]] | None = None,
) -> FleetResult | None:
    """A retest's configuration check: the run it re-tests' snapshots (``before``) with
    the re-tested nodes' ``fresh`` ones in their place, judged by that run's ``[fleet]``
    policy, so a fix made since shows as fixed and one not made still shows. A node without
    a fresh snapshot keeps the run's (``carried``); ``before`` None (a run without
    snapshots) compares the fresh ones alone. No fresh snapshot at all: None, nothing is
    claimed (the decision says the configuration was not judged)."""
    if not fresh:
        return None
    new = {s.node: s for s in fresh}
    old = before.snapshot if before is not None else ()
    carried = tuple(s.node for s in old if s.node not in new)
    merged = [new.pop(s.node, s) for s in old]
    merged += new.values()  # re-tested nodes the run had no snapshot of
    found = evaluate(merged, roles, policy_of(before), nics)
    return dataclasses.replace(found, carried=carried)


def policy_of(before: FleetResult | None) -> FleetPolicy:
    """The ``[fleet]`` policy a results file's fleet check used; a file from before it was
    recorded: the expected values its outliers name (what was allowed to differ is lost)."""
    if before is None:
        return FleetPolicy()
    if not before.policy.empty:
        return before.policy
    expected = {_base(o.key): o.expected for o in before.outliers if o.expected is not None}
    return FleetPolicy(tuple(expected.items()))


def _differ(
    role: str, key: str, values: list[tuple[str, tuple[str, str | None]]]
) -> list[FleetOutlier]:
    known = [(n, v, nic) for n, (v, nic) in values if v != UNKNOWN]
    counts = Counter(v for _n, v, _nic in known)
    if len(counts) <= 1:
        return []
    ranked = counts.most_common()
    if ranked[0][1] == ranked[1][1]:  # a tie: no value is the majority
        return [FleetOutlier(n, key, v, role=role, nic=nic) for n, v, nic in known]
    majority, count = ranked[0]
    named = tuple(itertools.islice((n for n, v, _nic in known if v == majority), MAJORITY_NAMED))
    return [
        FleetOutlier(
            n,
            key,
            v,
            majority=majority,
            majority_nodes=named,
            role=role,
            nic=nic,
            majority_count=count,
            compared=len(known),
        )
        for n, v, nic in known
        if v != majority
    ]


def key_rows(result: FleetResult) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """Per fleet key: each value with the nodes that have it, most common first and
    unknown last (the table ``check --fleet`` and the report show)."""
    rows = []
    for key in FLEET_KEYS:
        by_value: dict[str, list[str]] = {}
        for s in result.snapshot:
            by_value.setdefault(s.fleet[key], []).append(s.node)
        ranked = sorted(by_value.items(), key=lambda kv: (kv[0] == UNKNOWN, -len(kv[1]), kv[0]))
        rows.append((key, ranked))
    return rows


def by_deviation(result: FleetResult) -> list[tuple[FleetOutlier, list[str]]]:
    """The outliers grouped by deviation (key, value, interface and what they differ
    from), in order of first appearance: one deviation on 1,000 nodes is one group of
    1,000 names, shown as one line (terminal) or row (report), never 1,000."""
    groups: dict[tuple[str, str, str | None, str], tuple[FleetOutlier, list[str]]] = {}
    for o in result.outliers:
        groups.setdefault((o.key, o.value, o.nic, o.against), (o, []))[1].append(o.node)
    return list(groups.values())


def who_text(nodes: Sequence[str], total: int) -> str:
    """The nodes of one deviation: 'all 1,000 nodes' or 'a1, a2 ... and 994 more'."""
    if len(nodes) == total and total > 2:
        return f"all {total:,} nodes"
    return ", ".join(nodes[:6]) + (f" and {len(nodes) - 6:,} more" if len(nodes) > 6 else "")


def nodes_text(names: Sequence[str], total: int) -> str:
    """'all 4' or 'a1, a2 +3'."""
    if len(names) == total and total > 1:
        return f"all {total:,}"
    shown = ", ".join(names[:6])
    return shown + (f" +{len(names) - 6:,}" if len(names) > 6 else "")


# -- [fleet] in the policy file --------------------------------------------------------


def parse_fleet(top: Fields) -> FleetPolicy:
    """``[fleet]`` of a policy file (``top``): fleet keys with expected values, and
    ``allow_differ``. Every mistake is a PolicyError naming ``fleet.KEY``."""
    f = top.sub("fleet")
    fail = f.fail
    expected: list[tuple[str, str]] = []
    allow: frozenset[str] = frozenset()
    for key, value in f.table.items():
        if key == "allow_differ":
            names = f.strings(key)
            unknown_keys = [v for v in names if v not in FLEET_KEYS]
            if unknown_keys:
                raise fail(key, f"unknown fleet key {unknown_keys[0]!r} ({_keys_hint()})")
            allow = frozenset(names)
            continue
        if key not in FLEET_KEYS:
            raise fail(key, f"unknown fleet key ({_keys_hint()})")
        text = value_text(value)
        if text is None or not text or len(text) > MAX_VALUE_CHARS:
            raise fail(key, f"{value!r} is not a value (a string, integer, true/false or list)")
        if key == "roce_gid_type":
            if text.lower() not in GID_TYPES:
                raise fail(key, f"{text!r} is not a GID type (RoCE v2, RoCE v1 or IB)")
            text = GID_TYPES[text.lower()]
        expected.append((key, text))
    both = allow & {k for k, _v in expected}
    if both:
        key = sorted(both)[0]
        raise fail(key, f"{key} has an expected value and is in allow_differ: choose one")
    return FleetPolicy(tuple(expected), allow)


def _keys_hint() -> str:
    return "fleet keys: " + ", ".join(FLEET_KEYS)


def load_fleet_policy(path: Path) -> FleetPolicy:
    """The ``[fleet]`` section of a policy file; none: no expectations, nothing excused."""
    data = read_toml(path, PolicyError)
    return parse_fleet(Fields(str(path), data, "", PolicyError))


# -- the results file's ``fleet`` key -------------------------------------------------


def to_dict(result: FleetResult) -> dict[str, Any]:
    outliers = []
    for o in result.outliers:
        item: dict[str, Any] = {"node": o.node, "key": o.key, "value": o.value, "role": o.role}
        if o.nic is not None:
            item["nic"] = o.nic
        if o.expected is not None:
            item["expected"] = o.expected
        else:
            item["majority"] = o.majority
            item["majority_nodes"] = list(o.majority_nodes[:MAJORITY_NAMED])
            if o.majority is not None:
                item["majority_count"] = o.holders
                if o.compared:
                    item["compared"] = o.compared
        outliers.append(item)
    doc: dict[str, Any] = {
        "snapshot": {s.node: dict(s.values) for s in result.snapshot},
        "outliers": outliers,
    }
    if not result.policy.empty:
        doc["policy"] = {
            "expected": dict(result.policy.expected),
            "allow_differ": sorted(result.policy.allow_differ),
        }
    if result.carried:
        doc["carried"] = list(result.carried)
    return doc


def from_dict(data: object, source: str) -> FleetResult:
    """The ``fleet`` key of a results file, checked; its text shown literally."""

    def bad(field: str, problem: str) -> ResultsFileError:
        return ResultsFileError(source, problem, f"fleet.{field}" if field else "fleet")

    if not isinstance(data, dict):
        raise bad("", "must be an object")
    nodes = data.get("snapshot", {})
    if not isinstance(nodes, dict):
        raise bad("snapshot", "must be an object of nodes")
    snaps = []
    for node, values in nodes.items():
        if not isinstance(values, dict) or len(values) > MAX_KEYS:
            raise bad(f"snapshot.{str(node)[:40]}", f"must be an object of <= {MAX_KEYS} keys")
        pairs = []
        for k, v in values.items():
            if not KEY_PATTERN.fullmatch(k) or not isinstance(v, str):
                raise bad(f"snapshot.{str(node)[:40]}", f"bad entry {str(k)[:40]!r}")
            pairs.append((k, visible(v[:MAX_VALUE_CHARS])))
        snaps.append(ConfigSnapshot(visible(str(node)[:255]), tuple(sorted(pairs))))
    raw = data.get("outliers", [])
    if not isinstance(raw, list):
        raise bad("outliers", "must be a list")
    outliers = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise bad(f"outliers[{i}]", "must be an object")
        text = {}
        for field in ("node", "key", "value", "expected", "majority", "role", "nic"):
            value = item.get(field)
            if value is not None and not isinstance(value, str):
                raise bad(f"outliers[{i}].{field}", "must be a string")
            text[field] = visible(value[:MAX_VALUE_CHARS]) if value is not None else None
        if text["node"] is None or text["key"] is None or text["value"] is None:
            raise bad(f"outliers[{i}]", "needs node, key and value")
        holders = item.get("majority_nodes", [])
        if not isinstance(holders, list) or not all(isinstance(h, str) for h in holders):
            raise bad(f"outliers[{i}].majority_nodes", "must be a list of node names")
        counts: dict[str, int] = {}
        for field in ("majority_count", "compared"):
            value = item.get(field, 0)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_NODES:
                raise bad(
                    f"outliers[{i}].{field}", f"must be a count of nodes (0 to {MAX_NODES:,})"
                )
            counts[field] = value
        outliers.append(
            FleetOutlier(
                text["node"],
                text["key"],
                text["value"],
                expected=text["expected"],
                majority=text["majority"],
                majority_nodes=tuple(visible(h[:255]) for h in holders[:MAJORITY_NAMED]),
                role=text["role"] or "any",
                nic=text["nic"],
                # an older file listed every holder: its length is the count
                majority_count=max(counts["majority_count"], len(holders)),
                compared=counts["compared"],
            )
        )
    carried = data.get("carried", [])
    if not isinstance(carried, list) or not all(isinstance(c, str) for c in carried):
        raise bad("carried", "must be a list of node names")
    return FleetResult(
        tuple(snaps),
        tuple(outliers),
        _policy_from(data.get("policy"), bad),
        tuple(visible(c[:255]) for c in carried[:MAX_NODES]),
    )


def _policy_from(data: object, bad: Callable[[str, str], ResultsFileError]) -> FleetPolicy:
    """``fleet.policy``: the ``[fleet]`` the check used (absent: none, or an older file)."""
    if data is None:
        return FleetPolicy()
    if not isinstance(data, dict):
        raise bad("policy", "must be an object")
    expected = data.get("expected", {})
    if not isinstance(expected, dict) or len(expected) > len(FLEET_KEYS):
        raise bad("policy.expected", "must be an object of fleet keys")
    pairs = []
    for key, value in expected.items():
        if key not in FLEET_KEYS or not isinstance(value, str):
            raise bad("policy.expected", f"bad entry {str(key)[:40]!r}")
        pairs.append((key, visible(value[:MAX_VALUE_CHARS])))
    allow = data.get("allow_differ", [])
    keys = allow if isinstance(allow, list) else [None]
    if not all(isinstance(a, str) and a in FLEET_KEYS for a in keys):
        raise bad("policy.allow_differ", "must be a list of fleet keys")
    return FleetPolicy(tuple(pairs), frozenset(allow))
