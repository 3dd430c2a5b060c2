"""Configuration evidence: fleet outliers on the interfaces a path used (docs/policy.md,
"Configuration")."""

from __future__ import annotations

import numpy as np

from netqual.analysis.evidence import Endpoints, Found, Hit, cannot, touching, worst
from netqual.base.units import plural
from netqual.model.decision import (
    RUN_SUBJECT,
    Blocking,
    Evidence,
    EvidenceKind,
    Subject,
    SubjectKind,
)
from netqual.model.fleet import ComparedKey, FleetOutlier, FleetResult
from netqual.model.run import RunKind
from netqual.model.verdict import Verdict
from netqual.table.run import Results

# Keys by what a difference does to the bytes: a different MTU, PFC or GID setting drops,
# pauses or misroutes them; a different driver or congestion control only changes how they
# flow; versions change neither (a caution, never a blocker).
UNSAFE_KEYS = frozenset({
    "mtu", "roce_mtu", "link_speed_mbps", "pfc_priorities", "ecn", "ecn_priorities",
    "roce_gid_type", "gid_index",
})  # fmt: skip
MARGINAL_KEYS = frozenset({
    "driver", "firmware", "tcp_congestion_control", "tcp_ecn", "iommu", "acs",
    "relaxed_ordering",
})  # fmt: skip


def _key_class(key: str) -> Verdict | None:
    base = ComparedKey.parse(key).field
    if base in UNSAFE_KEYS:
        return Verdict.UNSAFE
    if base in MARGINAL_KEYS:
        return Verdict.MARGINAL
    return None


# Keys a node does not "set": what the hardware or the installed software is.
_INSTALLED = frozenset({"driver", "firmware"})


def _action(field: str, on: str, want: str) -> str:
    if field in _INSTALLED:
        return f"check that {on} has the same NIC and {field} as the rest ({want})"
    if field == "link_speed_mbps":
        return (
            f"check why {on}'s link does not negotiate {want} like the rest (cable, optics, port)"
        )
    return f"set {field} on {on} to {want} like the rest"


def _outlier_codes(o: FleetOutlier, ends: Endpoints, results: Results) -> list[int]:
    """The endpoints an outlier sits on: a node-wide key, all of the node's; a NIC's key,
    that NIC's endpoint, or the node's own address when the NIC is not an inventory NIC
    (the node's main interface)."""
    codes = ends.codes_of(o.node)
    if o.nic is None:
        return codes
    own = [c for c in codes if ends.nic[c] == o.nic]
    if own:
        return own
    listed = {x.name for n in results.nodes if n.name == o.node for x in n.nics}
    return [] if o.nic in listed else [c for c in codes if ends.nic[c] is None]


def config(results: Results, ends: Endpoints) -> Found:
    kind = EvidenceKind.CONFIG
    fleet = results.fleet
    if fleet is None:
        return cannot(kind, _none_why(results))
    table = results.paths
    hits: list[Hit] = []
    blocking: list[Blocking] = []
    cautions: list[str] = []
    for o in fleet.outliers:
        cls = _key_class(o.key)
        if cls is None:
            cautions.append(f"{o.text} (a version difference: not a blocker)")
            continue
        tie = o.expected is None and o.majority is None
        verdict = None if tie else cls
        on = o.node if o.nic is None else f"{o.node}/{o.nic}"
        subject = Subject(SubjectKind.NODE if o.nic is None else SubjectKind.NIC, on)
        rows = np.flatnonzero(touching(table, _outlier_codes(o, ends, results)))
        detail = o.finding + (": no majority, which node is right cannot be told" if tie else "")
        ev = Evidence(kind, verdict, subject, detail)
        hits.append(Hit(rows, ev))
        want = o.expected or o.majority or "the value the others should have"
        blocking.append(
            Blocking(
                subject,
                kind,
                verdict,
                detail,
                f"{_action(ComparedKey.parse(o.key).field, on, want)} "
                "(netqual check --fleet), then re-test",
                len(rows),
            )
        )
    if not hits:
        return Found(
            kind,
            Evidence(
                kind,
                Verdict.SAFE,
                RUN_SUBJECT,
                f"{_compared(results, fleet)} compared, no outlier on the data path",
            ),
            (),
            (),
            tuple(cautions),
        )
    summary = Evidence(
        kind,
        worst(hits),
        RUN_SUBJECT,
        f"{plural(len(hits), 'outlier')} on the data path of {_compared(results, fleet)}",
    )
    return Found(kind, summary, tuple(hits), tuple(blocking), tuple(cautions))


def _none_why(results: Results) -> str:
    """Why a run has no configuration snapshot to judge."""
    if results.run.kind is RunKind.DEMO:
        return "no configuration snapshot (a demo takes none)"
    if results.run.kind is RunKind.RETEST:
        return (
            "no configuration snapshot: the re-tested nodes' agents sent none (agents that "
            "do not answer it, or a retest by a netqual that did not ask): run netqual "
            "check --fleet"
        )
    return "no configuration snapshot (agents that do not send one): run netqual check --fleet"


def _compared(results: Results, fleet: FleetResult) -> str:
    """'5 nodes'; a retest's also says whose snapshots: '5 nodes (2 asked by this
    retest, 3 as the re-tested run found them)'; fewer than the run's: '2 of 5 nodes'."""
    n, total = len(fleet.snapshot), len({node.node_name for node in results.nodes})
    text = plural(n, "node") if n >= total else f"{n:,} of {plural(total, 'node')}"
    if results.run.kind is not RunKind.RETEST:
        return text
    carried = len(fleet.carried)
    if not carried:
        return f"{text} (asked by this retest)"
    found = f"{carried:,} as the re-tested run found them"
    return f"{text} ({n - carried:,} asked by this retest, {found})"
