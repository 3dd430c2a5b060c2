"""The delayed-link relay: one process that carries every delayed link of a lab.

This kernel has no netem, so a link with a delay is two TUN devices, one in each
endpoint namespace, and this process between them. It reads each IP packet from one
side, holds it until ``arrival + delay`` (plus serialisation time when the link has a
rate), and writes it unchanged to the other side. It never touches the packet, so TTL,
TCP and UDP pass exactly as the kernel sent them; routers are the namespaces' own kernel
forwarding.

A path may cross several delayed links (cross-rack: leaf-spine, then spine-leaf). A
packet the relay writes into a router comes straight back to it on the next delayed link
(the router forwards it inside the ``write``), minus one TTL. Such a transit packet
"arrives" at the next link at the moment it was due to leave the previous one, not when
it is read again: its deadlines chain along the path, so the delays add up exactly and a
relay running late on one link does not push the later links' deadlines back. The
relay's own cost is compensated once per path (on the first delayed link), not per link.

Precision on a small noisy machine comes from: a single loop with one deadline queue per
direction (a constant delay keeps each queue in deadline order, so order is preserved),
``select`` timeouts in microseconds with the timer slack set to 1 ns, and a short spin
for the last ``SPIN_NS`` before a deadline instead of trusting the wake-up. The relay's
own forwarding cost (read, write and the receiver's wake-up) is subtracted once from
the path's hold time (``overhead_ns``), so a path adds the sum of its links' delays, not
that sum plus the relay's cost.

Run as ``python -m netqual.lab.relayd CONFIG.json``; it prints ``ready`` once every TUN
device exists and exits on SIGTERM. The TUN devices are not persistent: they vanish
with this process.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import fcntl
import gc
import json
import os
import random
import select
import signal
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from netqual.lab.system import setns_path

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
IFF_VNET_HDR = 0x4000
TUNSETOFFLOAD = 0x400454D0
TUN_F_CSUM = 0x01
TUN_F_TSO4 = 0x02
TUN_F_TSO6 = 0x04
GSO = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6
VNET_BYTES = 10  # struct virtio_net_hdr, before every packet read or written
VNET_GSO_NONE = 0
PR_SET_TIMERSLACK = 29

SPIN_NS = 25_000  # spin instead of sleeping for the last 25 us before a deadline
SPIN_WINDOW_NS = 0  # poll this long after each packet (0: never; see run())
READ_BUDGET = 64  # packets read from one device per wake-up, so one link cannot starve others
QUEUE_LIMIT = 4096  # segments held per direction before tail drop (a full link drops, like tbf)
DEFAULT_OVERHEAD_NS = 35_000  # per path and direction; measured, docs/lab.md "Precision"
KEY_BYTES = 96  # IPv4 header + transport header: enough to tell a packet from any other
READ_BYTES = VNET_BYTES + 65_535  # the largest IPv4 packet, a GSO one included
TRANSIT_LIMIT = 1024  # packets written recently, to recognise them on the next link
TRANSIT_WINDOW_NS = 50_000_000  # a packet not seen again within 50 ms was delivered
LATE_NS = 50_000  # a packet that leaves later than this after its deadline is counted
NICE = -10
FIFO_PRIORITY = 10  # real-time priority; 0 runs the relay as an ordinary (nice) process


@dataclass(frozen=True)
class RelayLink:
    """One delayed link as the relay sees it (both directions share delay and rate)."""

    name: str
    a_netns: str  # path of the namespace file, e.g. /run/netns/nql-ab12-leaf1
    a_ifname: str
    b_netns: str
    b_ifname: str
    delay_ns: int  # one way
    rate_bps: int | None  # None: no rate limit
    loss_ppm: int = 0  # packets dropped at random per million, each direction

    def to_json(self) -> dict[str, object]:
        return self.__dict__.copy()

    @staticmethod
    def from_json(raw: dict[str, object]) -> RelayLink:
        rate = raw["rate_bps"]
        return RelayLink(
            name=str(raw["name"]),
            a_netns=str(raw["a_netns"]),
            a_ifname=str(raw["a_ifname"]),
            b_netns=str(raw["b_netns"]),
            b_ifname=str(raw["b_ifname"]),
            delay_ns=int(str(raw["delay_ns"])),
            rate_bps=None if rate is None else int(str(rate)),
            loss_ppm=int(str(raw.get("loss_ppm", 0))),
        )


_libc = ctypes.CDLL(None, use_errno=True)


def open_tun(netns: str, ifname: str, offload: int = GSO) -> int:
    """Create TUN device ``ifname`` inside namespace ``netns``; return its (non-blocking) fd.

    Every packet read or written starts with a ``virtio_net_hdr`` (``VNET_BYTES``). With
    ``offload`` = ``GSO`` the kernel hands the relay a TCP sender's segmentation-offload
    packet whole (up to 64 KiB, the header says how it splits into MTU-sized segments)
    and takes it whole on the other side; 0: one MTU-sized packet per read, as a NIC
    without offloads would see them.

    The device belongs to the namespace the process was in when it opened /dev/net/tun,
    so the process switches namespace first. Callers must be single-threaded.
    """
    setns_path(netns)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    ifr = struct.pack("16sH22x", ifname.encode(), IFF_TUN | IFF_NO_PI | IFF_VNET_HDR)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    fcntl.ioctl(fd, TUNSETOFFLOAD, offload)
    return fd


def segments(packet: bytes) -> tuple[int, int]:
    """(segments, bytes on the wire) of a packet read from a TUN device: a GSO packet is
    the segments the kernel would have sent one by one, each with its own IP and TCP
    header; any other packet is one segment, its IP packet."""
    size = len(packet) - VNET_BYTES
    if packet[1] == VNET_GSO_NONE or size < VNET_BYTES + 40:
        return 1, size
    gso_size = packet[4] | packet[5] << 8
    ip_hl = (packet[VNET_BYTES] & 0x0F) * 4
    headers = ip_hl + (packet[VNET_BYTES + ip_hl + 12] >> 4) * 4
    count = max(1, -(-(size - headers) // gso_size)) if gso_size else 1
    return count, size + (count - 1) * headers


class LinkDirection:
    """Packets travelling one way over one link, in deadline order."""

    __slots__ = (
        "busy_until_ns", "delay_ns", "dropped", "held", "loss", "lost", "ns_per_byte", "out_fd",
        "queue",
    )  # fmt: skip

    def __init__(self, out_fd: int, delay_ns: int, rate_bps: int | None, loss_ppm: int = 0) -> None:
        self.out_fd = out_fd
        self.loss = loss_ppm / 1e6
        self.lost = 0
        self.delay_ns = delay_ns
        self.ns_per_byte = 8e9 / rate_bps if rate_bps else 0.0
        self.busy_until_ns = 0
        self.dropped = 0
        self.held = 0  # segments in the queue
        # (deadline, packet, its segments, its transit_key)
        self.queue: collections.deque[tuple[int, bytes, int, bytes | None]] = collections.deque()

    def admit(self, packet: bytes, arrival_ns: int, key: bytes | None = None) -> None:
        """Queue ``packet`` (``key``: its ``transit_key``) to leave ``delay`` after
        ``arrival_ns`` (its nominal arrival: see ``Transit``), after the packets ahead of
        it: a link is first in, first out. A GSO packet is its segments back to back: it
        takes their room in the queue and their serialisation time, and leaves when its
        last segment would have."""
        if self.loss and random.random() < self.loss:
            self.lost += 1
            return
        count, wire = segments(packet)
        queue = self.queue
        if self.held + count > QUEUE_LIMIT:
            self.dropped += count
            return
        if self.ns_per_byte:
            start = max(arrival_ns, self.busy_until_ns)
            self.busy_until_ns = start + int(wire * self.ns_per_byte)
            deadline = self.busy_until_ns + self.delay_ns
        else:
            deadline = arrival_ns + self.delay_ns
        if queue and queue[-1][0] > deadline:
            deadline = queue[-1][0]  # a transit packet behind a fresh one: no overtaking
        self.held += count
        queue.append((deadline, packet, count, key))


def transit_key(packet: bytes) -> bytes | None:
    """What identifies an IPv4 packet (after its ``virtio_net_hdr``) on both sides of a
    router: its first ``KEY_BYTES`` less the TTL and the header checksum, the only fields
    forwarding changes (a GSO packet is forwarded whole)."""
    v = VNET_BYTES
    if len(packet) < v + 20 or packet[v] >> 4 != 4:
        return None
    return packet[v : v + 8] + packet[v + 9 : v + 10] + packet[v + 12 : v + KEY_BYTES]


class Transit:
    """When each packet the relay wrote was due, so that the next delayed link on its path
    counts from there.

    A fresh packet (from a host, or over a plain veth) arrives when it is read, less the
    relay's own cost ``overhead_ns``, once per path. A packet the relay itself wrote
    ``TRANSIT_WINDOW_NS`` ago at most arrives at the deadline it was written for: the
    time between that deadline and its reading again (the relay's lateness, its loop) is
    already counted, so the delays along a path add up and lateness does not accumulate.
    """

    def __init__(self, overhead_ns: int) -> None:
        self.overhead_ns = overhead_ns
        self.written: dict[bytes, tuple[int, int]] = {}  # key -> (deadline, written at)
        # the keys of the last TRANSIT_LIMIT writes, oldest first (``next(iter(written))``
        # walked the holes that reading packets again leaves in a dict: 2 us a packet)
        self.order: collections.deque[bytes] = collections.deque()
        self.chained = 0

    def wrote(self, key: bytes | None, deadline_ns: int, now_ns: int) -> None:
        """The packet of ``key`` (its ``transit_key``) was written, due at ``deadline_ns``."""
        if key is None:
            return
        order = self.order
        if len(order) >= TRANSIT_LIMIT:
            self.written.pop(order.popleft(), None)  # the oldest: long delivered
        self.written[key] = (deadline_ns, now_ns)
        order.append(key)

    def arrival(self, key: bytes | None, now_ns: int) -> int:
        """When the packet of ``key`` (its ``transit_key``), read at ``now_ns``, arrived."""
        seen = self.written.pop(key, None) if key is not None else None
        if seen is not None and now_ns - seen[1] < TRANSIT_WINDOW_NS:
            self.chained += 1
            return seen[0]
        return now_ns - self.overhead_ns


class Stats:
    """How late packets left against their deadline; printed to the relay log on exit."""

    def __init__(self) -> None:
        self.packets = 0
        self.late_50us = 0
        self.late_max_ns = 0

    def record(self, late_ns: int) -> None:
        self.packets += 1
        if late_ns > LATE_NS:
            self.late(late_ns)

    def late(self, late_ns: int) -> None:
        """A packet left ``late_ns`` > ``LATE_NS`` after its deadline (counted apart)."""
        self.late_50us += 1
        self.late_max_ns = max(self.late_max_ns, late_ns)

    def summary(self, dropped: int, chained: int, lost: int = 0) -> str:
        return (
            f"relay: {self.packets} packets ({chained} on a further delayed link), "
            f"{dropped} dropped (queue full), "
            + (f"{lost} lost (the links' loss_percent), " if lost else "")
            + f"{self.late_50us} sent > 50 us late (worst {self.late_max_ns / 1e3:.0f} us)"
        )


class Relay:
    def __init__(
        self,
        links: list[RelayLink],
        overhead_ns: int = DEFAULT_OVERHEAD_NS,
        spin_window_ns: int = SPIN_WINDOW_NS,
        gso: bool = True,
    ) -> None:
        self.spin_window_ns = spin_window_ns
        self.by_fd: dict[int, LinkDirection] = {}
        self.fds: list[int] = []
        # Whole GSO packets: a bulk transfer costs the relay (and the kernel) one read,
        # one write and one forwarding per 64 KiB instead of per MTU. Not where a link
        # loses packets: loss is per packet on the wire, so the relay must see segments;
        # then on every link, so that a packet forwarded from one link to the next is the
        # same packet on both (``Transit``).
        offload = GSO if gso and not any(link.loss_ppm for link in links) else 0
        for link in links:
            fd_a = open_tun(link.a_netns, link.a_ifname, offload)
            fd_b = open_tun(link.b_netns, link.b_ifname, offload)
            # reading from A's device means the packet travels towards B
            self.by_fd[fd_a] = LinkDirection(fd_b, link.delay_ns, link.rate_bps, link.loss_ppm)
            self.by_fd[fd_b] = LinkDirection(fd_a, link.delay_ns, link.rate_bps, link.loss_ppm)
            self.fds += [fd_a, fd_b]
        self.directions = list(self.by_fd.values())
        self.transit = Transit(overhead_ns)
        self.stats = Stats()

    def _read(self, fd: int) -> None:
        admit = self.by_fd[fd].admit
        arrival = self.transit.arrival
        read, clock = os.read, time.monotonic_ns
        for _ in range(READ_BUDGET):
            try:
                packet = read(fd, READ_BYTES)
            except BlockingIOError:
                return
            key = transit_key(packet)
            admit(packet, arrival(key, clock()), key)

    def _flush(self, now_ns: int) -> int | None:
        """Write every due packet; return the earliest pending deadline."""
        earliest: int | None = None
        wrote = self.transit.wrote
        write = os.write
        stats = self.stats
        for d in self.directions:
            queue = d.queue
            while queue and queue[0][0] <= now_ns:
                deadline, packet, count, key = queue.popleft()
                d.held -= count
                stats.packets += 1
                if now_ns - deadline > LATE_NS:
                    stats.late(now_ns - deadline)
                # before the write: the router forwards the packet inside it, and it may
                # be readable on its next link before os.write returns
                wrote(key, deadline, now_ns)
                try:
                    write(d.out_fd, packet)
                except OSError as err:  # device going down during teardown: drop
                    if err.errno not in (errno.EIO, errno.EAGAIN, errno.ENOBUFS, errno.EINVAL):
                        raise
            if queue and (earliest is None or queue[0][0] < earliest):
                earliest = queue[0][0]
        return earliest

    def run(self) -> None:
        fds = self.fds
        last_packet_ns = 0
        while True:
            now = time.monotonic_ns()
            earliest = self._flush(now)
            # Sleep until a packet comes or SPIN_NS before the next deadline, then spin
            # to it. A relay that polled all the time while traffic flowed used up its
            # share of a busy CPU and was then not allowed to run when a deadline came:
            # on a shared 2-core machine cross-rack p50s went to milliseconds. Asleep, a
            # real-time relay preempts whatever runs the moment it is due, and uses the
            # CPU only for the packets it carries. spin_window_ns > 0 polls that long
            # after each packet (docs/lab.md, "Precision").
            if earliest is not None and earliest - now <= SPIN_NS:
                timeout: float | None = 0.0
            elif now - last_packet_ns < self.spin_window_ns:
                timeout = 0.0
            elif earliest is None:
                timeout = None
            else:
                # select() takes microseconds; with 1 ns timer slack the wake-up is on time
                # to within the scheduler's latency (about 20 us here), then spin.
                timeout = (earliest - now - SPIN_NS) / 1e9
            ready, _, _ = select.select(fds, [], [], timeout)
            if ready:
                for fd in ready:
                    self._read(fd)
                last_packet_ns = time.monotonic_ns()


def _stop(*_: object) -> None:
    # select() is restarted after a handler returns (PEP 475), so leave by raising
    raise SystemExit(0)


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    links = [RelayLink.from_json(raw) for raw in config["links"]]
    _libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    relay = Relay(
        links,
        int(config.get("overhead_ns", DEFAULT_OVERHEAD_NS)),
        int(config.get("spin_window_ns", SPIN_WINDOW_NS)),
        bool(config.get("gso", 1)),
    )
    # The relay is on every delayed packet's critical path: on a busy machine it must win
    # the CPU as soon as a packet or a deadline is due. As a real-time (SCHED_FIFO) task
    # that sleeps between packets it preempts any ordinary process at once; the kernel's
    # RT throttling (95% of a CPU) bounds it should bulk traffic keep it busy. Where that
    # is refused it falls back to a raised nice priority.
    os.setpriority(os.PRIO_PROCESS, 0, int(config.get("nice", NICE)))
    fifo = int(config.get("fifo", FIFO_PRIORITY))
    if fifo:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo))
        except OSError as err:
            sys.stderr.write(f"relay: no real-time priority ({err.strerror}); nice only\n")

    def report(*_: object) -> None:
        dropped = sum(d.dropped for d in relay.directions)
        lost = sum(d.lost for d in relay.directions)
        sys.stderr.write(relay.stats.summary(dropped, relay.transit.chained, lost) + "\n")
        sys.stderr.flush()

    signal.signal(signal.SIGUSR1, report)  # `netqual lab status` asks for the counters
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    # The loop allocates a tuple per packet but makes no reference cycles: without the
    # cyclic collector it never pauses mid-flight.
    gc.freeze()
    gc.disable()
    print("ready", flush=True)
    try:
        relay.run()
    finally:
        report()
    return 0
