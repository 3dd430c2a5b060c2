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
PR_SET_TIMERSLACK = 29

SPIN_NS = 25_000  # spin instead of sleeping for the last 25 us before a deadline
SPIN_WINDOW_NS = 0  # poll this long after each packet (0: never; see run())
READ_BUDGET = 64  # packets read from one device per wake-up, so one link cannot starve others
QUEUE_LIMIT = 4096  # packets held per direction before tail drop (a full link drops, like tbf)
DEFAULT_OVERHEAD_NS = 35_000  # per path and direction; measured, docs/lab.md "Precision"
KEY_BYTES = 96  # IPv4 header + transport header: enough to tell a packet from any other
TRANSIT_LIMIT = 1024  # packets written recently, to recognise them on the next link
TRANSIT_WINDOW_NS = 50_000_000  # a packet not seen again within 50 ms was delivered
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


def open_tun(netns: str, ifname: str) -> int:
    """Create TUN device ``ifname`` inside namespace ``netns``; return its (non-blocking) fd.

    The device belongs to the namespace the process was in when it opened /dev/net/tun,
    so the process switches namespace first. Callers must be single-threaded.
    """
    setns_path(netns)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    ifr = struct.pack("16sH22x", ifname.encode(), IFF_TUN | IFF_NO_PI)
    fcntl.ioctl(fd, TUNSETIFF, ifr)
    return fd


class LinkDirection:
    """Packets travelling one way over one link, in deadline order."""

    __slots__ = (
        "busy_until_ns", "delay_ns", "dropped", "loss", "lost", "ns_per_byte", "out_fd", "queue",
    )  # fmt: skip

    def __init__(self, out_fd: int, delay_ns: int, rate_bps: int | None, loss_ppm: int = 0) -> None:
        self.out_fd = out_fd
        self.loss = loss_ppm / 1e6
        self.lost = 0
        self.delay_ns = delay_ns
        self.ns_per_byte = 8e9 / rate_bps if rate_bps else 0.0
        self.busy_until_ns = 0
        self.dropped = 0
        self.queue: collections.deque[tuple[int, bytes]] = collections.deque()

    def admit(self, packet: bytes, arrival_ns: int) -> None:
        """Queue ``packet`` to leave ``delay`` after ``arrival_ns`` (its nominal arrival:
        see ``Transit``), after the packets ahead of it: a link is first in, first out."""
        if self.loss and random.random() < self.loss:
            self.lost += 1
            return
        queue = self.queue
        if len(queue) >= QUEUE_LIMIT:
            self.dropped += 1
            return
        if self.ns_per_byte:
            start = max(arrival_ns, self.busy_until_ns)
            self.busy_until_ns = start + int(len(packet) * self.ns_per_byte)
            deadline = self.busy_until_ns + self.delay_ns
        else:
            deadline = arrival_ns + self.delay_ns
        if queue and queue[-1][0] > deadline:
            deadline = queue[-1][0]  # a transit packet behind a fresh one: no overtaking
        queue.append((deadline, packet))


def transit_key(packet: bytes) -> bytes | None:
    """What identifies an IPv4 packet on both sides of a router: its first ``KEY_BYTES``
    less the TTL and the header checksum, the only fields forwarding changes."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    return packet[:8] + packet[9:10] + packet[12:KEY_BYTES]


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
        self.chained = 0

    def wrote(self, packet: bytes, deadline_ns: int, now_ns: int) -> None:
        key = transit_key(packet)
        if key is None:
            return
        written = self.written
        if len(written) >= TRANSIT_LIMIT:
            del written[next(iter(written))]  # the oldest: long delivered
        written[key] = (deadline_ns, now_ns)

    def arrival(self, packet: bytes, now_ns: int) -> int:
        key = transit_key(packet)
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
        if late_ns > 50_000:
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
    ) -> None:
        self.spin_window_ns = spin_window_ns
        self.by_fd: dict[int, LinkDirection] = {}
        self.fds: list[int] = []
        for link in links:
            fd_a = open_tun(link.a_netns, link.a_ifname)
            fd_b = open_tun(link.b_netns, link.b_ifname)
            # reading from A's device means the packet travels towards B
            self.by_fd[fd_a] = LinkDirection(fd_b, link.delay_ns, link.rate_bps, link.loss_ppm)
            self.by_fd[fd_b] = LinkDirection(fd_a, link.delay_ns, link.rate_bps, link.loss_ppm)
            self.fds += [fd_a, fd_b]
        self.directions = list(self.by_fd.values())
        self.transit = Transit(overhead_ns)
        self.stats = Stats()

    def _read(self, fd: int) -> None:
        direction = self.by_fd[fd]
        arrival = self.transit.arrival
        for _ in range(READ_BUDGET):
            try:
                packet = os.read(fd, 65536)
            except BlockingIOError:
                return
            direction.admit(packet, arrival(packet, time.monotonic_ns()))

    def _flush(self, now_ns: int) -> int | None:
        """Write every due packet; return the earliest pending deadline."""
        earliest: int | None = None
        wrote = self.transit.wrote
        for d in self.directions:
            queue = d.queue
            while queue and queue[0][0] <= now_ns:
                deadline, packet = queue.popleft()
                self.stats.record(now_ns - deadline)
                # before the write: the router forwards the packet inside it, and it may
                # be readable on its next link before os.write returns
                wrote(packet, deadline, now_ns)
                try:
                    os.write(d.out_fd, packet)
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
