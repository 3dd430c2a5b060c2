"""Host counters around a probe phase (``details.counters``, docs/evidence.md) as typed
records: one ``CounterWindow`` per side, both sides and the payload in ``PathCounters``.

The agents count (``netqual.agent.counters``); the JSON they and the results file hold is
read into these records once, by ``netqual.codec.counters``, and every rule reads fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CounterWindow:
    """What one side's host counted over a probe phase: per IP interface and per RDMA
    port (``DEVICE/PORT``) counter name -> count moved; the probe connection's TCP
    retransmissions (None: not counted, e.g. RDMA); ``shared``: another probe ran on that
    host in the same window, so its counters are not this path's alone."""

    interfaces: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    rdma: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    tcp_retrans: int | None = None
    shared: bool = False
    rdma_ports_read: int = 0  # RDMA ports whose counters could be read
    truncated: bool = False  # the agent left counters out (too many)


@dataclass(frozen=True)
class PathCounters:
    """``details.counters`` of one path: both sides and the payload the plan moved."""

    src: CounterWindow | None
    dst: CounterWindow | None
    probe_bytes: int = 0

    def side(self, end: str) -> CounterWindow | None:
        return self.src if end == "src" else self.dst
