"""GID selection over a recorded GID table. Pure: no pyverbs, testable anywhere.

InfiniBand addresses the peer by LID; the GID at index 0 is carried along for the record.
RoCE has no LID: the GID *is* the address. We prefer, like perftest, a RoCE v2 GID (routable,
UDP 4791) of the probed address family that is not link-local, and above all the one bound
to the local IP this node uses to reach the peer. Both ends must use the same GID type and
family, else the QP never connects: that is a clear error, not a silent timeout.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from netqual.base.errors import NetqualError

_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_LINK_LOCAL = ipaddress.IPv6Network("fe80::/10")


class GidType(str, enum.Enum):
    IB = "IB"
    ROCE_V1 = "RoCEv1"
    ROCE_V2 = "RoCEv2"


class LinkLayer(str, enum.Enum):
    INFINIBAND = "InfiniBand"
    ETHERNET = "Ethernet"

    @classmethod
    def from_verbs(cls, value: int) -> LinkLayer:
        # ibv_query_port reports 0 (unspecified) on old IB HCAs: that means InfiniBand.
        return cls.ETHERNET if value == 2 else cls.INFINIBAND


class Family(str, enum.Enum):
    IPV4 = "IPv4"
    IPV6 = "IPv6"


class GidSelectionError(NetqualError):
    """No usable GID, an ambiguous choice, or two ends that cannot talk."""


@dataclass(frozen=True)
class GidEntry:
    index: int
    gid: str  # 8 groups of 4 hex digits, as pyverbs prints and accepts it
    gid_type: GidType

    @property
    def address(self) -> ipaddress.IPv6Address:
        return ipaddress.IPv6Address(self.gid)

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        """The IP a RoCE GID stands for (IPv4 for an IPv4-mapped GID)."""
        return self.address.ipv4_mapped or self.address

    @property
    def family(self) -> Family:
        return Family.IPV4 if self.address in _MAPPED else Family.IPV6

    @property
    def link_local(self) -> bool:
        return self.address in _LINK_LOCAL

    @property
    def empty(self) -> bool:
        return int(self.address) == 0


@dataclass(frozen=True)
class GidChoice:
    entry: GidEntry
    reason: str
    bound: bool = False  # the GID carries the local IP used to reach the peer


def gid_text(value: str) -> str:
    """Any IPv6 spelling -> the 8-group form pyverbs' GID() accepts. ValueError if not a GID."""
    return ipaddress.IPv6Address(value).exploded


def gid_type_from_verbs(link_layer: LinkLayer, sysfs_type: int) -> GidType:
    """``Context.query_gid_type`` returns 0 (IB or RoCE v1) or 1 (RoCE v2)."""
    if link_layer is LinkLayer.INFINIBAND:
        return GidType.IB
    return GidType.ROCE_V2 if sysfs_type == 1 else GidType.ROCE_V1


def gid_type_from_table(link_layer: LinkLayer, table_type: int) -> GidType:
    """``Context.query_gid_table`` entries carry ``ibv_gid_type``: 0 IB, 1 RoCE v1, 2 RoCE
    v2 (not the sysfs numbering ``query_gid_type`` returns)."""
    if link_layer is LinkLayer.INFINIBAND:
        return GidType.IB
    return GidType.ROCE_V2 if table_type == 2 else GidType.ROCE_V1


def ip_family(address: str | None) -> Family | None:
    """Family of an IP literal; None for a host name or nothing (IPv4-mapped IPv6 is IPv4)."""
    ip = _parse_ip(address)
    if ip is None:
        return None
    return Family.IPV4 if ip.version == 4 else Family.IPV6


