"""What a path's counters say: which NIC carried its bytes, and why its tail is long.

The agents record ``details.counters`` {``src``, ``dst``} (``netqual.agent.counters``); the
coordinator adds ``probe_bytes`` (the payload the plan moves, both directions) and this
module derives ``details.carried_by`` and, for a path that is not offload-safe, its
cause, most specific first:

* ``loss``: the probe's own TCP connection retransmitted, or an RDMA port that the path
  had to itself counted sequence errors / ACK timeouts;
* ``congestion``: pause frames, CNPs or ECN marks on one side's port (PFC or congestion
  at that node), counted only when no other probe shared that side's window;
* ``routing``: the bytes left through another NIC than intended, or through TCP/IP when
  RDMA was asked.

The counters are read once into typed windows (``codec.counters``): a results file may
come from anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.codec.counters import merge_windows, path_counters, window_to_dict
from netqual.codec.counters import window as read_window
from netqual.model.counters import CounterWindow, PathCounters
from netqual.model.path import path_label
from netqual.model.plan import ProbePlan
from netqual.model.suspects import CauseKind
from netqual.model.verdict import Verdict
from netqual.table.run import Results

CARRIED_SHARE = 0.9  # an interface carried the probe when it moved >= 90% of its payload
MAX_RDMA_PACKET_BYTES = 4096  # the largest RoCE MTU: fewer packets cannot carry the bytes
WORDS_BYTES = 4  # IB port_xmit_data / port_rcv_data count 32-bit words
LOSS_RDMA = (
    "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err",
    "rcvd_seq_err", "retry_exceeded_err", "duplicate_request", "implied_nak_seq_err",
)  # fmt: skip
CONGESTION_RDMA = ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
PAUSE_WORDS = ("pause", "pfc", "xoff")
# Retransmitted segments per packet sent that mean loss: a stalled host's tail loss probes
# retransmit a few segments of 10,000s on loopback (0.03%); a 2% lossy link ~2%.
LOSS_RETRANS_RATE = 0.002


def probe_bytes(plan: ProbePlan) -> int:
    """Payload one probe of ``plan`` moves, both directions: ping-pong messages out and
    back, plus every bulk chunk."""
    pingpong = 2 * (plan.warmup + plan.iterations) * plan.size_bytes
    bulk = sum(plan.reads_for(c) * c * len(plan.depths) for c in plan.chunks_bytes)
    return pingpong + (bulk if plan.bulk else 0)


def _iface_bytes(c: Mapping[str, int]) -> int:
    return c.get("tx_bytes", 0) + c.get("rx_bytes", 0)


def _rdma_bytes(c: Mapping[str, int]) -> int:
    """Bytes an RDMA port moved: its data counters, else an upper bound from packets."""
    words = c.get("port_xmit_data", 0) + c.get("port_rcv_data", 0)
    if words:
        return words * WORDS_BYTES
    packets = sum(c.get(k, 0) for k in ("port_xmit_packets", "port_rcv_packets",
                                         "sent_pkts", "rcvd_pkts"))  # fmt: skip
    return packets * MAX_RDMA_PACKET_BYTES


def _side(
    window: CounterWindow, rdma: bool, intended: str | None, need: int
) -> tuple[str | None, str | None]:
    """(the NIC that carried this side's bytes, a problem) for one side's window."""
    ifs = {k: _iface_bytes(v) for k, v in window.interfaces.items()}
    ports = {k: _rdma_bytes(v) for k, v in window.rdma.items()}
    if rdma:
        moved = {k: b for k, b in ports.items() if b >= need}
        if intended in moved:
            return intended, None
        if moved:
            best = max(sorted(moved), key=moved.__getitem__)
            return best, f"the bytes left through {best}, not {intended}" if intended else None
        tcp = {k: b for k, b in ifs.items() if b >= CARRIED_SHARE * need}
        # Only a host whose RDMA counters could be read can say that RDMA did not move.
        if tcp and window.rdma_ports_read:
            best = max(sorted(tcp), key=tcp.__getitem__)
            return best, f"no RDMA port moved the bytes; IP interface {best} did (TCP, not RDMA)"
        return None, None
    moved = {k: b for k, b in ifs.items() if b >= CARRIED_SHARE * need}
    if not moved:
        return None, None
    if intended in moved:
        return intended, None
    best = max(sorted(moved), key=moved.__getitem__)
    return best, (f"the bytes left through {best}, not {intended}" if intended else None)


def carried_by(
    details: Mapping[str, Any],
    transport: str,
    src_nic: str | None = None,
    dst_nic: str | None = None,
) -> dict[str, Any] | None:
    """``details.carried_by`` from ``details.counters``: {``src``, ``dst``, ``problem``};
    None when the path has no counters. The intended NIC: the RDMA device and port the
    probe used at each end, or the inventory's ``src_nic``/``dst_nic`` where given."""
    counters = path_counters(details)
    if counters is None:
        return None
    need = max(1, counters.probe_bytes)
    rdma = transport == "rdma"

    def device(d: object) -> str | None:
        if not isinstance(d, Mapping):
            return None
        dev, port = d.get("device"), d.get("port")
        return f"{dev}/{port}" if isinstance(dev, str) and isinstance(port, int) else None

    intended = {
        "src": device(details) if rdma else src_nic,
        "dst": device(details.get("peer")) if rdma else dst_nic,
    }
    out: dict[str, Any] = {}
    problems: list[str] = []
    for end in ("src", "dst"):
        window = counters.side(end)
        if window is None:
            out[end] = None
            continue
        nic, problem = _side(window, rdma, intended[end], need)
        out[end] = nic
        if problem:
            problems.append(f"{end}: {problem}")
    out["problem"] = "; ".join(problems) or None
    return out


def merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two phases' ``details.counters`` of one path as one window (counts add up)."""
    ca = path_counters({"counters": a}) or PathCounters(None, None)
    cb = path_counters({"counters": b}) or PathCounters(None, None)
    out: dict[str, Any] = {"probe_bytes": ca.probe_bytes + cb.probe_bytes}
    for end in ("src", "dst"):
        both = merge_windows(ca.side(end), cb.side(end))
        out[end] = None if both is None else window_to_dict(both)
    return out


def _sent_packets(window: CounterWindow | None) -> int:
    """Packets the busiest interface of a side sent (the probe's, roughly)."""
    if window is None:
        return 0
    return max((c.get("tx_packets", 0) for c in window.interfaces.values()), default=0)


@dataclass(frozen=True)
class Cause:
    kind: CauseKind  # loss | congestion | routing
    node: str | None  # the side it points at (congestion), else None
    text: str  # the evidence in words: "12 TCP retransmissions", "rx_prio3_pause 40 at b"


def cause(details: Mapping[str, Any], src: str, dst: str) -> Cause | None:
    """The most specific cause the counters show, or None (module docstring)."""
    counters = path_counters(details) or PathCounters(None, None)
    ends = {"src": src, "dst": dst}
    retrans = sum((w.tcp_retrans or 0) for e in ends if (w := counters.side(e)) is not None)
    sent = sum(_sent_packets(counters.side(e)) for e in ends)
    if sent and retrans < LOSS_RETRANS_RATE * sent:
        retrans = 0  # a few stray retransmissions: not what makes a tail
    rdma_loss: list[str] = []
    congestion: list[tuple[str, str]] = []
    for end, node in ends.items():
        window = counters.side(end)
        if window is None or window.shared:
            continue  # not counted, or another probe moved these host counters too
        loss, paused = window_findings(window, node)
        rdma_loss += loss
        congestion += [(node, text) for text in paused]
    if retrans or rdma_loss:
        words = [f"{retrans:,} TCP retransmissions"] if retrans else []
        return Cause(CauseKind.LOSS, None, ", ".join(words + rdma_loss[:3]))
    if congestion:
        nodes = {name for name, _ in congestion}
        where = next(iter(nodes)) if len(nodes) == 1 else None
        return Cause(CauseKind.CONGESTION, where, ", ".join(t for _, t in congestion[:3]))
    carried = details.get("carried_by")
    problem = carried.get("problem") if isinstance(carried, Mapping) else None
    if isinstance(problem, str):
        return Cause(CauseKind.ROUTING, None, problem)
    return None


def window_findings(
    window: CounterWindow | Mapping[str, Any] | None, node: str
) -> tuple[list[str], list[str]]:
    """(loss, congestion) one side's window counted, in words such as ``"out_of_sequence 3
    on st1 mlx5_0/1"``: RDMA sequence errors and ACK timeouts; pause/PFC frames, CNPs and
    ECN marks. The path causes above and the fan-in sweep's storage counters read them."""
    w = window if isinstance(window, CounterWindow) else read_window(window)
    if w is None:
        return [], []
    loss: list[str] = []
    congestion: list[str] = []
    for port, c in w.rdma.items():
        for k in LOSS_RDMA:
            if n := c.get(k, 0):
                loss.append(f"{k} {n:,} on {node} {port}")
        for k in CONGESTION_RDMA:
            if n := c.get(k, 0):
                congestion.append(f"{k} {n:,} on {node} {port}")
    for nic, c in w.interfaces.items():
        for k, n in c.items():
            if n and any(word in k.lower() for word in PAUSE_WORDS):
                congestion.append(f"{k} {n:,} on {node} {nic}")
    return loss, congestion


def path_causes(results: Results) -> list[tuple[int, Cause]]:
    """(row, cause) of every path that is not offload-safe and whose counters say why."""
    table = results.paths
    out = []
    for i in range(len(table)):
        d = table.details[i]
        if d is None or "counters" not in d or table.verdict[i] == Verdict.SAFE.rank:
            continue
        src, dst = table.names[table.src[i]], table.names[table.dst[i]]
        if (c := cause(d, src, dst)) is not None:
            out.append((i, c))
    return out


LISTED = 6


def advice(results: Results) -> list[tuple[str, str, str]]:
    """ "What to do" lines from the counters: (severity, title, text), loss first, then
    congestion per node, then routing; each names the paths and the counts behind it."""
    table = results.paths
    groups: dict[tuple[CauseKind, str | None], list[tuple[int, Cause]]] = {}
    for i, c in path_causes(results):
        groups.setdefault((c.kind, c.node), []).append((i, c))
    out = []
    order = {CauseKind.LOSS: 0, CauseKind.CONGESTION: 1, CauseKind.ROUTING: 2}
    for (kind, node), items in sorted(
        groups.items(), key=lambda g: (order[g[0][0]], g[0][1] or "")
    ):
        unsafe = any(table.verdict[i] == Verdict.UNSAFE.rank for i, _ in items)
        shown = [
            f"{path_label(table.names[table.src[i]], table.names[table.dst[i]])} ({c.text})"
            for i, c in items[:LISTED]
        ]
        listed = "; ".join(shown) + (
            f"; and {len(items) - LISTED} more" if len(items) > LISTED else ""
        )
        n = len(items)
        paths = f"{n} path{'s' if n != 1 else ''}"
        if kind is CauseKind.LOSS:
            title = f"Packet loss behind the tail of {paths}"
            text = (
                f"Their probes retransmitted: {listed}. Packets are dropped on these paths: "
                "check the error and discard counters of the switch ports and NICs along "
                "them, and the cables and optics, before re-testing."
            )
        elif kind is CauseKind.CONGESTION:
            where = f"at {node}" if node else "on these paths"
            title = f"Congestion or PFC pauses {where}"
            text = (
                f"Pause frames, CNPs or ECN marks were counted while {paths} measured: "
                f"{listed}. The port is congested or paused by its peer: check PFC and ECN "
                "settings and what else shares that port, then re-test."
            )
        else:
            title = f"The bytes of {paths} took another NIC or TCP"
            text = (
                f"{listed}. Fix the routing, NIC selection or RDMA device (GID) choice so "
                "that probes and KV transfers use the intended NIC, then re-test."
            )
        out.append(("unsafe" if unsafe else "marginal", title, text))
    return out
