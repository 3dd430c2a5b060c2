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

The notes on the run itself (incomplete, samples, errors, configuration, marginal and
unstable paths) are ``netqual.report.notes``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from netqual.analysis import counter_evidence, localise
from netqual.analysis.stability import unstable_paths
from netqual.model.node import Node
from netqual.model.path import Tier, path_label
from netqual.model.stats import Metric
from netqual.model.suspects import (
    AsymmetryEvidence,
    DistanceEvidence,
    LinkEvidence,
    Measure,
    NicEvidence,
    NodeEvidence,
    PathEvidence,
    RackPairEvidence,
    RailEvidence,
    Suspect,
    SuspectKind,
)
from netqual.model.verdict import Verdict
from netqual.report import fmt
from netqual.report.notes import (
    LISTED,
    Recommendation,
    configuration_notes,
    error_notes,
    finish_notes,
    listed,
    measurement_notes,
    sample_notes,
)
from netqual.table.run import Results


def _short(e: PathEvidence, metric: Metric) -> str:
    """One path of a suspect's evidence: 'a -> b, p99 812.0 us' or 'a -> b: <error>'."""
    if e.error or e.value_us is None:
        return f"{path_label(e.src, e.dst)}: {e.error or 'no samples'}"
    return f"{path_label(e.src, e.dst)}, {metric.value} {fmt.us(e.value_us)}"


def recommend(results: Results, expired_waivers: Sequence[str] = ()) -> list[Recommendation]:
    policy = results.run.policy
    out: list[Recommendation] = finish_notes(results) + sample_notes(results)
    out += error_notes(results)
    # Configuration outliers, then what the counters saw (loss, pauses/CNPs, another NIC):
    # both come before any hardware advice, which would otherwise be a guess.
    out += configuration_notes(results)
    out += [Recommendation(*line) for line in counter_evidence.advice(results)]
    any_bad = bool((results.paths.verdict != Verdict.SAFE.rank).any())
    if not results.paths:
        return out or [
            Recommendation(
                "info",
                "Nothing measured",
                "No path was measured: check the inventory and agents, then re-run.",
            )
        ]
    # An incomplete run has no go-live advice: the unmeasured pairs may be the bad ones.
    if not any_bad and not results.incomplete:
        shaky = unstable_paths(results)
        # Noisy paths are a caution, never the condition of going live: on a shared host
        # every path trips the 10%-stdev rule, and "once 30 unstable paths pass a re-test"
        # is no answer (docs/policy.md, "One decision").
        caveat = (
            f" {fmt.plural(shaky, 'path')} have a standard deviation of at least 10% of the "
            "mean, beyond the spread of the other paths of their tier by the run's "
            "repeatability: a caution, not a blocker; re-test them before sign-off."
            if shaky
            else ""
        )
        out.append(
            Recommendation(
                "safe",
                "Offload can go live on every measured path",
                f"All {len(results.paths):,} paths are offload-safe on all the evidence the run "
                f"holds ({policy.metric.value} <= {policy.safe_max_us:g} us and nothing "
                f"blocking).{caveat} Keep this results file as the baseline and re-qualify "
                "(netqual gate --baseline) after any fabric, firmware or cabling change.",
                fix=False,
            )
        )
    nodes = {n.name: n for n in results.nodes}
    metric = policy.metric
    found = localise.run_suspects(results)
    out += [_distance(d, policy.safe_max_us) for d in localise.run_localisation(results).distance]
    if (problem := localise.cannot_localise(results)) is not None:
        out.append(_unlocalised(results, problem))
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
                f"Most paths of every node in rack {rack} ({listed(members)}) are not "
                "offload-safe. "
                "Check the rack's top-of-rack switch and its uplinks, then re-test the rack.",
            )
        )
    for s in by_kind[SuspectKind.NODE]:
        node = nodes.get(s.subject)
        if node is not None and node.rack in racks_all_bad:
            continue
        e = s.evidence
        assert isinstance(e, NodeEvidence)
        out.append(
            Recommendation(
                "unsafe",
                f"Keep {s.subject} on local NVMe",
                f"{e.bad_paths:,} of {e.paths:,} paths of {s.subject} {_are_bad(e)} "
                f"(worst {_short(e.worst, metric)}). Check its NIC, cable and switch "
                "port (and NIC firmware and MTU), then re-test it.",
            )
        )
    out += [_nic(s, metric) for s in by_kind[SuspectKind.NIC]]
    out += [_rail(s) for s in by_kind[SuspectKind.RAIL]]
    out += [_rack_pair(s, metric) for s in by_kind[SuspectKind.RACK_PAIR]]
    links = [s.evidence.path for s in found if isinstance(s.evidence, LinkEvidence)]
    if links:
        out.append(
            Recommendation(
                "marginal" if all(e.verdict is Verdict.MARGINAL for e in links) else "unsafe",
                f"Re-test {fmt.plural(len(links), 'isolated path')}",
                "Their nodes are fine on other paths, so the cause is likely transient or one "
                "link: "
                f"{listed([_short(e, metric) for e in links])}. Until a re-test passes, do not "
                "offload KV between these pairs.",
            )
        )
    for s in by_kind[SuspectKind.ASYMMETRY]:
        assert isinstance(s.evidence, AsymmetryEvidence)
        fwd, rev = s.evidence.forward, s.evidence.reverse
        a, b = s.about.nodes
        out.append(
            Recommendation(
                "unsafe" if Verdict.UNSAFE in (fwd.verdict, rev.verdict) else "marginal",
                f"Check the link between {a} and {b} in both directions",
                f"The two directions disagree: {_short(fwd, metric)} ({fwd.verdict.value}) but "
                f"{_short(rev, metric)} ({rev.verdict.value}). One-way trouble points at a cable "
                "or transceiver, or at ECN/PFC set differently on the two switch ports.",
            )
        )
    out += measurement_notes(results)
    for label in expired_waivers:
        out.append(
            Recommendation(
                "marginal",
                f"Waiver expired: {label}",
                "The waiver no longer applies; fix the path or renew the waiver with a new date.",
                fix=False,
            )
        )
    return out