def _parse_ip(address: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _describe(entries: Iterable[GidEntry]) -> str:
    return ", ".join(f"{e.index} ({e.gid_type.value} {e.ip})" for e in entries)


def select_gid(
    table: Sequence[GidEntry],
    link_layer: LinkLayer,
    *,
    local_ip: str | None = None,
    family: Family | None = None,
    want_type: GidType | None = None,
    gid_index: int | None = None,
    where: str = "port",
) -> GidChoice:
    """Pick the source GID. ``family`` defaults to that of ``local_ip``, else IPv4.

    ``want_type`` (the peer's GID type, on the responder) restricts the choice to that
    type. ``gid_index`` (``--gid-index``) wins over everything but must exist.
    """
    usable = [e for e in table if not e.empty]
    if gid_index is not None:
        for entry in usable:
            if entry.index == gid_index:
                return GidChoice(entry, f"--gid-index {gid_index}")
        valid = ", ".join(str(e.index) for e in usable) or "none"
        raise GidSelectionError(
            f"--gid-index {gid_index} is not a populated entry of {where}'s GID table "
            f"(populated: {valid})"
        )
    if link_layer is LinkLayer.INFINIBAND:
        if want_type is not None and want_type is not GidType.IB:
            raise GidSelectionError(
                f"peer uses {want_type.value} but {where} is InfiniBand: the two ends are on "
                "different link layers"
            )
        for entry in usable:
            if entry.index == 0:
                return GidChoice(entry, "InfiniBand: LID addressing, GID index 0")
        raise GidSelectionError(f"{where} is InfiniBand but has no GID at index 0")

    local = _parse_ip(local_ip)
    fam = family or ip_family(local_ip) or Family.IPV4
    candidates = [e for e in usable if e.family is fam and not e.link_local]
    if not candidates:
        raise GidSelectionError(
            f"{where} has no RoCE GID for an {fam.value} address "
            f"(GIDs: {_describe(usable) or 'none'}); give the port's netdev an IP address "
            "of that family, or pass --gid-index"
        )
    if want_type is not None:
        typed = [e for e in candidates if e.gid_type is want_type]
        if not typed:
            raise GidSelectionError(
                f"peer uses {want_type.value} but {where} has no {want_type.value} GID for "
                f"{fam.value} (has: {_describe(candidates)}); both ends must use the same RoCE "
                "version: pass --gid-index on one side"
            )
        candidates = typed
    best_type = (
        GidType.ROCE_V2
        if any(e.gid_type is GidType.ROCE_V2 for e in candidates)
        else GidType.ROCE_V1
    )
    best = [e for e in candidates if e.gid_type is best_type]
    if local is not None:
        bound = [e for e in best if e.ip == local]
        if len(bound) == 1:
            return GidChoice(bound[0], f"{best_type.value} GID bound to {local}", bound=True)
    if len(best) == 1:
        note = "" if local is None else f" (none bound to {local})"
        return GidChoice(best[0], f"only {best_type.value} {fam.value} GID{note}")
    raise GidSelectionError(
        f"{where} has several {best_type.value} {fam.value} GIDs and none is bound to "
        f"{local or 'the probed address'}: {_describe(best)}; pass --gid-index"
    )


def check_peer(
    own: GidEntry, own_link: LinkLayer, peer_gid: str, peer_type: GidType, peer_link: LinkLayer
) -> None:
    """Raise GidSelectionError when the two ends cannot form a connection."""
    if own_link is not peer_link:
        raise GidSelectionError(
            f"link layer mismatch: this end is {own_link.value}, the peer {peer_link.value}"
        )
    if own.gid_type is not peer_type:
        raise GidSelectionError(
            f"GID type mismatch: this end uses {own.gid_type.value} (index {own.index}), the "
            f"peer {peer_type.value}; both ends must use the same type (--gid-index)"
        )
    if own_link is LinkLayer.ETHERNET:
        peer = GidEntry(-1, peer_gid, peer_type)
        if peer.family is not own.family:
            raise GidSelectionError(
                f"GID family mismatch: this end uses {own.family.value} ({own.ip}), the peer "
                f"{peer.family.value} ({peer.ip})"
            )
