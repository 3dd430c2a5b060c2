"""Host counters around one probe phase: which NIC carried the bytes, and what went wrong.

Both agents of a probe read their host's counters before and after the phase (never
inside the timed loop) and keep the deltas: bytes and packets of every IP interface
(``/proc/net/dev`` of the agent's network namespace), pause counters per priority of the
common drivers (the ``ETHTOOL_GSTATS`` ioctl, the numbers ``ethtool -S`` prints), RDMA
port and hardware counters (``/sys/class/infiniband/DEV/ports/P/{counters,hw_counters}``)
and the TCP retransmissions of the probe's own connection (``TCP_INFO``, field
``tcpi_total_retrans`` of ``struct tcp_info`` in linux/tcp.h). A counter the platform
lacks is simply absent; reading never fails a probe. docs/evidence.md lists the fields.

Only counters that moved are kept (a host with hundreds of container veths would
otherwise swamp the result), at most ``MAX_ENTRIES`` interfaces and RDMA ports, largest
first. ``shared`` says another probe of the same agent overlapped the window, so the
host's counters are not this path's alone.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netqual.agent.ethtool import ETHTOOL
from netqual.agent.wire.messages import Fields
from netqual.base.errors import BadRequestError, NetqualError

PROC_NET_DEV = Path("/proc/net/dev")
SYS_INFINIBAND = Path("/sys/class/infiniband")
MAX_ENTRIES = 8  # interfaces, and RDMA ports, kept per side (largest byte counts first)
MAX_COUNTERS = 32  # counters kept per interface or port
MAX_VALUE = 1 << 62  # a delta beyond this is a wrapped or forged counter
_NAME = re.compile(r"[A-Za-z0-9._:@/-]{1,64}")
# /proc/net/dev columns, in order (receive then transmit)
_DEV_COLUMNS = (
    "rx_bytes", "rx_packets", "rx_errors", "rx_dropped", None, None, None, None,
    "tx_bytes", "tx_packets", "tx_errors", "tx_dropped", None, None, None, None,
)  # fmt: skip
# The RDMA counters kept (docs/evidence.md): IB port counters, then the hw counters of
# mlx5 and of Soft-RoCE (rxe has packet counts, no byte counts).
RDMA_PORT_COUNTERS = (
    "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
    "port_xmit_discards", "port_rcv_errors", "symbol_error", "link_downed",
)  # fmt: skip
RDMA_HW_COUNTERS = (
    "out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err",
    "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets", "rp_cnp_ignored",
    "duplicate_request", "implied_nak_seq_err", "req_cqe_error", "resp_cqe_error",
    "sent_pkts", "rcvd_pkts", "rcvd_seq_err", "retry_exceeded_err", "rcvd_rnr_err",
    "send_rnr_err", "completer_retry_err",
)  # fmt: skip
# IB port_xmit_data / port_rcv_data count 32-bit words (IBA 16.1.3.5)
WORDS_BYTES = 4
_TCP_INFO_BYTES = 104
_TOTAL_RETRANS_AT = 100  # u32 tcpi_total_retrans: 8 u8 fields, then 23 u32 before it


def interfaces(path: Path = PROC_NET_DEV) -> dict[str, dict[str, int]]:
    """Every interface of this network namespace: bytes, packets, errors, drops."""
    out: dict[str, dict[str, int]] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines()[2:]:
            name, _, rest = line.partition(":")
            values = rest.split()
            if len(values) < len(_DEV_COLUMNS) or not values[0].isdigit():
                continue
            out[name.strip()] = {
                col: int(v) for col, v in zip(_DEV_COLUMNS, values, strict=False) if col
            }
    return out


_RDMA_GROUPS = (("counters", RDMA_PORT_COUNTERS), ("hw_counters", RDMA_HW_COUNTERS))


def rdma_ports(root: Path = SYS_INFINIBAND) -> dict[str, dict[str, int]]:
    """``DEV/PORT`` -> the kept port and hw counters that this kernel and driver expose."""
    out: dict[str, dict[str, int]] = {}
    with contextlib.suppress(OSError):
        for port in sorted(root.glob("*/ports/*")):
            values: dict[str, int] = {}
            for group, names in _RDMA_GROUPS:
                for name in names:
                    with contextlib.suppress(OSError, ValueError):
                        values[name] = int((port / group / name).read_text().split()[0])
            if values:
                out[f"{port.parent.parent.name}/{port.name}"] = values
    return out


def tcp_retrans(sock: socket.socket | None) -> int | None:
    """Segments this TCP connection retransmitted so far; None when not TCP or unknown."""
    if sock is None or sock.type != socket.SOCK_STREAM:
        return None
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
    except OSError:
        return None
    if len(raw) < _TOTAL_RETRANS_AT + 4:
        return None
    value: int = struct.unpack_from("=I", raw, _TOTAL_RETRANS_AT)[0]
    return value


@dataclass(frozen=True)
class Snapshot:
    interfaces: Mapping[str, Mapping[str, int]]
    rdma: Mapping[str, Mapping[str, int]]
    tcp_retrans: int | None
    others_started: int  # other measurements this agent started so far
    others_running: int  # other measurements running now


@dataclass(frozen=True)
class Sources:
    """Where a snapshot reads from (tests point these at fixture trees)."""

    proc_net_dev: Path = PROC_NET_DEV
    sys_infiniband: Path = SYS_INFINIBAND
    pause: bool = True


class Activity:
    """The measurements one agent runs, to tell whether a counter window was shared."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = 0
        self.running = 0

    @contextlib.contextmanager
    def measuring(self, mine: Tally) -> Iterator[None]:
        with self._lock:
            self.started += 1
            self.running += 1
            mine.started += 1
            mine.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
                mine.running -= 1

    def others(self, mine: Tally) -> tuple[int, int]:
        with self._lock:
            return self.started - mine.started, self.running - mine.running


