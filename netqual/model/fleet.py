"""Records of the fleet configuration check (docs/evidence.md): one node's configuration
snapshot, the fleet policy (``[fleet]`` of the policy file) and the outliers found.

A snapshot is a flat, sorted list of (key, text value) pairs: the fleet keys every node has
(``FLEET_KEYS``: compared across nodes) and per-device keys (``nic.IF.mtu``,
``rdma.DEV/PORT.gid.3``: shown, and compared only for the interfaces a probe uses, since
device names differ between hosts). ``SnapshotKey`` is the key grammar, typed, in one
place; ``ComparedKey`` what the fleet check compares (``mtu``, ``mtu[main]``, ``mtu[rail1]``).
A value the platform does not expose is ``UNKNOWN``. Text, not typed values, because the
values come from a peer and are compared and shown as they are; lists are written
``3,4`` and flags ``true``/``false`` so that a policy value compares the same way.
"""

from __future__ import annotations

import enum
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
    "mtu": "netdev MTU of every up (or operstate unknown, admin up), non-loopback interface",
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


class KeyScope(str, enum.Enum):
    """What a snapshot key describes: the host as a whole (the fleet keys and a few
    facts), one IP interface, one RDMA device or port, one PCI function."""

    HOST = "host"
    NIC = "nic"
    RDMA = "rdma"
    PCI = "pci"


# The fields a device key can end in (a device name may itself hold dots: "eth0.100").
NIC_FIELDS = frozenset(
    {"driver", "firmware", "operstate", "speed_mbps", "mtu", "pfc_priorities", "ecn_priorities"}
)
RDMA_FIELDS = frozenset(
    {"firmware", "state", "link_layer", "rate", "width", "active_mtu", "gid_index", "gid_type"}
)
PCI_FIELDS = frozenset({"bdf", "link", "relaxed_ordering", "acs_redirect"})
_FIELDS = {KeyScope.NIC: NIC_FIELDS, KeyScope.RDMA: RDMA_FIELDS, KeyScope.PCI: PCI_FIELDS}
_GID = re.compile(r"gid\.[0-9]+")
MAIN_INTERFACE = "main_interface"  # host key: the interface the node's address uses


@dataclass(frozen=True)
class SnapshotKey:
    """One key of a snapshot, typed: the agent builds its text (``text``), the
    coordinator reads it back (``parse``); the grammar is here only.

    ``kernel`` (HOST, None, "kernel"); ``nic.eth0.mtu`` (NIC, "eth0", "mtu");
    ``rdma.mlx5_0.firmware`` (RDMA, "mlx5_0", ...); ``rdma.mlx5_0/1.gid.3`` (RDMA,
    "mlx5_0/1", "gid.3"); ``pci.eth0.bdf`` (PCI, "eth0", "bdf")."""

    scope: KeyScope
    device: str | None
    field: str

    @classmethod
    def host(cls, field: str) -> SnapshotKey:
        return cls(KeyScope.HOST, None, field)

    @classmethod
    def nic(cls, ifname: str, field: str) -> SnapshotKey:
        return cls(KeyScope.NIC, ifname, field)

    @classmethod
    def rdma(cls, device: str, field: str) -> SnapshotKey:
        """``device``: "mlx5_0" (the device) or "mlx5_0/1" (one port)."""
        return cls(KeyScope.RDMA, device, field)

    @classmethod
    def pci(cls, ifname: str, field: str) -> SnapshotKey:
        return cls(KeyScope.PCI, ifname, field)

    @property
    def text(self) -> str:
        if self.scope is KeyScope.HOST:
            return self.field
        return f"{self.scope.value}.{self.device}.{self.field}"

    @property
    def port(self) -> bool:
        """An RDMA port's key (``DEV/PORT``), not its device's."""
        return self.scope is KeyScope.RDMA and "/" in (self.device or "")

    @classmethod
    def parse(cls, text: str) -> SnapshotKey:
        """A key as the agent wrote it. A key of no known form (a newer agent's) reads as
        a host key of that text: shown, never compared."""
        head, dot, rest = text.partition(".")
        try:
            scope = KeyScope(head)
        except ValueError:
            scope = KeyScope.HOST
        if not dot or scope is KeyScope.HOST:
            return cls.host(text)
        known = _FIELDS[scope]
        for field in sorted(known, key=len, reverse=True):
            if rest.endswith("." + field) and len(rest) > len(field) + 1:
                return cls(scope, rest[: -len(field) - 1], field)
        if scope is KeyScope.RDMA:
            device, dot2, gid = rest.partition(".")
            if dot2 and _GID.fullmatch(gid):
                return cls(scope, device, gid)
        device, dot2, field = rest.rpartition(".")
        return cls(scope, device, field) if dot2 and device else cls.host(text)


