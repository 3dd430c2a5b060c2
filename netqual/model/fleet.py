"""Records of the fleet configuration check (docs/evidence.md): one node's configuration
snapshot, the fleet policy (``[fleet]`` of the policy file) and the outliers found.

A snapshot is a flat, sorted list of (key, text value) pairs: the fleet keys every node has
(``FLEET_KEYS``: compared across nodes) and per-device keys (``nic.IF.mtu``,
``rdma.DEV/PORT.gid.3``: shown, never compared, since device names differ between hosts).
A value the platform does not expose is ``UNKNOWN``. Text, not typed values, because the
values come from a peer and are compared and shown as they are; lists are written
``3,4`` and flags ``true``/``false`` so that a policy value compares the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNKNOWN = "unknown"
MAX_KEYS = 1024  # a node with many ports and GIDs stays bounded
MAX_VALUE_CHARS = 256
KEY_PATTERN = re.compile(r"[A-Za-z0-9_.:/-]{1,160}")

# Fleet keys: compared across the nodes of one role, and allowed in [fleet] as expected
# values. Each says what it holds (docs/evidence.md has where it comes from).
FLEET_KEYS: dict[str, str] = {
    "kernel": "kernel release",
    "os": "operating system (os-release PRETTY_NAME)",
    "netqual": "netqual version of the agent",
    "pyverbs": "pyverbs version",
    "rdma_core": "rdma-core (libibverbs) release",
    "tcp_congestion_control": "TCP congestion control",
    "tcp_ecn": "TCP ECN sysctl (0 off, 1 on, 2 when asked)",
    "mtu": "netdev MTU of every up, non-loopback interface",
    "link_speed_mbps": "link speed of those interfaces, Mb/s",
    "driver": "driver of those interfaces",
    "firmware": "firmware of those interfaces and RDMA devices",
    "roce_mtu": "active MTU of the active RDMA ports, bytes",
    "roce_gid_type": "type of the GID the probes will use (RoCE v2, RoCE v1, IB)",
    "gid_index": "GID index the probes will use",
    "pfc_priorities": "PFC-enabled priorities",
    "ecn": "RoCE ECN enabled on some priority (true/false)",
    "ecn_priorities": "priorities with RoCE ECN enabled (reaction and notification point)",
    "iommu": "IOMMU mode (off, passthrough, translated)",
    "acs": "ACS P2P redirect on a bridge above the NICs (true/false)",
    "relaxed_ordering": "PCIe relaxed ordering enabled on the NICs (true/false)",
}


def value_text(value: object) -> str | None:
    """A policy value (TOML) as snapshot text: 4096 -> '4096', [3, 4] -> '3,4', true ->
    'true'; None when it has no such form (a table, a float, a list of lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(v, (int, str)) and not isinstance(v, bool) for v in value
    ):
        return ",".join(str(v) for v in value) if value else "none"
    return None


@dataclass(frozen=True)
class ConfigSnapshot:
    """What one node reported about its configuration (keys sorted, values text)."""

    node: str
    values: tuple[tuple[str, str], ...]

    def get(self, key: str) -> str:
        return dict(self.values).get(key, UNKNOWN)

    @property
    def fleet(self) -> dict[str, str]:
        """The fleet keys, every one present (UNKNOWN where the node did not say)."""
        have = dict(self.values)
        return {k: have.get(k, UNKNOWN) for k in FLEET_KEYS}

    @property
    def devices(self) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k, v in self.values if k not in FLEET_KEYS)


@dataclass(frozen=True)
class FleetOutlier:
    """A node whose ``key`` differs: from the policy's ``expected`` value, or (no
    expectation) from the ``majority`` of its role, held by ``majority_nodes``.
    ``majority`` None with ``expected`` None: a tie, no value is the majority."""

    node: str
    key: str
    value: str
    expected: str | None = None
    majority: str | None = None
    majority_nodes: tuple[str, ...] = ()
    role: str = "any"
    nic: str | None = None  # the node's NIC of a per-NIC key (``mtu[rail1]``)

    @property
    def against(self) -> str:
        """'expected 9000' / 'majority 9000 on a1, a2' / 'no majority'."""
        if self.expected is not None:
            return f"expected {self.expected}"
        if self.majority is None:
            return f"no majority among the {self.role} nodes"
        shown = ", ".join(self.majority_nodes[:5])
        more = f" +{len(self.majority_nodes) - 5}" if len(self.majority_nodes) > 5 else ""
        return f"majority {self.majority} on {shown}{more}"

    @property
    def finding(self) -> str:
        """'mtu 1400 (majority ...)', 'mtu[rail1] 1500 on ens2 (majority ...)'."""
        on = f" on {self.nic}" if self.nic is not None else ""
        return f"{self.key} {self.value}{on} ({self.against})"

    @property
    def text(self) -> str:
        return f"{self.node}: {self.finding}"


@dataclass(frozen=True)
class FleetPolicy:
    """``[fleet]`` of the policy file: expected values, and keys allowed to differ."""

    expected: tuple[tuple[str, str], ...] = ()
    allow_differ: frozenset[str] = frozenset()


@dataclass(frozen=True)
class FleetResult:
    snapshot: tuple[ConfigSnapshot, ...]
    outliers: tuple[FleetOutlier, ...]

    @property
    def consistency(self) -> tuple[FleetOutlier, ...]:
        return tuple(o for o in self.outliers if o.expected is None)

    @property
    def unexpected(self) -> tuple[FleetOutlier, ...]:
        return tuple(o for o in self.outliers if o.expected is not None)
