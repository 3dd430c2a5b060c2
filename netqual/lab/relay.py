"""The delayed-link relay: one process that carries every delayed link of a lab.

This kernel has no netem, so a link with a delay is two TUN devices, one in each
endpoint namespace, and this process between them. It reads each IP packet from one
side, holds it until ``arrival + delay`` (plus serialisation time when the link has a
rate), and writes it unchanged to the other side. It never touches the packet, so TTL,
TCP and UDP pass exactly as the kernel sent them; routers are the namespaces' own kernel
forwarding.

Precision on a small noisy machine comes from: a single loop with one deadline queue per
direction (a constant delay keeps each queue in deadline order, so order is preserved),
``select`` timeouts in microseconds with the timer slack set to 1 ns, and a short spin
for the last ``SPIN_NS`` before a deadline instead of trusting the wake-up. The relay's
own forwarding cost (wake-up, read, write) is subtracted from the hold time
(``overhead_ns``), so a link adds its configured delay, not delay + relay cost.

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

SPIN_NS = 40_000  # spin instead of sleeping for the last 40 us before a deadline
SPIN_WINDOW_NS = 20_000_000  # keep polling for 20 ms after the last packet
READ_BUDGET = 64  # packets read from one device per wake-up, so one link cannot starve others
QUEUE_LIMIT = 4096  # packets held per direction before tail drop (a full link drops, like tbf)
DEFAULT_OVERHEAD_NS = 40_000
NICE = -10


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


class _Direction:
    """Packets travelling one way over one link, in deadline order."""

    __slots__ = ("busy_until_ns", "delay_ns", "dropped", "ns_per_byte", "out_fd", "queue")

    def __init__(self, out_fd: int, delay_ns: int, rate_bps: int | None) -> None:
        self.out_fd = out_fd
        self.delay_ns = delay_ns
        self.ns_per_byte = 8e9 / rate_bps if rate_bps else 0.0
        self.busy_until_ns = 0
        self.dropped = 0
        self.queue: collections.deque[tuple[int, bytes]] = collections.deque()

    def admit(self, packet: bytes, now_ns: int) -> None:
        if len(self.queue) >= QUEUE_LIMIT:
            self.dropped += 1
            return
        if self.ns_per_byte:
            start = max(now_ns, self.busy_until_ns)
            self.busy_until_ns = start + int(len(packet) * self.ns_per_byte)
            self.queue.append((self.busy_until_ns + self.delay_ns, packet))
        else:
            self.queue.append((now_ns + self.delay_ns, packet))


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

    def summary(self, dropped: int) -> str:
        return (
            f"relay: {self.packets} packets, {dropped} dropped (queue full), "
            f"{self.late_50us} sent > 50 us late (worst {self.late_max_ns / 1e3:.0f} us)"
        )


class Relay:
    def __init__(
        self,
        links: list[RelayLink],
        overhead_ns: int = DEFAULT_OVERHEAD_NS,
        spin_window_ns: int = SPIN_WINDOW_NS,
    ) -> None:
        self.spin_window_ns = spin_window_ns
        self.by_fd: dict[int, _Direction] = {}
        self.fds: list[int] = []
        for link in links:
            fd_a = open_tun(link.a_netns, link.a_ifname)
            fd_b = open_tun(link.b_netns, link.b_ifname)
            hold = max(0, link.delay_ns - overhead_ns)
            # reading from A's device means the packet travels towards B
            self.by_fd[fd_a] = _Direction(fd_b, hold, link.rate_bps)
            self.by_fd[fd_b] = _Direction(fd_a, hold, link.rate_bps)
            self.fds += [fd_a, fd_b]
        self.directions = list(self.by_fd.values())
        self.stats = Stats()

    def _read(self, fd: int) -> None:
        direction = self.by_fd[fd]
        for _ in range(READ_BUDGET):
            try:
                packet = os.read(fd, 65536)
            except BlockingIOError:
                return
            direction.admit(packet, time.monotonic_ns())

    def _flush(self, now_ns: int) -> int | None:
        """Write every due packet; return the earliest pending deadline."""
        earliest: int | None = None
        for d in self.directions:
            queue = d.queue
            while queue and queue[0][0] <= now_ns:
                deadline, packet = queue.popleft()
                self.stats.record(now_ns - deadline)
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
            # A sleeping relay pays a wake-up of tens of microseconds per packet on a
            # virtual CPU, so while traffic flows it polls; after spin_window_ns of
            # silence it sleeps. (sched_yield() in the poll and SCHED_FIFO were both
            # measured worse: docs/lab.md, "Precision".)
            polling = now - last_packet_ns < self.spin_window_ns
            if polling:
                timeout: float | None = 0.0
            elif earliest is None:
                timeout = None
            else:
                # select() takes microseconds; with 1 ns timer slack the wake-up is on time
                # to within the scheduler's latency, and the last SPIN_NS are spun.
                wait_ns = earliest - now - SPIN_NS
                timeout = wait_ns / 1e9 if wait_ns > 0 else 0.0
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
    # the CPU as soon as a packet or a deadline is due, so it runs at a raised priority.
    os.setpriority(os.PRIO_PROCESS, 0, int(config.get("nice", NICE)))
    if config.get("fifo"):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(config["fifo"])))

    def report(*_: object) -> None:
        dropped = sum(d.dropped for d in relay.directions)
        sys.stderr.write(relay.stats.summary(dropped) + "\n")
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