@dataclass(frozen=True)
class ComparedKey:
    """A key the fleet check compares across nodes: a fleet key of the node as a whole
    (``mtu``), or one interface of it: ``mtu[main]`` (the interface the node's address
    uses) and ``mtu[rail1]`` (its inventory NIC on rail 1)."""

    field: str  # a fleet key
    where: str | None = None  # "main", "rail1", or None: the node as a whole

    @property
    def text(self) -> str:
        return self.field if self.where is None else f"{self.field}[{self.where}]"

    @property
    def nic_scope(self) -> bool:
        """About one inventory NIC (a rail), not the node's main interface."""
        return self.where is not None and self.where.startswith("rail")

    @classmethod
    def parse(cls, text: str) -> ComparedKey:
        field, bracket, rest = text.partition("[")
        if bracket and rest.endswith("]"):
            return cls(field, rest[:-1])
        return cls(text)


def compared_key(text: str) -> ComparedKey:
    return ComparedKey.parse(text)


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

    def of(self, key: SnapshotKey) -> str:
        return self.get(key.text)

    def keys(self) -> tuple[SnapshotKey, ...]:
        """Every key, typed, in the snapshot's order."""
        return tuple(SnapshotKey.parse(k) for k, _v in self.values)


MAJORITY_NAMED = 4  # majority nodes an outlier keeps by name; the count says the rest


@dataclass(frozen=True)
class FleetOutlier:
    """A node whose ``key`` differs: from the policy's ``expected`` value, or (no
    expectation) from the ``majority`` of its role, held by ``majority_count`` of the
    ``compared`` nodes (those of its role with a known value), the first
    ``MAJORITY_NAMED`` named in ``majority_nodes``. Counts, not every name: each outlier
    naming the whole majority grew with outliers x nodes (90 MB of results.json at
    10,000 nodes). ``majority`` None with ``expected`` None: a tie, no value is the
    majority."""

    node: str
    key: str
    value: str
    expected: str | None = None
    majority: str | None = None
    majority_nodes: tuple[str, ...] = ()
    role: str = "any"
    nic: str | None = None  # the interface of a per-interface key (``mtu[rail1]``, ``mtu[main]``)
    majority_count: int = 0  # 0: len(majority_nodes) (a file from before the count)
    compared: int = 0  # 0: not recorded (a file from before the count)

    @property
    def holders(self) -> int:
        """How many nodes hold the majority value."""
        return max(self.majority_count, len(self.majority_nodes))

    @property
    def against(self) -> str:
        """'expected 9000' / 'majority 9000 on a1, a2' / 'majority 9000 on 997 of 1,000
        nodes, e.g. a1, a2' / 'no majority'."""
        if self.expected is not None:
            return f"expected {self.expected}"
        if self.majority is None:
            return f"no majority among the {self.role} nodes"
        if self.holders <= MAJORITY_NAMED:
            return f"majority {self.majority} on {', '.join(self.majority_nodes)}"
        role = "" if self.role == "any" else f" {self.role}"
        of = f" of {self.compared:,}" if self.compared >= self.holders else ""
        named = ", ".join(self.majority_nodes[:2])
        example = f", e.g. {named}" if named else ""
        return f"majority {self.majority} on {self.holders:,}{of}{role} nodes{example}"

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

    @property
    def empty(self) -> bool:
        return not self.expected and not self.allow_differ


@dataclass(frozen=True)
class FleetResult:
    """The snapshots compared, the outliers found and the ``[fleet]`` policy they were
    judged by. ``carried``: the nodes whose snapshot a retest took from the run it
    re-tests (docs/evidence.md); the others' are its own (the re-tested nodes')."""

    snapshot: tuple[ConfigSnapshot, ...]
    outliers: tuple[FleetOutlier, ...]
    policy: FleetPolicy = FleetPolicy()
    carried: tuple[str, ...] = ()

    @property
    def consistency(self) -> tuple[FleetOutlier, ...]:
        return tuple(o for o in self.outliers if o.expected is None)

    @property
    def unexpected(self) -> tuple[FleetOutlier, ...]:
        return tuple(o for o in self.outliers if o.expected is not None)
