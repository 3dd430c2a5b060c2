"""The report's "Host path" section (results ``hosts``, docs/rails.md): every node's findings
first, then per node its GPUs (best NIC, rail NIC), the GPU x NIC affinity matrix as
``nvidia-smi topo -m`` prints it, and its NICs (link, ACS, relaxed ordering). The
findings are ``netqual.analysis.hostpath.findings``, the same the gate rules judge.
Autoescaped by the template (every name came from an agent, checked by ``hostpeer`` on the
way in)."""

from __future__ import annotations

from dataclasses import dataclass

from netqual.analysis.hostpath import GATED, HostFinding, all_findings, explain_classes
from netqual.model.hostpath import (
    NEAR_CLASSES,
    UNKNOWN,
    HostAudit,
    HostDevice,
    PcieLink,
    gpu_rail_table,
)
from netqual.model.node import Nic, node_nics
from netqual.table.run import Results


@dataclass(frozen=True)
class NodeHosts:
    node: str
    error: str | None
    summary: str  # "8 GPUs, 8 NICs, IOMMU passthrough"
    gpus: tuple[tuple[str, ...], ...]  # name, bdf, NUMA, link, best NIC, rail NIC
    nic_names: tuple[str, ...]
    matrix: tuple[tuple[str, tuple[tuple[str, bool], ...]], ...]  # GPU, (class, near) per NIC
    nics: tuple[tuple[str, ...], ...]  # name, bdf, NUMA, link, netdevs, ACS, relaxed ordering


@dataclass(frozen=True)
class HostsView:
    findings: tuple[HostFinding, ...]
    nodes: tuple[NodeHosts, ...]
    checked: str = ""  # what "no findings" rests on: what was judged, what could not be

    @property
    def headline(self) -> str | None:
        """First-screen alert: the first finding a gate rule judges, and how many."""
        gated = [f for f in self.findings if f.rule in GATED]
        if not gated:
            return None
        f, more = gated[0], len(gated) - 1
        rest = f" (+{more} more: see Host path)" if more else ""
        text = f"Host path: {f.node} {f.subject}: {f.text} ({f.rule}){rest}"
        words = explain_classes(f.text)
        return f"{text}. {words}" if words else text


def _numa(d: HostDevice) -> str:
    return UNKNOWN if d.numa_node is None else str(d.numa_node)


def _flag(value: bool | None) -> str:
    return UNKNOWN if value is None else "on" if value else "off"


def _node(audit: HostAudit, nics: tuple[Nic, ...]) -> NodeHosts:
    rails = {r.gpu: r for r in gpu_rail_table(audit, nics)}
    gpus = []
    for g in audit.gpus:
        r = rails[g.name]
        best = f"{r.best_nic} {r.best_cls}" if r.best_nic else "none"
        rail = f"{r.rail_nic or 'not on host'} {r.rail_cls}" if r.rail_listed else "-"
        gpus.append((g.name, g.bdf, _numa(g), g.link.text(), best, rail))
    matrix = tuple(
        (
            g.name,
            tuple((c := audit.cls(g.name, n.name), c in NEAR_CLASSES) for n in audit.nics),
        )
        for g in audit.gpus
    )
    nic_rows = []
    for n in audit.nics:
        redirect = [b.bdf for b in n.upstream if b.acs_redirect]
        unknown = any(b.acs_redirect is None for b in n.upstream)
        acs = ", ".join(redirect) if redirect else UNKNOWN if unknown else "none"
        nic_rows.append(
            (n.name, n.bdf, _numa(n), n.link.text(), ", ".join(n.netdevs) or "-", acs,
             _flag(n.relaxed_ordering))
        )  # fmt: skip
    summary = f"{len(audit.gpus)} GPUs, {len(audit.nics)} NICs, IOMMU {audit.iommu.mode}"
    return NodeHosts(
        audit.node,
        audit.error,
        summary,
        tuple(gpus),
        tuple(n.name for n in audit.nics),
        matrix,
        tuple(nic_rows),
    )


def hosts_view(results: Results) -> HostsView | None:
    if not results.hosts:
        return None
    nics = node_nics(results.nodes)  # with rails the nodes are endpoints (docs/rails.md)
    nodes = tuple(_node(audit, nics.get(audit.node, ())) for audit in results.hosts)
    return HostsView(tuple(all_findings(results.hosts, nics)), nodes, _checked(results.hosts))


def _checked(audits: tuple[HostAudit, ...]) -> str:
    """What "no findings" means for these audits, claiming nothing that was not judged: no
    affinity without GPUs, no link speed where sysfs gave no PCIe link (a virtual NIC)."""
    ok = [a for a in audits if a.error is None]
    gpus = sum(len(a.gpus) for a in ok)
    devices = [d for a in ok for d in (*a.gpus, *a.nics)]
    judged = sum(d.link.full is not None for d in devices)
    no_link = sum(d.link == PcieLink() for d in devices)
    parts = []
    if gpus:
        parts.append(f"every GPU ({gpus:,}) has a PIX or PXB NIC on its rail")
    else:
        parts.append("no GPU found, so no GPU-NIC affinity to judge")
    if judged:
        parts.append(f"every PCIe link read ({judged:,}) runs at its maximum")
    if no_link:
        parts.append(
            f"{no_link:,} device(s) report no PCIe link (a virtual NIC, e.g. virtio): "
            "link speed not judged"
        )
    return "; ".join(parts)
