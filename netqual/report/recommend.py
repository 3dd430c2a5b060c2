"""Plain-language recommendations derived from the verdicts.

Attribution, most specific cause last. First the topology: when same-rack paths are
mostly offload-safe but most paths of a farther tier (cross-rack, remote) are not, the
distance is the cause (offload inside racks / not to the remote site), and those paths
are not held against their nodes. Then a node most of whose remaining paths fail is the
likely cause (keep it on local NVMe); else a rack pair most of whose paths fail points at
the links between the racks; what is left are isolated paths to re-test.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from netqual.models import Node, PathResult, Results, Tier, Verdict, rank_key
from netqual.report import fmt

MAJORITY = 0.5
NEAR_SAFE = 0.75  # same-rack share that must be offload-safe before distance is blamed
LISTED = 8


@dataclass(frozen=True)
class Recommendation:
    severity: str  # css class: unsafe | marginal | safe | info
    title: str
    text: str


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED])
    return shown + (f" and {len(items) - LISTED} more" if len(items) > LISTED else "")


def _worst(paths: Sequence[PathResult], results: Results) -> PathResult:
    metric = results.run.policy.metric
    return max(paths, key=lambda p: rank_key(p, metric))


def _short(p: PathResult, results: Results) -> str:
    if p.error or p.rtt is None:
        return f"{p.src} -> {p.dst}: {p.error or 'no samples'}"
    metric = results.run.policy.metric
    return f"{p.src} -> {p.dst}, {metric.value} {fmt.us(p.rtt.value(metric))}"


def recommend(results: Results, expired_waivers: Sequence[str] = ()) -> list[Recommendation]:
    policy = results.run.policy
    out: list[Recommendation] = []
    bad = [p for p in results.paths if p.verdict is not Verdict.SAFE]
    if not results.paths:
        return [
            Recommendation(
                "info",
                "Nothing measured",
                "No path was measured: check the inventory and agents, then re-run.",
            )
        ]
    if not bad:
        out.append(
            Recommendation(
                "safe",
                "Offload can go live on every measured path",
                f"All {len(results.paths):,} paths meet the policy ({policy.metric.value} <= "
                f"{policy.safe_max_us:g} us). Keep this results file as the baseline and "
                "re-qualify "
                "(netqual gate --baseline) after any fabric, firmware or cabling change.",
            )
        )
    nodes = {n.name: n for n in results.nodes}
    tier_recs, far_tiers = _tiers(results)
    out += tier_recs
    bad = [p for p in bad if p.tier not in far_tiers]
    per_node: dict[str, Counter[bool]] = defaultdict(Counter)
    for p in results.paths:
        if p.tier in far_tiers:
            continue
        is_bad = p.verdict is not Verdict.SAFE
        per_node[p.src][is_bad] += 1
        per_node[p.dst][is_bad] += 1
    culprits = sorted(
        (
            n
            for n, c in per_node.items()
            if c[True] >= 2 and c[True] / (c[True] + c[False]) >= MAJORITY
        ),
        key=lambda n: (-per_node[n][True], n),
    )
    culprit_set = set(culprits)
    racks_all_bad = _whole_racks(culprit_set, results.nodes)
    for rack in racks_all_bad:
        members = [n.name for n in results.nodes if n.rack == rack]
        out.append(
            Recommendation(
                "unsafe",
                f"Keep rack {rack} on local NVMe",
                f"Most paths of every node in rack {rack} ({_names(members)}) are not "
                "offload-safe. "
                "Check the rack's top-of-rack switch and its uplinks, then re-test the rack.",
            )
        )
    for name in culprits:
        node = nodes.get(name)
        if node is not None and node.rack in racks_all_bad:
            continue
        c = per_node[name]
        mine = [p for p in bad if name in (p.src, p.dst)]
        out.append(
            Recommendation(
                "unsafe",
                f"Keep {name} on local NVMe",
                f"{c[True]} of {c[True] + c[False]} paths of {name} are not offload-safe (worst "
                f"{_short(_worst(mine, results), results)}). Check its NIC, cable and switch port "
                "(and NIC firmware and MTU), then re-test it.",
            )
        )
    rest = [p for p in bad if p.src not in culprit_set and p.dst not in culprit_set]
    pair_recs, bad_pairs = _rack_pairs(rest, results, nodes)
    out += pair_recs
    isolated = [p for p in rest if _rack_key(p, nodes) not in bad_pairs]
    if isolated:
        labels = [
            _short(p, results)
            for p in sorted(isolated, key=lambda p: (-p.verdict.rank, p.src, p.dst))
        ]
        out.append(
            Recommendation(
                "marginal" if all(p.verdict is Verdict.MARGINAL for p in isolated) else "unsafe",
                f"Re-test {fmt.plural(len(isolated), 'isolated path')}",
                "Their nodes are fine on other paths, so the cause is likely transient or one "
                "link: "
                f"{_names(labels)}. Until a re-test passes, do not offload KV between these pairs.",
            )
        )
    out += _measurement_notes(results)
    for label in expired_waivers:
        out.append(
            Recommendation(
                "marginal",
                f"Waiver expired: {label}",
                "The waiver no longer applies; fix the path or renew the waiver with a new date.",
            )
        )
    return out


_FAR_TIERS = (Tier.CROSS_RACK, Tier.REMOTE)


def _tiers(results: Results) -> tuple[list[Recommendation], set[Tier]]:
    """Tiers whose paths fail because of distance: same-rack mostly safe, this tier not."""
    by_tier: dict[Tier, list[PathResult]] = defaultdict(list)
    for p in results.paths:
        by_tier[p.tier].append(p)
    near = by_tier.get(Tier.SAME_RACK, [])
    near_safe = sum(p.verdict is Verdict.SAFE for p in near)
    if not near or near_safe / len(near) < NEAR_SAFE:
        return [], set()
    metric = results.run.policy.metric
    out: list[Recommendation] = []
    far: set[Tier] = set()
    for tier in _FAR_TIERS:
        paths = by_tier.get(tier, [])
        bad = [p for p in paths if p.verdict is not Verdict.SAFE]
        if len(bad) < 2 or len(bad) / len(paths) < MAJORITY:
            continue
        far.add(tier)
        values = sorted(p.rtt.value(metric) for p in bad if p.rtt is not None)
        spread = f", {metric.value} {fmt.us(values[0])} to {fmt.us(values[-1])}" if values else ""
        hops = sorted({p.hops for p in paths if p.hops is not None})
        hop_text = f" ({'/'.join(map(str, hops))} hops)" if hops else ""
        unsafe = any(p.verdict is Verdict.UNSAFE for p in bad)
        share = (
            f"{len(bad)} of {len(paths)} {tier.value} paths{hop_text} are not offload-safe"
            f"{spread}, while {near_safe} of {len(near)} same-rack paths are."
        )
        if tier is Tier.CROSS_RACK:
            title = "Keep KV offload inside each rack"
            advice = (
                "Place KV-cache storage in the same rack as the compute nodes that read it, "
                "or bring the leaf-spine latency down, then re-test."
            )
        else:
            title = "Do not offload KV-cache to the remote site"
            advice = (
                "Serve KV-cache from storage at the local site; the remote site is too far for "
                "reads on the request's critical path."
            )
        out.append(Recommendation("unsafe" if unsafe else "marginal", title, f"{share} {advice}"))
    return out, far


def _whole_racks(culprits: set[str], nodes: Sequence[Node]) -> list[str]:
    by_rack: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        if n.rack:
            by_rack[n.rack].append(n.name)
    return sorted(
        r for r, members in by_rack.items() if len(members) >= 2 and set(members) <= culprits
    )


def _rack_key(p: PathResult, nodes: dict[str, Node]) -> tuple[str, str] | None:
    a, b = nodes.get(p.src), nodes.get(p.dst)
    if a is None or b is None or a.rack is None or b.rack is None:
        return None
    return (min(a.rack, b.rack), max(a.rack, b.rack))


def _rack_pairs(
    rest: Sequence[PathResult], results: Results, nodes: dict[str, Node]
) -> tuple[list[Recommendation], set[tuple[str, str]]]:
    totals: Counter[tuple[str, str]] = Counter()
    for p in results.paths:
        k = _rack_key(p, nodes)
        if k:
            totals[k] += 1
    bad_by: dict[tuple[str, str], list[PathResult]] = defaultdict(list)
    for p in rest:
        k = _rack_key(p, nodes)
        if k:
            bad_by[k].append(p)
    out = []
    flagged: set[tuple[str, str]] = set()
    for (ra, rb), paths in sorted(bad_by.items()):
        if len(paths) < 2 or len(paths) / totals[(ra, rb)] < MAJORITY:
            continue
        flagged.add((ra, rb))
        worst = _short(_worst(paths, results), results)
        share = f"{len(paths)} of {totals[(ra, rb)]} paths"
        if ra == rb:
            title, hint = (
                f"Check the switch inside rack {ra}",
                "Check the rack's top-of-rack switch",
            )
        else:
            title = f"Do not offload KV between racks {ra} and {rb}"
            hint = "Keep offload inside each rack, and check the uplinks and spine between them"
        out.append(
            Recommendation(
                "unsafe" if any(p.verdict is Verdict.UNSAFE for p in paths) else "marginal",
                title,
                f"{share} are not offload-safe (worst {worst}). {hint}; then re-test.",
            )
        )
    return out, flagged


def _measurement_notes(results: Results) -> list[Recommendation]:
    policy = results.run.policy
    out = []
    errors = [p for p in results.paths if p.error]
    if errors:
        out.append(
            Recommendation(
                "unsafe",
                f"{fmt.plural(len(errors), 'path')} could not be measured",
                f"For example {errors[0].src} -> {errors[0].dst}: {errors[0].error}. Unmeasured "
                "paths count "
                "as unsafe. Check that the agents run and can reach each other, then re-test.",
            )
        )
    few = [p for p in results.paths if p.rtt is not None and p.rtt.samples < policy.min_samples]
    if few:
        out.append(
            Recommendation(
                "marginal",
                f"{fmt.plural(len(few), 'path')} with too few samples",
                f"The policy needs {policy.min_samples:,} kept samples to call a path "
                "offload-safe. "
                f"Re-test with --iterations {policy.min_samples} or more.",
            )
        )
    marginal = sum(1 for p in results.paths if p.verdict is Verdict.MARGINAL)
    if marginal:
        out.append(
            Recommendation(
                "marginal",
                f"{fmt.plural(marginal, 'marginal path')}: offload gains shrink here",
                f"Between {policy.safe_max_us:g} and {policy.unsafe_above_us:g} us of "
                f"{policy.metric.value} "
                "offload still works but TTFT gains shrink. Use them only if local NVMe is full, "
                "and "
                "re-test them at a quiet time to see whether the tail is congestion.",
            )
        )
    unstable = sum(
        1
        for p in results.paths
        if p.verdict is Verdict.SAFE and p.rtt is not None and p.rtt.unstable
    )
    if unstable:
        out.append(
            Recommendation(
                "info",
                f"{fmt.plural(unstable, 'safe path')} with unstable RTT",
                "Their standard deviation is at least 10% of the mean; the verdict holds, but "
                "re-test "
                "them before sign-off to make sure the tail is not growing.",
            )
        )
    return out
