"""RTT evidence over a run: every path's class is its own (rebuilt per row from
``rtt_verdict``); what it blocks is grouped where localisation puts it (``localise``: a
tier that distance takes out, a node, a NIC, a rail, a rack pair, a link), and a path it
cannot place is its own subject. Paths marginal only for want of samples block as one
preliminary measurement, never as hardware."""

from __future__ import annotations

import numpy as np

from netqual.analysis import localise
from netqual.analysis.evidence import Endpoints, Found, touching
from netqual.analysis.policy import sample_limited
from netqual.base.units import format_us, plural
from netqual.model.decision import RUN_SUBJECT, Blocking, Evidence, EvidenceKind, Subject
from netqual.model.decision import SubjectKind as SK
from netqual.model.path import Tier, path_label
from netqual.model.suspects import (
    NicEvidence,
    RackPairEvidence,
    RailEvidence,
    Suspect,
    SuspectKind,
)
from netqual.model.verdict import Verdict
from netqual.table.paths import TIERS, VERDICTS, BoolArray, worst_first
from netqual.table.run import Results

KIND = EvidenceKind.RTT


def _covers(s: Suspect, results: Results, ends: Endpoints) -> tuple[Subject, BoolArray, str]:
    """A node, NIC, rail or rack-pair suspect's subject, the rows it covers, and what to do
    about it."""
    table = results.paths
    e = s.evidence
    if s.kind is SuspectKind.NODE:
        return (
            Subject(SK.NODE, s.subject),
            touching(table, ends.codes_of(s.subject)),
            f"keep {s.subject} on local NVMe until its NIC, cable, switch port, firmware and "
            "MTU are checked, then re-test it",
        )
    if isinstance(e, NicEvidence):
        name = f"{e.node}/{e.nic}"
        codes = [i for i, n in enumerate(table.names) if n == name]
        return (
            Subject(SK.NIC, name),
            touching(table, codes),
            f"check {name}'s cable, transceiver and switch port on rail {e.rail}, then re-test",
        )
    if isinstance(e, RailEvidence):
        nics = table.nics
        rows = nics.rail == e.rail if nics is not None else np.zeros(len(table), np.bool_)
        return (
            Subject(SK.RAIL, s.subject),
            rows,
            f"check the switch plane of {s.subject} and its uplinks; keep KV traffic off it "
            "until a re-test passes",
        )
    if isinstance(e, RackPairEvidence):
        racks = {n.name: n.rack for n in results.nodes}
        rack = np.array([racks.get(n, racks.get(n.split("/")[0])) for n in table.names] + [None])
        a, b = e.racks
        src, dst = rack[table.src], rack[table.dst]
        rows = ((src == a) & (dst == b)) | ((src == b) & (dst == a))
        where = f"inside rack {a}" if a == b else f"between racks {a} and {b}"
        return (
            Subject(SK.RACKS, f"racks {a}<->{b}"),
            rows,
            f"check the switches and uplinks {where}; keep offload off those links until a "
            "re-test passes",
        )
    raise ValueError(f"no rows for a {s.kind.value} suspect")  # links and asymmetries: per path


def _worst_text(results: Results, rows: np.ndarray) -> str:
    """'worst a -> b, p99 812.0 us' (or its error) of some rows: ``worst_first`` over them."""
    table = results.paths
    metric = results.run.policy.metric
    i = int(rows[worst_first(table.verdict[rows], table.values(metric)[rows])[0]])
    label = path_label(table.names[table.src[i]], table.names[table.dst[i]])
    if table.error[i] or not table.has_rtt[i]:
        return f"worst {label}: {table.error[i] or 'no samples'}"
    return f"worst {label}, {metric.value} {format_us(float(table.values(metric)[i]))} us"


def rtt(results: Results, ends: Endpoints) -> Found:
    table = results.paths
    policy = results.run.policy
    m = policy.metric.value
    counts = table.counts()
    worst = max((v for v in counts if counts[v]), key=lambda v: v.rank, default=Verdict.SAFE)
    summary = Evidence(
        KIND,
        worst,
        RUN_SUBJECT,
        f"{m} RTT against {format_us(policy.safe_max_us)} / {format_us(policy.unsafe_above_us)}"
        f" us: {counts[Verdict.SAFE]:,} offload-safe, {counts[Verdict.MARGINAL]:,} marginal, "
        f"{counts[Verdict.UNSAFE]:,} unsafe",
    )
    blocking: list[Blocking] = []
    limited = sample_limited(policy, table) & (table.verdict == Verdict.MARGINAL.rank)
    if limited.any():
        n = int(limited.sum())
        blocking.append(
            Blocking(
                RUN_SUBJECT,
                KIND,
                Verdict.MARGINAL,
                f"{plural(n, 'path')} marginal only for want of samples (the plan kept "
                f"{results.run.plan.iterations:,} per path, the policy needs "
                f"{policy.min_samples:,}): a preliminary measurement, not the hardware",
                f"re-measure with --iterations {policy.min_samples} or more",
                n,
            )
        )
    left = (table.verdict > Verdict.SAFE.rank) & ~limited
    if not left.any():
        return Found(KIND, summary, (), tuple(blocking))
    # the distance localisation stored (a re-test's: over the run it re-tests)
    far_tiers = {d.tier for d in localise.run_localisation(results).distance}
    for tier in sorted(far_tiers, key=TIERS.index):
        rows = np.flatnonzero(left & (table.tier == TIERS.index(tier)))
        if not len(rows):
            continue
        far = "remote-site" if tier is Tier.REMOTE else tier.value
        blocking.append(
            Blocking(
                Subject(SK.TIER, f"{tier.value} paths"),
                KIND,
                VERDICTS[int(table.verdict[rows].max())],
                f"{plural(len(rows), f'{far} path')} not offload-safe while same-rack paths are "
                f"({_worst_text(results, rows)}): distance, not a node",
                "do not offload KV-cache to the remote site"
                if tier is Tier.REMOTE
                else "keep KV offload inside each rack, or bring the leaf-spine latency down",
                len(rows),
            )
        )
        left[rows] = False
    for s in localise.run_suspects(results):
        # a link or an asymmetry is one pair: the path loop below names it
        if s.kind in (SuspectKind.LINK, SuspectKind.ASYMMETRY) or not left.any():
            continue
        subject, covers, action = _covers(s, results, ends)
        rows = np.flatnonzero(covers & left)
        if not len(rows):
            continue
        blocking.append(
            Blocking(
                subject,
                KIND,
                VERDICTS[int(table.verdict[rows].max())],
                f"{plural(len(rows), 'path')} not offload-safe by their RTT "
                f"({_worst_text(results, rows)})",
                action,
                len(rows),
            )
        )
        left[rows] = False
    names = table.names
    for i in np.flatnonzero(left).tolist():
        a, b = names[table.src[i]], names[table.dst[i]]
        first = table.reasons[i][0] if table.reasons[i] else VERDICTS[table.verdict[i]].value
        blocking.append(
            Blocking(
                Subject(SK.PATH, path_label(a, b)),
                KIND,
                VERDICTS[table.verdict[i]],
                first,
                f"re-test the path (netqual retest DIR --path {a}:{b}); until it passes, do not "
                "offload KV between them",
                1,
            )
        )
    return Found(KIND, summary, (), tuple(blocking))