@dataclass
class Tally:
    """One session's own measurements (``Activity.measuring``)."""

    started: int = 0
    running: int = 0
    before: Snapshot | None = field(default=None, repr=False)  # the open window, if any
    sock: socket.socket | None = field(default=None, repr=False)  # its TCP data path


def snapshot(
    activity: Activity, mine: Tally, sock: socket.socket | None, src: Sources = Sources()
) -> Snapshot:
    ifs = interfaces(src.proc_net_dev)
    if src.pause:
        for name, values in ifs.items():
            if name != "lo" and (pause := ETHTOOL.pause(name)):
                values.update(pause)
    started, running = activity.others(mine)
    return Snapshot(ifs, rdma_ports(src.sys_infiniband), tcp_retrans(sock), started, running)


def _moved(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]], size: str
) -> dict[str, dict[str, int]]:
    """Entries whose counters moved, largest ``size`` first, the unmoved counters left out
    (bytes and packets are kept as 0 so a reader always finds them)."""
    out: dict[str, dict[str, int]] = {}
    for name, now in after.items():
        was = before.get(name)
        if was is None or not _NAME.fullmatch(name):
            continue
        delta = {k: v - was[k] for k, v in now.items() if k in was}
        delta = {k: v for k, v in delta.items() if 0 <= v <= MAX_VALUE}  # wrapped: dropped
        if any(delta.values()):
            out[name] = {k: v for k, v in delta.items() if v or k in _ALWAYS}
    ranked = sorted(out, key=lambda n: (-sum(v for k, v in out[n].items() if size in k), n))
    return {n: dict(list(out[n].items())[:MAX_COUNTERS]) for n in ranked[:MAX_ENTRIES]}


_ALWAYS = frozenset({"tx_bytes", "rx_bytes", "tx_packets", "rx_packets"})


