"""The relay's timing rules without TUN devices: when each packet is due on each link."""

from __future__ import annotations

import struct

from netqual.lab.relay import (
    QUEUE_LIMIT,
    TRANSIT_LIMIT,
    TRANSIT_WINDOW_NS,
    VNET_BYTES,
    LinkDirection,
    Transit,
    segments,
    transit_key,
)

US = 1_000


def ipv4(payload: bytes, ttl: int = 64, gso_size: int = 0) -> bytes:
    """A packet as the relay reads it from a TUN device: a ``virtio_net_hdr`` (a TCP GSO
    packet of ``gso_size``-byte segments, or 0: one packet), an IPv4 header (checksum
    left to the caller's ``ttl``) and ``payload``."""
    vnet = struct.pack("<BBHHHH", 1, 1 if gso_size else 0, 0, gso_size, 0, 0)
    header = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 7, 0x4000, ttl, 6, ttl * 3,
        bytes([198, 18, 1, 10]), bytes([198, 18, 2, 10]),
    )  # fmt: skip
    assert len(vnet) == VNET_BYTES
    return vnet + header + payload


def tcp(payload_bytes: int, gso_size: int = 0) -> bytes:
    """A TCP segment with a 32-byte header (timestamps) and ``payload_bytes``."""
    header = struct.pack("!HHIIBBHHH", 40000, 18515, 1, 1, 8 << 4, 0x10, 512, 0, 0)
    return ipv4(header + bytes(12) + bytes(payload_bytes), gso_size=gso_size)


def test_a_router_changes_only_ttl_and_checksum_so_the_key_survives_forwarding() -> None:
    assert transit_key(ipv4(b"x" * 40, ttl=64)) == transit_key(ipv4(b"x" * 40, ttl=63))
    assert transit_key(ipv4(b"x" * 40)) != transit_key(ipv4(b"y" * 40))
    assert transit_key(bytes(VNET_BYTES) + b"\x60" + bytes(60)) is None  # IPv6: never chained
    # a GSO packet is forwarded whole: the same key on the next link
    big = tcp(60_000, gso_size=8_948)
    again = bytearray(big)
    again[VNET_BYTES + 8] -= 1  # the router's TTL
    assert transit_key(bytes(again)) == transit_key(big)


def test_delays_add_up_along_a_path_and_the_relay_cost_is_compensated_once() -> None:
    transit = Transit(overhead_ns=20 * US)
    first, second = LinkDirection(-1, 45 * US, None), LinkDirection(-1, 45 * US, None)
    packet = ipv4(b"ping" * 10)
    key = transit_key(packet)
    first.admit(packet, transit.arrival(key, now_ns=1_000 * US), key)  # read from a host
    deadline1, _, _, kept = first.queue.popleft()
    assert deadline1 == (1_000 + 45 - 20) * US
    assert kept == key  # kept with the packet for its write
    # written 7 us late; the router hands it back on the next link 3 us after that
    transit.wrote(kept, deadline1, now_ns=deadline1 + 7 * US)
    forwarded = ipv4(b"ping" * 10, ttl=63)
    second.admit(forwarded, transit.arrival(transit_key(forwarded), now_ns=deadline1 + 10 * US))
    deadline2 = second.queue.popleft()[0]
    # counted from when it was due, not read: the path holds 45 + 45 - 20 us in all
    assert deadline2 == deadline1 + 45 * US == (1_000 + 70) * US
    assert transit.chained == 1


def test_a_packet_not_written_by_the_relay_or_seen_too_late_is_fresh() -> None:
    transit = Transit(overhead_ns=20 * US)
    packet = ipv4(b"data" * 10)
    assert transit.arrival(transit_key(ipv4(b"other" * 8)), now_ns=500 * US) == 480 * US
    transit.wrote(transit_key(packet), 100 * US, now_ns=100 * US)
    late = 100 * US + TRANSIT_WINDOW_NS
    assert transit.arrival(transit_key(ipv4(b"data" * 10, ttl=63)), now_ns=late) == late - 20 * US
    assert transit.chained == 0


def test_a_link_is_first_in_first_out() -> None:
    link = LinkDirection(-1, 45 * US, None)
    link.admit(ipv4(b"a" * 20), 100 * US)
    link.admit(ipv4(b"b" * 20), 90 * US)  # chained from an earlier deadline: no overtaking
    assert [d for d, *_ in link.queue] == [145 * US, 145 * US]


def test_a_rate_serialises_from_the_nominal_arrival() -> None:
    link = LinkDirection(-1, 10 * US, rate_bps=8_000_000_000)  # 1 byte per ns
    link.admit(bytes(VNET_BYTES + 1000), 0)
    link.admit(bytes(VNET_BYTES + 1000), 0)
    assert [d for d, *_ in link.queue] == [(1 + 10) * US, (2 + 10) * US]


def test_a_gso_packet_is_its_segments_on_the_wire() -> None:
    """The kernel hands the relay a TCP sender's 64 KiB GSO packet whole: on the wire it
    is ceil(payload / gso_size) segments, each with the IP and TCP headers (52 bytes)."""
    assert segments(tcp(1_000)) == (1, 20 + 32 + 1_000)
    big = tcp(3 * 8_948 + 100, gso_size=8_948)
    assert segments(big) == (4, 4 * 52 + 3 * 8_948 + 100)
    # serialised like its four segments back to back, leaving with the last of them
    link = LinkDirection(-1, 10 * US, rate_bps=8_000_000_000)
    link.admit(big, 0)
    assert [d for d, *_ in link.queue] == [4 * 52 + 3 * 8_948 + 100 + 10 * US]


def test_a_full_link_drops_counting_segments() -> None:
    """The queue limit is in segments whatever the packets' size: a GSO packet takes the
    room of its segments and is dropped whole when they do not all fit."""
    link = LinkDirection(-1, 10 * US, None)
    big = tcp(4 * 8_948, gso_size=8_948)
    for _ in range(QUEUE_LIMIT // 4):
        link.admit(big, 0)
    assert link.held == QUEUE_LIMIT and link.dropped == 0
    link.admit(tcp(100), 0)
    assert link.dropped == 1 and len(link.queue) == QUEUE_LIMIT // 4
    link.queue.popleft()
    link.held -= 4
    link.admit(big, 0)
    assert link.dropped == 1 and link.held == QUEUE_LIMIT


def test_only_the_last_writes_are_remembered() -> None:
    transit = Transit(overhead_ns=0)
    keys = [transit_key(ipv4(i.to_bytes(4, "big") * 10)) for i in range(TRANSIT_LIMIT + 1)]
    for key in keys:
        transit.wrote(key, 5 * US, now_ns=US)
    assert len(transit.written) == TRANSIT_LIMIT
    assert transit.arrival(keys[0], now_ns=2 * US) == 2 * US  # forgotten: fresh
    assert transit.arrival(keys[-1], now_ns=2 * US) == 5 * US  # chained
