"""Endpoints below the node: which NIC pairs a run probes (``run --rails``, docs/rails.md).

A node that lists ``nics`` in the inventory is probed NIC by NIC. Each NIC becomes an
*endpoint*: a ``Node`` named ``NODE/NIC`` with the NIC's address, whose agent is the
node's (``Node.agent`` at ``Node.agent_address``); probes bind to and connect to the NIC's
address, so the bulk budget counts per NIC as it counts per host. The pair plan is
the mode's plan over the nodes (full mesh, bipartite, sampled), then each node pair is
expanded into endpoint pairs:

- ``same``: NIC on rail i <-> the peer's NIC on rail i (rail-optimised fabrics); the
  default when NICs are listed. A node pair's rails share the node pair's round, so a
  round is disjoint per NIC (two rails of one node run side by side, as a KV connector
  striping over rails would), never two probes on one NIC at once.
- ``all``: every NIC of one node with every NIC of the other, packed into rounds in
  which no NIC is busy twice.
- ``none``: one address per node (``address``), NICs ignored.

The bulk budget then counts per endpoint, that is per NIC.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from netqual.base.errors import UsageError
from netqual.model.node import HostNics, Nic, Node
from netqual.model.plan import ProbePlan
from netqual.model.run import Mode
from netqual.planning import schedule


class Rails(str, enum.Enum):
    SAME = "same"
    ALL = "all"
    NONE = "none"

    @classmethod
    def parse(cls, text: str, option: str = "--rails") -> Rails:
        try:
            return cls(text)
        except ValueError:
            raise UsageError(option, f"unknown value {text!r} (same, all or none)") from None


RAIL_NAMES = tuple(r.value for r in Rails)
SEPARATOR = "/"


def default_rails(nodes: Sequence[Node]) -> Rails:
    """``same`` when the inventory lists NICs, else ``none``."""
    return Rails.SAME if any(n.nics for n in nodes) else Rails.NONE


def endpoint_name(node: str, nic: str) -> str:
    return f"{node}{SEPARATOR}{nic}"


def split_endpoint(name: str) -> tuple[str, str | None]:
    """``"gpu01/eth1"`` -> ("gpu01", "eth1"); a node name -> (name, None)."""
    node, sep, nic = name.partition(SEPARATOR)
    return (node, nic) if sep else (name, None)


def endpoints(node: Node) -> tuple[Node, ...]:
    """One endpoint per NIC of ``node``, in rail order."""
    return tuple(
        replace(
            node,
            name=endpoint_name(node.name, nic.name),
            address=nic.address,
            agent=node.name,
            agent_address=node.address,
            nic=nic,
            nics=(),
        )
        for nic in sorted(node.nics, key=lambda n: n.rail)
    )


def check_nics(nodes: Sequence[Node], rails: Rails) -> None:
    """Probing by NIC needs every node's NICs: a node without them would drop out of the
    plan silently."""
    if rails is Rails.NONE:
        return
    missing = [n.name for n in nodes if not n.nics]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise UsageError(
            "--rails",
            f"--rails {rails.value} probes NIC by NIC and node(s) {shown} list no nics in "
            "the inventory (list them, or use --rails none)",
        )


def build(
    nodes: Sequence[Node], mode: Mode, rails: Rails, sample_k: int = schedule.DEFAULT_SAMPLE_K
) -> schedule.Schedule:
    """The run's schedule: the mode's node pairs, expanded to endpoint pairs per ``rails``."""
    base = schedule.build(nodes, mode, sample_k)
    if rails is Rails.NONE:
        return base
    check_nics(nodes, rails)
    ends: list[Node] = []
    first: list[int] = []  # position of each node's first endpoint in ``ends``
    for n in nodes:
        first.append(len(ends))
        ends.extend(endpoints(n))
    pairs: list[tuple[int, int]] = []
    round_of: list[int] = []
    for r, pos in enumerate(base.rounds_positions()):
        for a, b in pos.tolist():
            for x, y in _nic_pairs(nodes[a], nodes[b], rails):
                pairs.append((first[a] + x, first[b] + y))
                round_of.append(r)
    if rails is Rails.ALL:
        rounds = schedule.pack(pairs, len(ends))
    else:
        rounds = np.array(round_of, dtype=np.int64)
    blocks = [np.array(pairs, dtype=np.int64).reshape(-1, 2)]
    return schedule.from_blocks(ends, mode, blocks, [rounds])


def _nic_pairs(a: Node, b: Node, rails: Rails) -> list[tuple[int, int]]:
    """Index pairs into ``endpoints(a)`` x ``endpoints(b)`` (both in rail order)."""
    ra = [n.rail for n in sorted(a.nics, key=lambda n: n.rail)]
    rb = [n.rail for n in sorted(b.nics, key=lambda n: n.rail)]
    if rails is Rails.ALL:
        return [(i, j) for i in range(len(ra)) for j in range(len(rb))]
    where = {rail: j for j, rail in enumerate(rb)}
    return [(i, where[rail]) for i, rail in enumerate(ra) if rail in where]


def endpoint_nodes(nodes: Sequence[Node], rails: Rails) -> tuple[Node, ...]:
    """What a run's paths are between: the nodes, or every NIC of every node."""
    if rails is Rails.NONE:
        return tuple(nodes)
    return tuple(e for n in nodes for e in endpoints(n))


