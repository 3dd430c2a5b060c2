"""GID, device and port selection over recorded GID tables (no hardware needed)."""

from __future__ import annotations

import pytest
from rdma_fakeverbs import Fabric, module

from netqual.transports.rdma import RdmaOptions, devices
from netqual.transports.rdma.devices import DeviceInfo, PortInfo, choose
from netqual.transports.rdma.gid import (
    Family,
    GidEntry,
    GidSelectionError,
    GidType,
    LinkLayer,
    check_peer,
    gid_text,
    gid_type_from_verbs,
    ip_family,
    select_gid,
)

V1, V2, IB = GidType.ROCE_V1, GidType.ROCE_V2, GidType.IB
ETH = LinkLayer.ETHERNET


def g(index: int, ip: str, kind: GidType) -> GidEntry:
    """A table entry as the kernel fills it: IPv4 addresses appear IPv4-mapped."""
    text = ip if ":" in ip else f"::ffff:{ip}"
    return GidEntry(index, gid_text(text), kind)


# A mlx5 RoCE port with 10.0.1.11 and a global IPv6 address: v1 and v2 entry for each.
ROCE_DUAL = (
    g(0, "fe80::ba59:9fff:fe12:3456", V1),
    g(1, "fe80::ba59:9fff:fe12:3456", V2),
    g(2, "10.0.1.11", V1),
    g(3, "10.0.1.11", V2),
    g(4, "2001:db8::11", V1),
    g(5, "2001:db8::11", V2),
)
IB_PORT = (GidEntry(0, gid_text("fe80::2:c903:a:b"), IB),)


def test_gid_text_is_the_eight_group_form_pyverbs_accepts() -> None:
    assert gid_text("::ffff:10.0.1.11") == "0000:0000:0000:0000:0000:ffff:0a00:010b"
    with pytest.raises(ValueError):
        gid_text("not-a-gid")


def test_entry_properties() -> None:
    assert ROCE_DUAL[3].family is Family.IPV4 and str(ROCE_DUAL[3].ip) == "10.0.1.11"
    assert ROCE_DUAL[1].link_local and not ROCE_DUAL[5].link_local
    assert ROCE_DUAL[5].family is Family.IPV6


def test_verbs_gid_type_mapping() -> None:
    assert gid_type_from_verbs(LinkLayer.INFINIBAND, 0) is IB
    assert gid_type_from_verbs(ETH, 0) is V1
    assert gid_type_from_verbs(ETH, 1) is V2
    assert LinkLayer.from_verbs(0) is LinkLayer.INFINIBAND  # old HCAs report "unspecified"


def test_ip_family_handles_mapped_scoped_and_names() -> None:
    assert ip_family("10.0.0.1") is Family.IPV4
    assert ip_family("::ffff:10.0.0.1") is Family.IPV4
    assert ip_family("fe80::1%eth0") is Family.IPV6
    assert ip_family("[2001:db8::1]") is Family.IPV6
    assert ip_family("gpu01.example") is None


@pytest.mark.parametrize(
    ("local_ip", "family", "index"),
    [
        ("10.0.1.11", None, 3),  # v2 bound to the IPv4 address
        ("::ffff:10.0.1.11", None, 3),  # same address as an IPv6 socket reports it
        ("2001:db8::11", None, 5),  # IPv6 probe: the global v2 GID, never the link-local
        (None, Family.IPV4, 3),  # one v2 IPv4 GID: unambiguous without the address
        ("10.9.9.9", None, 3),  # control traffic on another network: still only one v2 IPv4
    ],
)
def test_roce_prefers_v2_of_the_probed_family(
    local_ip: str | None, family: Family | None, index: int
) -> None:
    choice = select_gid(ROCE_DUAL, ETH, local_ip=local_ip, family=family)
    assert choice.entry.index == index
    assert choice.entry.gid_type is V2


def test_v1_only_port_uses_v1() -> None:
    table = (g(0, "fe80::1", V1), g(1, "10.0.1.11", V1))
    choice = select_gid(table, ETH, local_ip="10.0.1.11")
    assert (choice.entry.index, choice.entry.gid_type) == (1, V1)


def test_several_v2_addresses_pick_the_bound_one_or_refuse() -> None:
    table = (*ROCE_DUAL, g(6, "10.0.2.11", V1), g(7, "10.0.2.11", V2))
    assert select_gid(table, ETH, local_ip="10.0.2.11").entry.index == 7
    assert select_gid(table, ETH, local_ip="10.0.2.11").bound
    with pytest.raises(GidSelectionError, match=r"several RoCEv2 IPv4 GIDs.*3 .*7 .*--gid-index"):
        select_gid(table, ETH, local_ip="192.168.0.5")


def test_link_local_only_port_is_an_error_for_ipv6() -> None:
    table = (g(0, "fe80::1", V1), g(1, "fe80::1", V2))
    with pytest.raises(GidSelectionError, match=r"no RoCE GID for an IPv6 address"):
        select_gid(table, ETH, local_ip="2001:db8::11")
    with pytest.raises(GidSelectionError, match=r"no RoCE GID for an IPv4 address"):
        select_gid(table, ETH, local_ip="10.0.1.11")


def test_explicit_gid_index_wins_but_must_exist() -> None:
    assert select_gid(ROCE_DUAL, ETH, local_ip="10.0.1.11", gid_index=2).entry.gid_type is V1
    with pytest.raises(GidSelectionError, match=r"--gid-index 9 .*populated: 0, 1, 2, 3, 4, 5"):
        select_gid(ROCE_DUAL, ETH, gid_index=9)


