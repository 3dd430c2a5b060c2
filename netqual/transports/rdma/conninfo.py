"""What two RC QPs must know of each other, and its JSON form on the control channel.

One memory region per end, laid out ``[receive area | send area | bulk area]``: the peer
RDMA-WRITEs pings into the receive area and RDMA-READs chunks from the bulk area. A fetch
profile with several QPs per endpoint (Mooncake: 2) adds ``more_qps``, the further QPs'
numbers and PSNs, paired in order with the peer's; the first QP carries the ping-pong.
Addresses and keys travel as hex strings (a JSON number is not safe above 2^53).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from netqual.base.errors import BadRequestError
from netqual.base.fields import FieldReader, is_integer
from netqual.transports.rdma.gid import GidType, LinkLayer, gid_text

_U24 = (1 << 24) - 1
_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
MAX_QPS = 16  # QPs per endpoint a session may ask for (the profiles use at most 2)


class ConnInfoError(BadRequestError):
    """A peer's connection info is missing a field or has a bad value."""

    def __init__(self, peer: str, field: str, problem: str) -> None:
        super().__init__(peer, field, problem)
        self.problem = f"bad rdma connection info: field {field!r}: {problem}"
        self.args = (f"{peer}: {self.problem}",)

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class ConnInfo:
    qpn: int
    psn: int
    lid: int
    gid: str  # 8-group form; all zero is allowed on InfiniBand
    gid_index: int
    gid_type: GidType
    link_layer: LinkLayer
    mtu: int  # ibv_mtu enum, 1..5 = 256..4096 bytes
    rkey: int
    addr: int  # start of the memory region
    length: int  # bytes of the memory region
    recv_offset: int  # where the peer writes ping-pong messages
    bulk_offset: int  # where the peer reads bulk chunks
    bulk_bytes: int
    max_rd_atomic: int  # RDMA READs this end can have outstanding (max_qp_init_rd_atom)
    max_dest_rd_atomic: int  # RDMA READs this end serves at once (max_qp_rd_atom)
    more_qps: tuple[tuple[int, int], ...] = ()  # (qpn, psn) of QPs beyond the first

    def to_json(self) -> dict[str, Any]:
        more = {"more_qps": [list(q) for q in self.more_qps]} if self.more_qps else {}
        return {
            **more,
            "qpn": self.qpn,
            "psn": self.psn,
            "lid": self.lid,
            "gid": self.gid,
            "gid_index": self.gid_index,
            "gid_type": self.gid_type.value,
            "link_layer": self.link_layer.value,
            "mtu": self.mtu,
            "rkey": f"{self.rkey:#x}",
            "addr": f"{self.addr:#x}",
            "length": self.length,
            "recv_offset": self.recv_offset,
            "bulk_offset": self.bulk_offset,
            "bulk_bytes": self.bulk_bytes,
            "max_rd_atomic": self.max_rd_atomic,
            "max_dest_rd_atomic": self.max_dest_rd_atomic,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], peer: str = "peer") -> ConnInfo:
        """Validate every field; the error names the first bad one."""
        if not isinstance(obj, Mapping):
            raise ConnInfoError(peer, "conninfo", "expected an object")
        r = _Reader(obj, peer)
        info = cls(
            qpn=r.integer("qpn", 1, _U24),
            psn=r.integer("psn", 0, _U24),
            lid=r.integer("lid", 0, 0xFFFF),
            gid=r.text("gid", gid_text, "a GID such as fe80:0000:...:0001"),
            gid_index=r.integer("gid_index", 0, 0xFFFF),
            gid_type=r.text("gid_type", GidType, "IB, RoCEv1 or RoCEv2"),
            link_layer=r.text("link_layer", LinkLayer, "InfiniBand or Ethernet"),
            mtu=r.integer("mtu", 1, 5),
            rkey=r.hexint("rkey", _U32),
            addr=r.hexint("addr", _U64),
            length=r.integer("length", 1, _U64),
            recv_offset=r.integer("recv_offset", 0, _U64),
            bulk_offset=r.integer("bulk_offset", 0, _U64),
            bulk_bytes=r.integer("bulk_bytes", 0, _U64),
            max_rd_atomic=r.integer("max_rd_atomic", 1, 255),
            max_dest_rd_atomic=r.integer("max_dest_rd_atomic", 1, 255),
            more_qps=r.qp_list("more_qps"),
        )
        if info.bulk_offset + info.bulk_bytes > info.length:
            raise ConnInfoError(peer, "bulk_bytes", "bulk area runs past the end of the region")
        if info.recv_offset >= info.length:
            raise ConnInfoError(peer, "recv_offset", "past the end of the region")
        if info.link_layer is LinkLayer.INFINIBAND and info.lid == 0:
            raise ConnInfoError(
                peer, "lid", "InfiniBand needs a LID (is a subnet manager running?)"
            )
        if info.link_layer is LinkLayer.ETHERNET and int(info.gid.replace(":", ""), 16) == 0:
            raise ConnInfoError(peer, "gid", "RoCE needs a non-zero GID")
        return info


class _Reader(FieldReader[ConnInfoError]):
    def __init__(self, obj: Mapping[str, Any], peer: str) -> None:
        super().__init__(obj, "")
        self.peer = peer

    def error(self, field: str, problem: str) -> ConnInfoError:
        return ConnInfoError(self.peer, field, problem)

    def integer(self, name: str, low: int, high: int) -> int:
        value = self.value(name)
        if not is_integer(value):
            raise self.fail(name, f"expected an integer, got {value!r}")
        if not low <= value <= high:
            raise self.fail(name, f"{value} is outside {low}..{high}")
        return value

    def qp_list(self, name: str) -> tuple[tuple[int, int], ...]:
        """Optional ``[[qpn, psn], ...]``: absent from an end with one QP (older agents)."""
        value = self.data.get(name, [])
        if not isinstance(value, list) or len(value) >= MAX_QPS:
            raise self.fail(name, f"expected a list of at most {MAX_QPS - 1}")
        out = []
        for item in value:
            if not (
                isinstance(item, list)
                and len(item) == 2
                and all(type(v) is int for v in item)
                and 1 <= item[0] <= _U24
                and 0 <= item[1] <= _U24
            ):
                raise self.fail(name, f"expected [qpn, psn], got {item!r}")
            out.append((item[0], item[1]))
        return tuple(out)

    def hexint(self, name: str, high: int) -> int:
        value = self.value(name)
        try:
            number = int(value, 16) if isinstance(value, str) else None
        except ValueError:
            number = None
        if number is None or not 0 <= number <= high:
            raise self.fail(name, f"expected a hex string such as '0x1a2b', got {value!r}")
        return number

    def text(self, name: str, convert: Callable[[str], Any], expected: str) -> Any:
        value = self.value(name)
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            return convert(value)
        except ValueError:
            raise self.fail(name, f"expected {expected}, got {value!r}") from None