def shared_rails(a: Node, b: Node) -> tuple[int, ...]:
    """The rails both nodes have a NIC on, in order (``--multirail``)."""
    return tuple(sorted({n.rail for n in a.nics} & {n.rail for n in b.nics}))


def multirail_pairs(nodes: Sequence[Node], count: int) -> list[tuple[Node, Node]]:
    """``--multirail N``: the first ``count`` node pairs (inventory order) that share two
    rails or more."""
    out: list[tuple[Node, Node]] = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            if len(out) >= count:
                return out
            if len(shared_rails(a, b)) >= 2:
                out.append((a, b))
    return out


def multirail_cell(plan: ProbePlan) -> ProbePlan:
    """The one bulk cell ``--multirail`` reads: the plan's largest chunk at its largest
    depth."""
    return replace(
        plan, chunks_bytes=(max(plan.chunks_bytes),), depths=(max(plan.depths),), bulk=True
    )


@dataclass(frozen=True)
class RailPlan:
    """One rail of a plan, for ``--dry-run``: its endpoints and how many pairs use it."""

    rail: int | None  # None: pairs between NICs of different rails (--rails all)
    endpoints: tuple[tuple[str, str], ...]  # (endpoint "NODE/NIC", address)
    pairs: int


def rail_plans(sched: schedule.Schedule) -> tuple[RailPlan, ...]:
    """Per rail of ``sched``'s endpoints: the endpoints and the pairs; () without NICs."""
    ends = sched.nodes
    if not any(e.nic is not None for e in ends):
        return ()
    rail = np.array([-1 if e.nic is None else e.nic.rail for e in ends], dtype=np.int64)
    counts: dict[int | None, int] = {}
    for pos in sched.rounds_positions():
        ra, rb = rail[pos[:, 0]], rail[pos[:, 1]]
        same = ra == rb
        for r, k in zip(*np.unique(ra[same], return_counts=True), strict=True):
            counts[int(r)] = counts.get(int(r), 0) + int(k)
        if (cross := int((~same).sum())) > 0:
            counts[None] = counts.get(None, 0) + cross
    out = []
    for r in sorted({int(x) for x in rail.tolist() if x >= 0}):
        members = tuple((e.name, e.address) for e in ends if e.nic is not None and e.nic.rail == r)
        out.append(RailPlan(r, members, counts.get(r, 0)))
    if None in counts:
        out.append(RailPlan(None, (), counts[None]))
    return tuple(out)


def nics_from_report(report: HostNics, node_address: str) -> tuple[Nic, ...]:
    """The inventory ``nics`` an agent's NIC report suggests (``inventory ...
    --nics-from-agents``): every RDMA port whose netdev has an IP address, rails in device
    order, with its device; without RDMA ports, every interface with an address except the
    loopback and the one carrying the node's own address, rails in interface order. A
    suggestion to review: netqual cannot know which NIC is cabled to which rail."""
    by_name = {i.name: i for i in report.interfaces}

    def address(name: str | None) -> str | None:
        iface = by_name.get(name or "")
        if iface is None:
            return None
        usable = [a for a in iface.addresses if not a.startswith(("fe80:", "127.", "::1"))]
        v4 = [a for a in usable if "." in a]
        return (v4 or usable)[0] if usable else None

    out: list[Nic] = []
    for port in sorted(report.rdma, key=lambda p: (_natural(p.device), p.port)):
        addr = address(port.netdev)
        if addr and port.netdev and all(n.name != port.netdev for n in out):
            out.append(Nic(port.netdev, addr, len(out), port.device))
    if out:
        return tuple(out)
    for iface in sorted(report.interfaces, key=lambda i: _natural(i.name)):
        if iface.name == "lo" or node_address in iface.addresses:
            continue
        if (addr := address(iface.name)) is not None:
            out.append(Nic(iface.name, addr, len(out)))
    return tuple(out)


def _natural(name: str) -> tuple[object, ...]:
    """mlx5_2 before mlx5_10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))
