"""The relay's timing rules without TUN devices: when each packet is due on each link."""

from __future__ import annotations

import struct

from netqual.lab.relay import TRANSIT_WINDOW_NS, LinkDirection, Transit, transit_key

US = 1_000


def ipv4(payload: bytes, ttl: int = 64) -> bytes:
    """An IPv4 header (checksum left to the caller's ``ttl``) and ``payload``."""
    header = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 7, 0x4000, ttl, 6, ttl * 3,
        bytes([198, 18, 1, 10]), bytes([198, 18, 2, 10]),
    )  # fmt: skip
    return header + payload


def test_a_router_changes_only_ttl_and_checksum_so_the_key_survives_forwarding() -> None:
    assert transit_key(ipv4(b"x" * 40, ttl=64)) == transit_key(ipv4(b"x" * 40, ttl=63))
    assert transit_key(ipv4(b"x" * 40)) != transit_key(ipv4(b"y" * 40))
    assert transit_key(b"\x60" + bytes(60)) is None  # IPv6: never chained


def test_delays_add_up_along_a_path_and_the_relay_cost_is_compensated_once() -> None:
    transit = Transit(overhead_ns=20 * US)
    first, second = LinkDirection(-1, 45 * US, None), LinkDirection(-1, 45 * US, None)
    packet = ipv4(b"ping" * 10)
    first.admit(packet, transit.arrival(packet, now_ns=1_000 * US))  # read from a host
    deadline1, _ = first.queue.popleft()
    assert deadline1 == (1_000 + 45 - 20) * US
    # written 7 us late; the router hands it back on the next link 3 us after that
    transit.wrote(packet, deadline1, now_ns=deadline1 + 7 * US)
    forwarded = ipv4(b"ping" * 10, ttl=63)
    second.admit(forwarded, transit.arrival(forwarded, now_ns=deadline1 + 10 * US))
    deadline2, _ = second.queue.popleft()
    # counted from when it was due, not read: the path holds 45 + 45 - 20 us in all
    assert deadline2 == deadline1 + 45 * US == (1_000 + 70) * US
    assert transit.chained == 1


def test_a_packet_not_written_by_the_relay_or_seen_too_late_is_fresh() -> None:
    transit = Transit(overhead_ns=20 * US)
    packet = ipv4(b"data" * 10)
    assert transit.arrival(ipv4(b"other" * 8), now_ns=500 * US) == 480 * US
    transit.wrote(packet, 100 * US, now_ns=100 * US)
    late = 100 * US + TRANSIT_WINDOW_NS
    assert transit.arrival(ipv4(b"data" * 10, ttl=63), now_ns=late) == late - 20 * US
    assert transit.chained == 0


def test_a_link_is_first_in_first_out() -> None:
    link = LinkDirection(-1, 45 * US, None)
    link.admit(ipv4(b"a" * 20), 100 * US)
    link.admit(ipv4(b"b" * 20), 90 * US)  # chained from an earlier deadline: no overtaking
    assert [d for d, _ in link.queue] == [145 * US, 145 * US]


def test_a_rate_serialises_from_the_nominal_arrival() -> None:
    link = LinkDirection(-1, 10 * US, rate_bps=8_000_000_000)  # 1 byte per ns
    link.admit(bytes(1000), 0)
    link.admit(bytes(1000), 0)
    assert [d for d, _ in link.queue] == [(1 + 10) * US, (2 + 10) * US]
