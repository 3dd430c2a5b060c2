"""Plain-language recommendations derived from the verdicts.

Ranked by real cause. First the measurement itself: paths that are marginal only because
the plan kept too few samples (their metric is within the safe line), then paths that
could not be measured (configuration). Neither says anything about the hardware;
localisation leaves sample-limited paths out, and the hardware advice follows.

Attribution, most specific cause last. First the topology: when same-rack paths are
mostly offload-safe but most paths of a farther tier (cross-rack, remote) are not, the
distance is the cause (offload inside racks / not to the remote site), and those paths
are not held against their nodes. Then a node most of whose remaining paths fail is the
likely cause (keep it on local NVMe); else a rack pair most of whose paths fail points at
the links between the racks; what is left are isolated paths to re-test.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netqual import localise
from netqual.models import Metric, Node, PathResult, Results, Suspect, SuspectKind, Tier, Verdict
from netqual.policy import sample_limited
from netqual.report import fmt

MAJORITY = 0.5
LISTED = 8


@dataclass(frozen=True)
class Recommendation:
    severity: str  # css class: unsafe | marginal | safe | info
    title: str
    text: str


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED])
    return shown + (f" and {len(items) - LISTED} more" if len(items) > LISTED else "")


def _ev(value: object) -> Mapping[str, Any]:
    assert isinstance(value, Mapping)
    return value


def _short(e: Mapping[str, Any], metric: Metric) -> str:
    """One path of a suspect's evidence: 'a -> b, p99 812.0 us' or 'a -> b: <error>'."""
    if e["error"] or e["value_us"] is None:
        return f"{e['src']} -> {e['dst']}: {e['error'] or 'no samples'}"
    return f"{e['src']} -> {e['dst']}, {metric.value} {fmt.us(e['value_us'])}"


