"""The terminal's host path line (results ``hosts``, docs/rails.md): the audited GPUs and
NICs and, when there are any, the first findings a gate rule judges. Every name came from
an agent (checked by ``hostpeer``); the line goes out as a ``Text``, never as markup."""

from __future__ import annotations

from rich.text import Text

from netqual.analysis.hostpath import GATED, all_findings, explain_classes
from netqual.base.names import visible
from netqual.table.run import Results

SHOWN = 2


def hosts_line(results: Results) -> Text | None:
    """'host path: 16 GPUs, 16 NICs on 2 nodes, no findings', or the first findings."""
    if not results.hosts:
        return None
    nics = {n.name: tuple(n.nics) for n in results.nodes}
    found = [f for f in all_findings(results.hosts, nics) if f.rule in GATED]
    gpus = sum(len(h.gpus) for h in results.hosts)
    nic_count = sum(len(h.nics) for h in results.hosts)
    seen = f"{gpus} GPUs, {nic_count} NICs on {len(results.hosts)} nodes"
    if not found:
        return Text(f"host path: {seen}, no findings", style="dim")
    first = "; ".join(f"{f.node} {f.subject}: {f.text} ({f.rule})" for f in found[:SHOWN])
    more = len(found) - SHOWN
    rest = f" (+{more} more: netqual report --html)" if more > 0 else ""
    word = "finding" if len(found) == 1 else "findings"
    words = explain_classes(first)
    line = f"host path: {len(found)} {word}: {first}{rest}" + (f". {words}" if words else "")
    return Text(visible(line), style="bold red")