def test_responder_follows_the_initiators_gid_type() -> None:
    choice = select_gid(ROCE_DUAL, ETH, local_ip="10.0.1.11", want_type=V1)
    assert (choice.entry.index, choice.entry.gid_type) == (2, V1)
    v2_only = (g(0, "10.0.1.12", V2),)
    with pytest.raises(GidSelectionError, match=r"peer uses RoCEv1 .* same RoCE version"):
        select_gid(v2_only, ETH, local_ip="10.0.1.12", want_type=V1)


def test_infiniband_uses_index_zero_and_refuses_roce_peers() -> None:
    choice = select_gid(IB_PORT, LinkLayer.INFINIBAND, local_ip="10.0.1.11")
    assert choice.entry.index == 0 and choice.entry.gid_type is IB
    with pytest.raises(GidSelectionError, match=r"different link layers"):
        select_gid(IB_PORT, LinkLayer.INFINIBAND, want_type=V2)


def test_check_peer_mismatches_are_clear() -> None:
    own = ROCE_DUAL[3]
    check_peer(own, ETH, gid_text("::ffff:10.0.1.12"), V2, ETH)  # compatible: no error
    with pytest.raises(GidSelectionError, match=r"GID type mismatch: this end uses RoCEv2"):
        check_peer(own, ETH, gid_text("::ffff:10.0.1.12"), V1, ETH)
    with pytest.raises(GidSelectionError, match=r"GID family mismatch"):
        check_peer(own, ETH, gid_text("2001:db8::12"), V2, ETH)
    with pytest.raises(GidSelectionError, match=r"link layer mismatch"):
        check_peer(IB_PORT[0], LinkLayer.INFINIBAND, own.gid, V2, ETH)


def _port(num: int, gids: tuple[GidEntry, ...], state: int = 4, link: LinkLayer = ETH) -> PortInfo:
    return PortInfo(num=num, state=state, link_layer=link, active_mtu=5, lid=0, gids=gids)


def test_choose_port_automatic_only_when_unambiguous() -> None:
    other = (g(0, "10.0.2.11", V1), g(1, "10.0.2.11", V2))
    devs = (
        DeviceInfo("mlx5_0", (_port(1, ROCE_DUAL),)),
        DeviceInfo("mlx5_1", (_port(1, other), _port(2, other, state=1))),
    )
    assert choose(devs, RdmaOptions(), local_ip="10.0.2.11").where == "mlx5_1 port 1"
    assert choose(devs, RdmaOptions(), local_ip="10.0.1.11").gid.entry.index == 3
    with pytest.raises(GidSelectionError, match=r"several usable RDMA ports .*--rdma-device"):
        choose(devs, RdmaOptions(), local_ip="192.168.1.1")
    assert choose(devs, RdmaOptions(device="mlx5_0"), local_ip=None).device.name == "mlx5_0"
    with pytest.raises(GidSelectionError, match=r"mlx5_1 port 2 is DOWN"):
        choose(devs, RdmaOptions(device="mlx5_1", port=2), local_ip=None)
    with pytest.raises(GidSelectionError, match=r"--rdma-device mlx5_9: no such device"):
        choose(devs, RdmaOptions(device="mlx5_9"), local_ip=None)


@pytest.mark.parametrize("one_call", [True, False], ids=["query_gid_table", "slot-by-slot"])
def test_scan_keeps_the_populated_slots_of_a_mostly_empty_table(one_call: bool) -> None:
    """As rxe's 1,024-slot table: empty slots (any spelling of zero) and unreadable ones
    are skipped; a populated slot keeps its index, 8-group text and type. The same from
    pyverbs' one-call table as from the walk older pyverbs needs."""
    zero = "0000:0000:0000:0000:0000:0000:0000:0000"
    fabric = Fabric(
        gids=[
            (zero, 0),
            ("fe80:0000:0000:0000:0000:0000:0000:0001", 1),
            ("::", 1),
            ("not a gid", 1),
            (zero, 1),
            ("0000:0000:0000:0000:0000:ffff:c612:0001", 1),
        ]
    )
    fabric.gid_table = one_call
    (dev,) = devices.scan(module(fabric))
    (port,) = dev.ports
    assert [(g.index, g.gid, g.gid_type) for g in port.gids] == [
        (1, "fe80:0000:0000:0000:0000:0000:0000:0001", GidType.ROCE_V2),
        (5, "0000:0000:0000:0000:0000:ffff:c612:0001", GidType.ROCE_V2),
    ]


@pytest.mark.parametrize("one_call", [True, False], ids=["query_gid_table", "slot-by-slot"])
def test_scan_types_infiniband_and_roce_v1_gids(one_call: bool) -> None:
    gids = [
        ("fe80:0000:0000:0000:0000:0000:0000:0001", 0),
        ("fe80:0000:0000:0000:0000:0000:0000:0002", 1),
    ]
    roce, ib = Fabric(gids=gids), Fabric(link_layer=1, gids=gids)
    types = []
    for fabric in (roce, ib):
        fabric.gid_table = one_call
        (dev,) = devices.scan(module(fabric))
        types.append([g.gid_type for g in dev.ports[0].gids])
    assert types == [[GidType.ROCE_V1, GidType.ROCE_V2], [GidType.IB, GidType.IB]]
