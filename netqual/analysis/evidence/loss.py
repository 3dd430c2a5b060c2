"""Loss evidence: retransmissions, RDMA retries and NAKs, pause frames per packet sent,
from each path's ``details.counters`` (docs/policy.md, "Loss")."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from netqual.analysis.counter_evidence import LOSS_RDMA, PAUSE_WORDS
from netqual.analysis.evidence import (
    Endpoints,
    Found,
    Hit,
    as_int,
    as_map,
    cannot,
    group_by_node,
    worst,
)
from netqual.base.units import plural
from netqual.model.decision import (
    RUN_SUBJECT,
    Blocking,
    Evidence,
    EvidenceKind,
    Subject,
    SubjectKind,
)
from netqual.model.path import path_label
from netqual.model.verdict import Verdict
from netqual.table.run import Results

# Fewer events than this say nothing, whatever the rate (a tail-loss probe or two).
MIN_LOSS_EVENTS = 3

_LOSS_HINT = re.compile(
    rb'"tcp_retrans":[1-9]|"(?:' + "|".join(LOSS_RDMA).encode() + rb')":[1-9]'
    rb'|"[^"]*(?:' + "|".join(PAUSE_WORDS).encode() + rb')[^"]*":[1-9]',
    re.IGNORECASE,
)


def _side_counts(window: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(packets sent, TCP retransmissions, RDMA loss events, pause frames) of one side."""
    ifs = [as_map(c) for c in as_map(window.get("interfaces")).values()]
    ports = [as_map(c) for c in as_map(window.get("rdma")).values()]
    sent = max((as_int(c.get("tx_packets")) for c in ifs), default=0)
    sent = max(
        sent,
        max(
            (as_int(c.get("port_xmit_packets")) or as_int(c.get("sent_pkts")) for c in ports),
            default=0,
        ),
    )
    retrans = as_int(window.get("tcp_retrans"))
    if window.get("shared") is True:  # other probes moved the host's port counters
        return sent, retrans, 0, 0
    rdma = sum(as_int(c.get(k)) for c in ports for k in LOSS_RDMA)
    pauses = sum(
        as_int(v)
        for c in ifs
        for k, v in c.items()
        if any(w in str(k).lower() for w in PAUSE_WORDS) and "rx" in str(k).lower()
    )
    return sent, retrans, rdma, pauses


