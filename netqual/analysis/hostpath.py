"""Host path findings: the rules that judge a node's host path audit (GPU-NIC affinity,
PCIe links at their maximum, ACS, relaxed ordering, IOMMU). The records they judge are
``netqual.model.hostpath``; the gate rules (``netqual.gate.hostpath``), the doctor, the
report and the terminal all read the same findings from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from netqual.model.hostpath import (
    AFFINITY_CLASSES,
    NEAR_CLASSES,
    HostAudit,
    PcieLink,
    gpu_rail_table,
)
from netqual.model.node import Nic


@dataclass(frozen=True)
class HostFinding:
    """``rule``: ``nic_affinity`` / ``pcie_link_full`` (gate rules), or ``rail_not_best``,
    ``acs_redirect``, ``iommu_translated`` (shown, not gated). ``subject``: a GPU or NIC."""

    node: str
    rule: str
    subject: str
    text: str


def affinity_findings(audit: HostAudit, nics: Sequence[Nic] = ()) -> list[HostFinding]:
    """A GPU without a PIX/PXB NIC on its rail (any NIC, when the inventory lists none)."""
    out = []
    for r in gpu_rail_table(audit, nics):
        where = f"best {r.best_nic} {r.best_cls}" if r.best_nic else "no NIC found"
        if r.rail_listed and r.rail_nic is None:
            text = f"its rail's NIC is not on this host ({where})"
        elif r.rail_listed and r.rail_cls not in NEAR_CLASSES:
            text = f"its rail NIC {r.rail_nic} is {r.rail_cls} ({where})"
        elif not r.rail_listed and r.best_cls not in NEAR_CLASSES:
            text = f"no NIC below a PCIe switch it shares ({where})"
        else:
            if r.rail_is_best is False:
                text = f"its rail NIC {r.rail_nic} is {r.rail_cls}; {r.best_nic} is {r.best_cls}"
                out.append(HostFinding(audit.node, "rail_not_best", r.gpu, text))
            continue
        out.append(HostFinding(audit.node, "nic_affinity", r.gpu, text))
    return out


def link_findings(audit: HostAudit) -> list[HostFinding]:
    """A GPU or NIC below its maximum PCIe speed or width, or whose link sysfs did not give."""
    out = []
    for d in (*audit.gpus, *audit.nics):
        if d.link == PcieLink():
            continue  # no PCIe link attributes at all (a virtio NIC): nothing to judge
        if d.link.full is not True:
            state = "link unknown" if d.link.full is None else "trained below its maximum"
            text = f"{d.bdf}: {state}: {d.link.text()}"
            out.append(HostFinding(audit.node, "pcie_link_full", d.name, text))
    return out


def other_findings(audit: HostAudit) -> list[HostFinding]:
    out = []
    for nic in audit.nics:
        redirect = [b.bdf for b in nic.upstream if b.acs_redirect]
        if redirect and audit.gpus:
            text = (
                f"ACS P2P redirect on {', '.join(redirect)}: GPU-NIC traffic goes up to the "
                "root complex instead of across the switch"
            )
            out.append(HostFinding(audit.node, "acs_redirect", nic.name, text))
    if audit.iommu.mode == "translated" and audit.gpus and audit.nics:
        text = "IOMMU translates DMA (not passthrough): GPUDirect RDMA may be slower or fail"
        out.append(HostFinding(audit.node, "iommu_translated", "host", text))
    return out


def findings(audit: HostAudit, nics: Sequence[Nic] = ()) -> list[HostFinding]:
    return affinity_findings(audit, nics) + link_findings(audit) + other_findings(audit)


GATED = ("nic_affinity", "pcie_link_full")  # the findings a gate rule judges

# What each of nvidia-smi topo -m's classes means, in words, for a first screen that names one
CLASS_WORDS = {
    "PIX": "GPU and NIC below one PCIe switch",
    "PXB": "GPU and NIC below linked PCIe switches",
    "PHB": "GPU to NIC through the CPU's host bridge",
    "NODE": "GPU to NIC across root complexes of one CPU",
    "SYS": "GPU to NIC across CPU sockets",
}


_CLASS_RE = re.compile(rf"\b(?:{'|'.join(AFFINITY_CLASSES)})\b")


def explain_classes(text: str) -> str:
    """'SYS: GPU to NIC across CPU sockets; PIX: GPU and NIC below one PCIe switch' for the classes
    ``text`` names (in the order it names them), '' when it names none: the short
    explanation a first screen gives where it first says "PIX" or "SYS"."""
    named: list[str] = []
    for m in _CLASS_RE.finditer(text):
        if m.group(0) not in named:
            named.append(m.group(0))
    return "; ".join(f"{c}: {CLASS_WORDS[c]}" for c in named)


def all_findings(
    hosts: Iterable[HostAudit], nics: Mapping[str, Sequence[Nic]]
) -> list[HostFinding]:
    """Every node's findings (``nics``: node -> its inventory NICs), those a gate rule
    judges first; a node without an audit (``error``) is one ``nic_affinity`` finding."""
    found: list[HostFinding] = []
    for audit in hosts:
        if audit.error is not None:
            found.append(
                HostFinding(audit.node, "nic_affinity", "host", f"no audit: {audit.error}")
            )
        else:
            found += findings(audit, nics.get(audit.node, ()))
    found.sort(key=lambda f: f.rule not in GATED)
    return found
