"""The NIC reader's sysfs walk (``agent/nicsysfs``) over fixture trees: a GID table laid out
as rxe lists it (1,024 slots, a few populated, holes between them) and the first-line
reading every sysfs file goes through."""

from __future__ import annotations

from pathlib import Path

from netqual.agent import nicsysfs
from netqual.model.fleet import UNKNOWN
from netqual.transports.rdma.devices import DeviceInfo, PortInfo
from netqual.transports.rdma.gid import GidEntry, GidType, LinkLayer

EMPTY = "0000:0000:0000:0000:0000:0000:0000:0000"
LINK_LOCAL = "fe80:0000:0000:0000:5054:00ff:fe12:3456"
MAPPED = "0000:0000:0000:0000:0000:ffff:c612:{:04x}"  # ::ffff:198.18.x.y


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def _rxe_port(root: Path, populated: dict[int, tuple[str, str]], slots: int = 1024) -> Path:
    """rxe0's port 1: ``slots`` GID files, all zero but ``populated`` (index -> GID, type);
    the empty slots have no type or netdev to read (the kernel answers EINVAL)."""
    port = root / "sys" / "class" / "infiniband" / "rxe0" / "ports" / "1"
    _write(port / "state", "4: ACTIVE\n")
    _write(port / "link_layer", "Ethernet\n")
    for i in range(slots):
        gid, kind = populated.get(i, (EMPTY, ""))
        _write(port / "gids" / str(i), gid + "\n")
        if kind:
            _write(port / "gid_attrs" / "types" / str(i), kind + "\n")
            _write(port / "gid_attrs" / "ndevs" / str(i), "nqa\n")
    return port


def test_every_populated_slot_is_read_across_holes_in_index_order(tmp_path: Path) -> None:
    # the defaults at 0 and 1, an address added at 2 and 3, one removed (hole at 4-5), and
    # one far up the table: a table is not filled from the bottom without gaps
    populated = {
        0: (LINK_LOCAL, "IB/RoCE v1"),
        1: (LINK_LOCAL, "RoCE v2"),
        2: (MAPPED.format(0x0001), "IB/RoCE v1"),
        3: (MAPPED.format(0x0001), "RoCE v2"),
        6: (MAPPED.format(0x0101), "RoCE v2"),
        1000: (MAPPED.format(0x0201), "RoCE v2"),
    }
    port = _rxe_port(tmp_path, populated)
    (port / "gids" / "7").unlink()  # unreadable slots are skipped, as are odd ones
    (port / "gids" / "7").mkdir()
    _write(port / "gids" / "8", "not a gid\n")
    (dev,) = nicsysfs.rdma_devices(tmp_path)
    (got,) = dev.ports
    assert [g.entry.index for g in got.gids] == [0, 1, 2, 3, 6, 1000]
    assert [g.entry.gid for g in got.gids] == [populated[g.entry.index][0] for g in got.gids]
    kinds = [g.entry.gid_type for g in got.gids]
    assert kinds == [GidType.ROCE_V1, GidType.ROCE_V2] * 2 + [GidType.ROCE_V2] * 2
    assert {g.netdev for g in got.gids} == {"nqa"} and got.netdev == "nqa"
    assert (got.state, got.link_layer) == ("ACTIVE", "Ethernet")


def test_a_port_reads_at_most_max_gids_populated_slots(tmp_path: Path) -> None:
    full = {i: (MAPPED.format(i + 1), "RoCE v2") for i in range(nicsysfs.MAX_GIDS + 4)}
    _rxe_port(tmp_path, full, slots=nicsysfs.MAX_GIDS + 8)
    (dev,) = nicsysfs.rdma_devices(tmp_path)
    assert [g.entry.index for g in dev.ports[0].gids] == list(range(nicsysfs.MAX_GIDS))


def test_read_gives_a_files_first_line_or_unknown(tmp_path: Path) -> None:
    cases: dict[str, str | bytes] = {
        "plain": "4: ACTIVE\n",
        "lines": "\n  first  \nsecond\n",
        "crlf": "100000\r\n",
        "bad-utf8": b"mlx\xff5\n",
        "blank": " \n\n",
        "empty": "",
        "long": "x" * 10_000 + "\ny\n",  # beyond one read's 4 KiB
    }
    for name, data in cases.items():
        _write(tmp_path / name, data)
    (tmp_path / "dir").mkdir()
    got = {name: nicsysfs.read(tmp_path / name) for name in [*cases, "dir", "absent"]}
    assert got == {
        "plain": "4: ACTIVE",
        "lines": "first",
        "crlf": "100000",
        "bad-utf8": "mlx\ufffd5",
        "blank": UNKNOWN,
        "empty": UNKNOWN,
        "long": "x" * 10_000,
        "dir": UNKNOWN,
        "absent": UNKNOWN,
    }
    assert nicsysfs.read(str(tmp_path / "plain")) == "4: ACTIVE"  # a string path alike


def test_populated_slots_from_a_verbs_scan_read_the_same_entries(tmp_path: Path) -> None:
    """Where verbs listed a port's populated slots (``ibv_query_gid_table``), only those
    files are read, and the entries are the walk's; a port verbs did not list (its device
    failed to open) is walked in full."""
    populated = {0: (LINK_LOCAL, "IB/RoCE v1"), 1: (LINK_LOCAL, "RoCE v2")}
    populated |= {5: (MAPPED.format(0x0001), "RoCE v2"), 1000: (MAPPED.format(0x0201), "RoCE v2")}
    port = _rxe_port(tmp_path, populated)
    walked = nicsysfs.rdma_devices(tmp_path)
    entries = tuple(
        GidEntry(i, gid, GidType.ROCE_V2 if kind == "RoCE v2" else GidType.ROCE_V1)
        for i, (gid, kind) in populated.items()
    )
    scanned = [
        DeviceInfo("rxe0", (PortInfo(1, 4, LinkLayer.ETHERNET, 3, 0, entries),)),
        DeviceInfo("mlx5_0", (), error="cannot open: permission denied"),
    ]
    slots = nicsysfs.populated_slots(scanned)
    assert slots == {("rxe0", 1): (0, 1, 5, 1000)}
    assert nicsysfs.rdma_devices(tmp_path, slots) == walked
    # the slots named are the only GID files read: the others may hold anything
    for i in (2, 3, 999):
        _write(port / "gids" / str(i), MAPPED.format(0x0909) + "\n")
    assert nicsysfs.rdma_devices(tmp_path, slots) == walked
    for other in (None, {("rxe1", 1): (0,)}):  # no slots, or none for rxe0/1: walked
        (dev,) = nicsysfs.rdma_devices(tmp_path, other)
        assert [g.entry.index for g in dev.ports[0].gids] == [0, 1, 2, 3, 5, 999, 1000]