def recommend(results: Results, expired_waivers: Sequence[str] = ()) -> list[Recommendation]:
    policy = results.run.policy
    out: list[Recommendation] = _sample_notes(results) + _error_notes(results)
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
        shaky = _unstable(results)
        # One sentence: "go live" and "re-test first" never stand side by side.
        title = (
            "Offload can go live on every measured path"
            if not shaky
            else f"Offload can go live once {fmt.plural(shaky, 'unstable path')} pass a re-test"
        )
        caveat = (
            f" {fmt.plural(shaky, 'path')} have a standard deviation of at least 10% of the "
            "mean: re-test them before sign-off to make sure the tail is not growing."
            if shaky
            else ""
        )
        out.append(
            Recommendation(
                "marginal" if shaky else "safe",
                title,
                f"All {len(results.paths):,} paths meet the policy ({policy.metric.value} <= "
                f"{policy.safe_max_us:g} us).{caveat} Keep this results file as the baseline "
                "and re-qualify (netqual gate --baseline) after any fabric, firmware or "
                "cabling change.",
            )
        )
    nodes = {n.name: n for n in results.nodes}
    metric = policy.metric
    cols = localise.columns(results, metric)
    found = localise.localise(cols, metric)
    out += _tiers(results, localise.distance_tiers(cols))
    by_kind: dict[SuspectKind, list[Suspect]] = defaultdict(list)
    for s in found:
        by_kind[s.kind].append(s)
    culprit_set = {s.subject for s in by_kind[SuspectKind.NODE]}
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
    for s in by_kind[SuspectKind.NODE]:
        node = nodes.get(s.subject)
        if node is not None and node.rack in racks_all_bad:
            continue
        e = s.evidence
        out.append(
            Recommendation(
                "unsafe",
                f"Keep {s.subject} on local NVMe",
                f"{e['bad_paths']} of {e['paths']} paths of {s.subject} are not offload-safe "
                f"(worst {_short(_ev(e['worst']), metric)}). Check its NIC, cable and switch "
                "port (and NIC firmware and MTU), then re-test it.",
            )
        )
    out += [_rack_pair(s, metric) for s in by_kind[SuspectKind.RACK_PAIR]]
    links = [_ev(s.evidence) for s in by_kind[SuspectKind.LINK]]
    if links:
        out.append(
            Recommendation(
                "marginal" if all(e["verdict"] == "marginal" for e in links) else "unsafe",
                f"Re-test {fmt.plural(len(links), 'isolated path')}",
                "Their nodes are fine on other paths, so the cause is likely transient or one "
                "link: "
                f"{_names([_short(e, metric) for e in links])}. Until a re-test passes, do not "
                "offload KV between these pairs.",
            )
        )
    for s in by_kind[SuspectKind.ASYMMETRY]:
        fwd, rev = _ev(s.evidence["forward"]), _ev(s.evidence["reverse"])
        out.append(
            Recommendation(
                "unsafe" if "unsafe" in (fwd["verdict"], rev["verdict"]) else "marginal",
                f"Check the link between {s.subject.replace('<->', ' and ')} in both directions",
                f"The two directions disagree: {_short(fwd, metric)} ({fwd['verdict']}) but "
                f"{_short(rev, metric)} ({rev['verdict']}). One-way trouble points at a cable "
                "or transceiver, or at ECN/PFC set differently on the two switch ports.",
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


def _tiers(results: Results, far: set[Tier]) -> list[Recommendation]:
    """Tiers whose paths fail because of distance (``localise.distance_tiers``)."""
    by_tier: dict[Tier, list[PathResult]] = defaultdict(list)
    for p in results.paths:
        by_tier[p.tier].append(p)
    near = by_tier.get(Tier.SAME_RACK, [])
    policy = results.run.policy
    near_safe = sum(p.verdict is Verdict.SAFE or sample_limited(policy, p.rtt) for p in near)
    metric = policy.metric
    out: list[Recommendation] = []
    for tier in _FAR_TIERS:
        if tier not in far:
            continue
        paths = by_tier.get(tier, [])
        bad = [
            p for p in paths if p.verdict is not Verdict.SAFE and not sample_limited(policy, p.rtt)
        ]
        values = sorted(p.rtt.value(metric) for p in bad if p.rtt is not None)
        spread = f", {metric.value} {fmt.us(values[0])} to {fmt.us(values[-1])}" if values else ""
        hops = sorted({p.hops for p in paths if p.hops is not None})
        hop_text = f" ({'/'.join(map(str, hops))} hops)" if hops else ""
        unsafe = any(p.verdict is Verdict.UNSAFE for p in bad)
        share = (
            f"{len(bad)} of {len(paths)} {tier.value} paths{hop_text} are not offload-safe"
            f"{spread}, while {near_safe} of {len(near)} same-rack paths are within "
            f"{fmt.us(policy.safe_max_us)}."
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
    return out


def _whole_racks(culprits: set[str], nodes: Sequence[Node]) -> list[str]:
    by_rack: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        if n.rack:
            by_rack[n.rack].append(n.name)
    return sorted(
        r for r, members in by_rack.items() if len(members) >= 2 and set(members) <= culprits
    )


def _rack_pair(s: Suspect, metric: Metric) -> Recommendation:
    e = s.evidence
    ra, rb = _ev(e)["racks"]
    worst = _ev(e["worst"])
    if ra == rb:
        title, hint = f"Check the switch inside rack {ra}", "Check the rack's top-of-rack switch"
    else:
        title = f"Do not offload KV between racks {ra} and {rb}"
        hint = "Keep offload inside each rack, and check the uplinks and spine between them"
    return Recommendation(
        "unsafe" if worst["verdict"] == "unsafe" else "marginal",
        title,
        f"{e['bad_paths']} of {e['paths']} paths are not offload-safe "
        f"(worst {_short(worst, metric)}). {hint}; then re-test.",
    )


def _sample_notes(results: Results) -> list[Recommendation]:
    """Cause 1: the plan was too short to call anything offload-safe."""
    policy = results.run.policy
    few = [p for p in results.paths if sample_limited(policy, p.rtt)]
    if not few:
        return []
    metric = policy.metric
    values = sorted(p.rtt.value(metric) for p in few if p.rtt is not None)
    kept = sorted({p.rtt.samples for p in few if p.rtt is not None})
    kept_text = f"{kept[0]:,}" if len(kept) == 1 else f"{kept[0]:,} to {kept[-1]:,}"
    return [
        Recommendation(
            "marginal",
            f"Too few samples to decide on {fmt.plural(len(few), 'path')}",
            f"Their {metric.value} ({fmt.us(values[0])} to {fmt.us(values[-1])}) is within "
            f"{fmt.us(policy.safe_max_us)}, but they kept {kept_text} samples and the policy "
            f"needs {policy.min_samples:,} to call a path offload-safe. Re-run with "
            f"--iterations {policy.min_samples} before judging them; nothing here points "
            "at the hardware.",
        )
    ]


def _error_notes(results: Results) -> list[Recommendation]:
    """Cause 2: configuration. An unmeasured path says nothing about the network."""
    errors = [p for p in results.paths if p.error]
    if not errors:
        return []
    return [
        Recommendation(
            "unsafe",
            f"{fmt.plural(len(errors), 'path')} could not be measured",
            f"For example {errors[0].src} -> {errors[0].dst}: {errors[0].error}. Unmeasured "
            "paths count as unsafe. Run netqual check on the inventory, fix what it names, "
            "then re-test.",
        )
    ]


def _measurement_notes(results: Results) -> list[Recommendation]:
    policy = results.run.policy
    metric = policy.metric
    out = []
    marginal = [
        p
        for p in results.paths
        if p.verdict is Verdict.MARGINAL
        and p.rtt is not None
        and policy.safe_max_us < p.rtt.value(metric) <= policy.unsafe_above_us
    ]
    if marginal:
        labels = [
            f"{p.src} -> {p.dst} {fmt.us(p.rtt.value(metric))}"
            for p in sorted(marginal, key=lambda p: (p.src, p.dst))
            if p.rtt is not None
        ]
        out.append(
            Recommendation(
                "marginal",
                f"{fmt.plural(len(marginal), 'marginal path')}: offload gains shrink here",
                f"Their {metric.value} lies between {fmt.us(policy.safe_max_us)} and "
                f"{fmt.us(policy.unsafe_above_us)} ({_names(labels)}): offload still works but "
                "TTFT gains shrink. Use them only if local NVMe is full, and re-test them at a "
                "quiet time to see whether the tail is congestion.",
            )
        )
    unstable = _unstable(results)
    if unstable and any(p.verdict is not Verdict.SAFE for p in results.paths):
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


def _unstable(results: Results) -> int:
    return sum(
        1
        for p in results.paths
        if p.verdict is Verdict.SAFE and p.rtt is not None and p.rtt.unstable
    )