def pingpong_counters(counters: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """What the loss rule keeps of a ping-pong phase's window (``details.pingpong_counters``):
    per side its TCP retransmissions and the packets its busiest interface sent."""
    out = {}
    for end in ("src", "dst"):
        sent, retrans, _, _ = _side_counts(as_map(counters.get(end)))
        out[end] = {"tcp_retrans": retrans, "tx_packets": sent}
    return out


def _rate(lost: int, sent: int, line: float) -> float | None:
    """The loss rate in percent when it counts: enough events and above the line."""
    if lost < MIN_LOSS_EVENTS or not sent:
        return None
    pct = 100.0 * lost / sent
    return pct if pct > line else None


def path_loss(details: Mapping[str, Any], max_loss_pct: float) -> Evidence | None:
    """One path's loss from its counters, or None when they show none worth a word.

    TCP retransmissions count from the ping-pong phase alone where the run kept it apart
    (``pingpong_counters``): small messages fill no queue, so a retransmission there is a
    lost packet, while a bulk read's are TCP finding a bottleneck's queue (a shaped port, a
    busy host), which is how TCP works, not a lossy link. RDMA retries, NAKs and sequence
    errors count over every phase: RoCE expects no loss at all."""
    counters = as_map(details.get("counters"))
    sides = [_side_counts(as_map(counters.get(end))) for end in ("src", "dst")]
    sent = sum(x[0] for x in sides)
    pp = as_map(details.get("pingpong_counters"))
    if pp:
        ends = [as_map(pp.get(end)) for end in ("src", "dst")]
        tcp_lost = sum(as_int(e.get("tcp_retrans")) for e in ends)
        tcp_sent = sum(as_int(e.get("tx_packets")) for e in ends)
        phase = " in the ping-pong phase"
    else:
        tcp_lost, tcp_sent, phase = sum(x[1] for x in sides), sent, ""
    rdma_lost = sum(x[2] for x in sides)
    pauses = sum(x[3] for x in sides)
    line = max_loss_pct
    found = []
    if (pct := _rate(tcp_lost, tcp_sent, line)) is not None:
        found.append(f"{tcp_lost:,} TCP retransmissions of {tcp_sent:,} packets sent{phase} "
                     f"({pct:.2f}% > {line:g}%)")  # fmt: skip
    if (pct := _rate(rdma_lost, sent, line)) is not None:
        found.append(f"{rdma_lost:,} RDMA retries/NAKs/sequence errors of {sent:,} packets "
                     f"({pct:.2f}% > {line:g}%)")  # fmt: skip
    if found:
        return Evidence(
            EvidenceKind.LOSS, Verdict.UNSAFE, RUN_SUBJECT, f"{'; '.join(found)}: packets are lost"
        )
    if max(tcp_lost, rdma_lost) >= MIN_LOSS_EVENTS and not (tcp_sent or sent):
        return Evidence(
            EvidenceKind.LOSS, None, RUN_SUBJECT,
            f"{max(tcp_lost, rdma_lost):,} retransmissions or retries, packets sent unknown: "
            "no rate",
        )  # fmt: skip
    if (pct := _rate(pauses, sent, line)) is not None:
        return Evidence(
            EvidenceKind.LOSS, Verdict.MARGINAL, RUN_SUBJECT,
            f"{pauses:,} pause frames received of {sent:,} packets sent ({pct:.2f}% > "
            f"{line:g}%): the port was paused (PFC), the tail waits on it",
        )  # fmt: skip
    return None


def loss(results: Results, ends: Endpoints) -> Found:
    table = results.paths
    kind = EvidenceKind.LOSS
    have = table.details.rows_matching(rb'"counters"')
    if not len(have):
        return cannot(kind, "no counters on any path (agents that do not count)")
    line = results.run.policy.max_loss_pct
    hits: list[Hit] = []
    names = table.names
    for i in table.details.rows_matching(_LOSS_HINT).tolist():
        got = path_loss(table.details[i] or {}, line)
        if got is None:
            continue
        label = path_label(names[table.src[i]], names[table.dst[i]])
        ev = Evidence(kind, got.verdict, Subject(SubjectKind.PATH, label), got.detail)
        hits.append(Hit(np.array([i], dtype=np.int64), ev))
    if not hits:
        return Found(
            kind,
            Evidence(
                kind,
                Verdict.SAFE,
                RUN_SUBJECT,
                f"counters on {len(have):,} of {len(table):,} paths, none lost more than "
                f"{line:g}% of its packets",
            ),
        )
    bad = np.zeros(len(table), dtype=np.bool_)
    judged = np.zeros(len(table), dtype=np.bool_)
    judged[have] = True
    by_row = {int(h.rows[0]): h.evidence for h in hits}
    bad[list(by_row)] = True
    blocking = []
    for subject, rows in group_by_node(table, ends, bad, judged):
        first = by_row[int(rows[0])]
        detail = (
            first.detail
            if len(rows) == 1
            else (f"{len(rows)} of its paths lose packets (e.g. {first.subject}: {first.detail})")
        )
        blocking.append(
            Blocking(
                subject,
                kind,
                worst(Hit(rows, by_row[int(r)]) for r in rows),
                detail,
                f"check the error and discard counters of {subject}'s switch port and NIC, its "
                "cable and optics, then re-test (netqual retest)",
                len(rows),
            )
        )
    summary = Evidence(
        kind,
        worst(hits),
        RUN_SUBJECT,
        f"{plural(len(hits), 'path')} of {len(have):,} with counters above {line:g}% loss",
    )
    return Found(kind, summary, tuple(hits), tuple(blocking))