def _are_bad(e: NodeEvidence | NicEvidence) -> str:
    """'are not offload-safe', or for a suspect on bulk goodput what its paths read."""
    c = e.contrast
    if c is None or c.measure is not Measure.GOODPUT or c.level is None or c.peers_level is None:
        return "are not offload-safe"
    return (
        f"read at most {c.level:,.2f} Gbit/s in bulk, under 1/{c.threshold:g} of their peers' "
        f"{c.peers_level:,.2f} Gbit/s"
    )


def _unlocalised(results: Results, problem: str) -> Recommendation:
    """Paths fail and the topology is unknown: they are listed, no node or rack is blamed."""
    table = results.paths
    order = table.ranked(results.run.policy.metric)
    bad = order[table.verdict[order] != Verdict.SAFE.rank]
    worst = [f"{path_label(table.names[table.src[i]], table.names[table.dst[i]])}"
             for i in bad[:LISTED].tolist()]  # fmt: skip
    return Recommendation(
        "unsafe" if (table.verdict == Verdict.UNSAFE.rank).any() else "marginal",
        "Cannot localise: the topology is unknown",
        f"{len(bad):,} of {len(table):,} paths {'is' if len(bad) == 1 else 'are'} not "
        "offload-safe "
        f"({listed(worst, len(bad))}), but {problem.removeprefix('cannot localise: ')}. "
        "Until then, do not offload KV over these paths.",
        fix=False,
    )


def _distance(d: DistanceEvidence, safe_max_us: float) -> Recommendation:
    """A tier whose paths fail because of distance (``localise.distance``)."""
    spread = (
        f", {d.metric.value} {fmt.us(d.low_us)} to {fmt.us(d.high_us)}"
        if d.low_us is not None and d.high_us is not None
        else ""
    )
    hop_text = f" ({'/'.join(map(str, d.hops))} hops)" if d.hops else ""
    share = (
        f"{d.bad_paths:,} of {d.paths:,} {d.tier.value} paths{hop_text} are not offload-safe"
        f"{spread}"
    )
    if d.near_paths:
        share += (
            f", while {d.near_safe:,} of {d.near_paths:,} same-rack paths are within "
            f"{fmt.us(safe_max_us)}."
        )
    else:
        share += ", every node alike (the run measured no same-rack path to compare)."
    if d.tier is Tier.CROSS_RACK:
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
    return Recommendation("unsafe" if d.unsafe else "marginal", title, f"{share} {advice}")


def _whole_racks(culprits: set[str], nodes: Sequence[Node]) -> list[str]:
    by_rack: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        if n.rack:
            by_rack[n.rack].append(n.name)
    return sorted(
        r for r, members in by_rack.items() if len(members) >= 2 and set(members) <= culprits
    )


def _nic(s: Suspect, metric: Metric) -> Recommendation:
    """One NIC bad while the node's other rails are fine (docs/rails.md)."""
    e = s.evidence
    assert isinstance(e, NicEvidence)
    fine = ""
    if e.other_nics:
        listed = ", ".join(f"{o.nic}: {o.bad_paths:,} of {o.paths:,} bad" for o in e.other_nics)
        fine = f" while its other rails are fine ({listed})"
    return Recommendation(
        "unsafe",
        f"Check NIC {e.nic} of {e.node} (rail {e.rail})",
        f"{e.bad_paths:,} of {e.paths:,} paths of {s.subject} {_are_bad(e)}{fine} "
        f"(worst {_short(e.worst, metric)}). Check that NIC's cable, transceiver and "
        "switch port on its rail (and its firmware and MTU), then re-test it.",
    )


def _rail(s: Suspect) -> Recommendation:
    """Most NICs of one rail bad: the rail's switch plane (docs/rails.md)."""
    e = s.evidence
    assert isinstance(e, RailEvidence)
    return Recommendation(
        "unsafe",
        f"Check the switch plane of {s.subject}",
        f"{len(e.bad_nics):,} of {e.nics:,} NICs on {s.subject} "
        f"are not offload-safe ({listed(list(e.bad_nics))}): the rail's switches or their "
        "uplinks are the common cause. Keep KV traffic off this rail until a re-test passes.",
    )


def _rack_pair(s: Suspect, metric: Metric) -> Recommendation:
    e = s.evidence
    assert isinstance(e, RackPairEvidence)
    ra, rb = e.racks
    if ra == rb:
        title, hint = f"Check the switch inside rack {ra}", "Check the rack's top-of-rack switch"
    else:
        title = f"Do not offload KV between racks {ra} and {rb}"
        hint = "Keep offload inside each rack, and check the uplinks and spine between them"
    return Recommendation(
        "unsafe" if e.worst.verdict is Verdict.UNSAFE else "marginal",
        title,
        f"{e.bad_paths:,} of {e.paths:,} paths are not offload-safe "
        f"(worst {_short(e.worst, metric)}). {hint}; then re-test.",
    )
