"""What UCX says it used: the ``UCX_PROTO_INFO=y`` tables (docs/engines.md).

UCX prints, the first time an endpoint configuration runs an operation, a table through
its log (``UCX_LOG_FILE``)::

    [1796459162.357347] [vm:9992 :0]   | nq-initiator-10524 inter-node cfg#1                      |
    [1796459162.357347] [vm:9992 :0]   | remote memory read by ucp_get*(multi) into host memory   |
    [1796459162.357347] [vm:9992 :0]   | 0..inf | software emulation | tcp/nqe-b0                 |
    [1796459162.357347] [vm:9992 :0]   | remote memory write by ucp_put* from host memory to host |
    [1796459162.357347] [vm:9992 :0]   | 0..inf | zero-copy | 50% on tcp/nqe-b0 and 50% on tcp/n...

A header row names the context, its scope (``inter-node``, ``intra-node`` or ``self``) and
the configuration; the next single-cell row names the operation; rows of three cells are
(message size range, protocol, lanes). ``self`` tables are NIXL's loopback endpoint, not
the peer, and are skipped. Pure text in, records out: unit-tested on the literal lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from netqual.model.engine import EngineOp, EngineTransport

_PREFIX = re.compile(r"^\[[^\]]*\]\s*\[[^\]]*\]\s*")
_HEADER = re.compile(
    r"^\|\s*(?P<ctx>\S+)\s+(?P<scope>intra-node|inter-node|self)\s+cfg#(?P<cfg>\d+)\s*\|$"
)
LANE = re.compile(r"\b([a-z][a-z0-9_]*)/([A-Za-z0-9_.:\-]+)")
# UCX transport names by what they are (ucx_info -d): verbs transports are RDMA, the shared
# memory ones (and CMA/KNEM/XPMEM single-copy) never leave the host.
_RDMA = re.compile(r"^(rc|ud|dc|srd)(_|$)|^(rc_verbs|rc_mlx5|ud_verbs|ud_mlx5|dc_mlx5|gga)")
_SHM = frozenset({"cma", "knem", "xpmem", "posix", "sysv", "sm", "self"})


@dataclass(frozen=True)
class ProtoRow:
    scope: str  # inter-node | intra-node
    op: str  # UCX's words: "remote memory read by ucp_get*(multi) into host memory ..."
    size_range: str  # "0..inf", "8185..65528"
    protocol: str  # "zero-copy", "software emulation", ...
    lanes: str  # "tcp/eth1", "50% on tcp/eth0 and 50% on tcp/eth1"

    @property
    def engine_op(self) -> EngineOp | None:
        """The RMA operation NIXL issues for this row: READ is ucp_get, WRITE ucp_put."""
        if "read by ucp_get" in self.op:
            return EngineOp.READ
        if "write by ucp_put" in self.op:
            return EngineOp.WRITE
        return None

    def text(self) -> str:
        return f"{self.scope} | {self.size_range} | {self.protocol} | {self.lanes}"


def parse(text: str) -> tuple[ProtoRow, ...]:
    """Every row of every non-``self`` table in ``text`` (a UCX log)."""
    rows: list[ProtoRow] = []
    scope: str | None = None
    op: str | None = None
    want_op = False
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line.startswith("|"):
            continue
        if (m := _HEADER.match(line)) is not None:
            scope, op, want_op = m.group("scope"), None, True
            continue
        if scope is None:
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if want_op and len(cells) == 1:
            op, want_op = cells[0], False
            continue
        if len(cells) == 3 and ".." in cells[0] and scope != "self" and op is not None:
            rows.append(ProtoRow(scope, op, cells[0], cells[1], cells[2]))
    return tuple(rows)


def rows_for(rows: Iterable[ProtoRow], op: EngineOp) -> tuple[ProtoRow, ...]:
    return tuple(r for r in rows if r.engine_op is op)


def lanes(rows: Iterable[ProtoRow]) -> tuple[tuple[str, str], ...]:
    """Every (transport, device) the rows name, in order, once each."""
    found: dict[tuple[str, str], None] = {}
    for r in rows:
        for m in LANE.finditer(r.lanes):
            found[(m.group(1), m.group(2))] = None
    return tuple(found)


def classify(transport: str) -> EngineTransport:
    """A UCX transport name as the wire it is: ``tcp``, RDMA verbs, or a memory copy."""
    if transport == "tcp":
        return EngineTransport.TCP
    if _RDMA.match(transport):
        return EngineTransport.RDMA
    if transport in _SHM:
        return EngineTransport.SHM
    return EngineTransport.UNKNOWN