def window(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """One side of ``details.counters``: the deltas between two snapshots."""
    retrans = None
    if before.tcp_retrans is not None and after.tcp_retrans is not None:
        retrans = max(0, after.tcp_retrans - before.tcp_retrans)
    shared = (
        after.others_started != before.others_started
        or before.others_running > 0
        or after.others_running > 0
    )
    return {
        "interfaces": _moved(before.interfaces, after.interfaces, "bytes"),
        "rdma": _moved(before.rdma, after.rdma, "data"),
        "tcp_retrans": retrans,
        "shared": shared,
    }


def checked_window(value: object, where: str, peer: str) -> dict[str, Any]:
    """One side of ``details.counters`` from a peer: every name matched against a strict
    pattern, every value an integer in [0, 2**62], sizes bounded (BadRequestError)."""
    f = Fields(value, where, peer)
    out: dict[str, Any] = {}
    for group in ("interfaces", "rdma"):
        entries = f.obj(group, None)
        kept: dict[str, dict[str, int]] = {}
        if entries is not None:
            if len(entries.body) > MAX_ENTRIES:
                raise BadRequestError(peer, f"{where}.{group}", f"more than {MAX_ENTRIES} entries")
            for name in entries.body:
                if not isinstance(name, str) or not _NAME.fullmatch(name):
                    raise BadRequestError(peer, f"{where}.{group}", "holds a malformed name")
                c = entries.obj(name)
                assert c is not None
                if len(c.body) > MAX_COUNTERS:
                    raise BadRequestError(peer, c.where, f"more than {MAX_COUNTERS} counters")
                for k in c.body:
                    if not isinstance(k, str) or not _NAME.fullmatch(k):
                        raise BadRequestError(peer, c.where, "holds a malformed counter name")
                kept[name] = {k: c.integer(k, 0, MAX_VALUE) for k in c.body}
        out[group] = kept
    retrans = f.body.get("tcp_retrans")
    out["tcp_retrans"] = None if retrans is None else f.integer("tcp_retrans", 0, MAX_VALUE)
    out["shared"] = f.flag("shared", False)
    out["rdma_ports_read"] = f.integer("rdma_ports_read", 0, 1 << 16, 0)
    if f.flag("truncated", False):
        out["truncated"] = True
    return out


def checked(value: object, where: str, peer: str) -> dict[str, Any]:
    """``details.counters`` {src, dst} from a peer, each side ``checked_window``."""
    f = Fields(value, where, peer)
    out: dict[str, Any] = {}
    for end in ("src", "dst"):
        value = f.body.get(end)
        out[end] = None if value is None else checked_window(value, f"{where}.{end}", peer)
    return out


@dataclass(frozen=True)
class Counting:
    """What an agent's probes need to read counters: its activity, the session's tally."""

    activity: Activity
    mine: Tally
    sources: Sources = Sources()

    def snapshot(self, sock: socket.socket | None) -> Snapshot:
        return snapshot(self.activity, self.mine, sock, self.sources)


def rdma_ports_read(snap: Snapshot) -> int:
    return len(snap.rdma)


def side(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """``window`` plus how many RDMA ports were readable (so that "no RDMA port moved"
    means something: docs/evidence.md)."""
    return {**window(before, after), "rdma_ports_read": min(rdma_ports_read(after), 1 << 16)}


# -- the responder's half (the agent dispatches ``counters.begin`` / ``counters.end``) ----
def serve(ch: Any, kind: str, body: Mapping[str, Any], counting: Counting) -> None:
    """``counters.begin`` {tcp}: snapshot now, answer ``ok``; ``counters.end``: answer
    ``counters`` with this side's window. ``tcp``: the probe's data path is this very
    connection, so its retransmissions are the probe's."""
    f = Fields(body, kind, ch.peer)
    mine = counting.mine
    if kind == "counters.begin":
        sock = ch.sock if f.flag("tcp", False) else None
        mine.before = counting.snapshot(sock)
        mine.sock = sock
        ch.send("ok")
    elif kind == "counters.end":
        if mine.before is None:
            raise BadRequestError(ch.peer, kind, "no counters.begin before it")
        before, mine.before = mine.before, None
        ch.send("counters", side(before, counting.snapshot(mine.sock)))
    else:
        raise BadRequestError(ch.peer, "kind", f"unknown request {kind[:40]!r}")


# -- the initiator's half ---------------------------------------------------------------
class ProbeWindow:
    """Counters around one probe phase at both ends, read before and after ``initiate``."""

    WAIT_S = 5.0  # for the responder's snapshot: outside the timed loop, never long

    def __init__(
        self, counting: Counting | None, peer_ch: Any, tcp: bool, deadline: float | None = None
    ) -> None:
        """``deadline``: the probe's (monotonic); the responder's snapshot is waited for no
        longer than what is left of it, so a silent responder still fails the probe within
        its --timeout (a fixed 5 s ran past a --timeout of 3).

        ``late``: the responder did not answer ``counters.begin`` within that wait. Its
        answer may still come, and the channel would read it as the answer to the probe's
        next request (in CI's loaded qemu guest a fan-in rank's ``rdma.connect`` read
        ``ok``: "expected 'rdma.accepted', got 'ok'"): the probe goes on over a fresh
        session (``serve_probe``), and this window reads no counters at all (the source's
        TCP counters are of this channel's socket)."""
        self.counting = counting
        self.ch = peer_ch
        self.sock = peer_ch.sock if tcp else None
        self.before: Snapshot | None = None
        self.remote = False
        self.late = False
        if counting is None:
            return
        self.before = counting.snapshot(self.sock)
        wait = self.WAIT_S
        if deadline is not None:
            wait = max(0.05, min(wait, deadline - time.monotonic()))
        try:
            peer_ch.set_timeout(wait)
            peer_ch.request("counters.begin", {"tcp": tcp})
            self.remote = True
        except TimeoutError:
            self.late, self.before = True, None
        except (NetqualError, OSError):
            self.remote = False  # an agent without counters: the dst side is unknown

    def close(self) -> dict[str, Any] | None:
        """``details.counters`` {src, dst}; None when this agent reads no counters."""
        if self.counting is None or self.before is None:
            return None
        dst: dict[str, Any] | None = None
        if self.remote:
            try:
                self.ch.set_timeout(self.WAIT_S)
                body = self.ch.request("counters.end", {}, reply="counters")
                dst = checked_window(body, "counters", self.ch.peer)
            except (NetqualError, OSError, TimeoutError):
                dst = None
        src = side(self.before, self.counting.snapshot(self.sock))
        return bounded({"src": src, "dst": dst})


MAX_JSON_CHARS = 8_192  # of details.counters: the whole probe result's details hold 16 KiB


def bounded(moved: dict[str, Any], limit: int = MAX_JSON_CHARS) -> dict[str, Any]:
    """``moved`` within ``limit`` characters of JSON: while it is larger, each side keeps
    one entry fewer per group (the smallest go first: entries are largest first) and says
    ``truncated``. A host with many busy interfaces must not cost the probe its result."""
    keep = MAX_ENTRIES
    while len(json.dumps(moved)) > limit and keep > 0:
        keep -= 1
        for window in (w for w in moved.values() if isinstance(w, dict)):
            for group in ("interfaces", "rdma"):
                entries = window[group]
                if len(entries) > keep:
                    window[group] = dict(list(entries.items())[:keep])
                    window["truncated"] = True
    return moved
