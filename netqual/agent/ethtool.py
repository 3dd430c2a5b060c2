"""Pause and PFC counters of a network interface, by the ``ETHTOOL_GSTATS`` ioctl (the
numbers ``ethtool -S IFNAME`` prints), without the ethtool command. Used by
``netqual.agent.counters`` before and after every probe phase; docs/evidence.md.
"""

from __future__ import annotations

import array
import fcntl
import re
import socket
import struct
import threading

MAX_COUNTERS = 32  # pause/PFC counters kept per interface
# ethtool -S names of pause/PFC counters: mlx5 rx_prio3_pause, tx_pause_ctrl_phy; bnxt
# rx_pfc_ena_frames_pri3; ice/i40e link_xoff_rx, priority_3_xoff_rx; generic *_pause_*.
PAUSE_NAME = re.compile(r"pause|pfc|xoff|xon|_cnp_|ecn", re.IGNORECASE)

SIOCETHTOOL = 0x8946
ETHTOOL_GSSET_INFO = 0x37
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSTATS = 0x1D
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32


class _Ethtool:
    """Pause counters by ioctl. The counter names of each interface are read once (a
    mlx5 has thousands) and only the pause/PFC ones are kept."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, int], list[tuple[int, str]]] = {}
        self._lock = threading.Lock()

    def pause(self, ifname: str) -> dict[str, int]:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                n = self._count(s, ifname)
                if not n:
                    return {}
                key = (ifname, n)
                with self._lock:
                    picked = self._names.get(key)
                if picked is None:
                    picked = [(i, nm) for i, nm in enumerate(self._strings(s, ifname, n))
                              if PAUSE_NAME.search(nm)][:MAX_COUNTERS]  # fmt: skip
                    with self._lock:
                        self._names[key] = picked
                if not picked:
                    return {}
                stats = self._stats(s, ifname, n)
        except (OSError, ValueError, struct.error):
            return {}  # no driver stats (lo), or no permission: unknown, not an error
        return {nm: int(stats[i]) for i, nm in picked if i < len(stats)}

    @staticmethod
    def _ioctl(s: socket.socket, ifname: str, buf: bytearray) -> None:
        addr = array.array("B", buf)
        ptr, _ = addr.buffer_info()
        ifreq = struct.pack("16sP", ifname.encode()[:15], ptr)
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)
        buf[:] = addr.tobytes()

    def _count(self, s: socket.socket, ifname: str) -> int:
        # struct ethtool_sset_info: cmd, reserved, u64 sset_mask, then u32 data[]
        buf = bytearray(struct.pack("=IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0))
        self._ioctl(s, ifname, buf)
        _, _, mask, count = struct.unpack("=IIQI", bytes(buf))
        return int(count) if mask & (1 << ETH_SS_STATS) else 0

    def _strings(self, s: socket.socket, ifname: str, n: int) -> list[str]:
        buf = bytearray(struct.pack("=III", ETHTOOL_GSTRINGS, ETH_SS_STATS, n))
        buf += bytes(n * ETH_GSTRING_LEN)
        self._ioctl(s, ifname, buf)
        raw = bytes(buf[12:])
        return [raw[i * ETH_GSTRING_LEN : (i + 1) * ETH_GSTRING_LEN].split(b"\0", 1)[0]
                .decode("ascii", "replace") for i in range(n)]  # fmt: skip

    def _stats(self, s: socket.socket, ifname: str, n: int) -> tuple[int, ...]:
        buf = bytearray(struct.pack("=II", ETHTOOL_GSTATS, n)) + bytes(8 * n)
        self._ioctl(s, ifname, buf)
        return struct.unpack(f"={n}Q", bytes(buf[8:]))


ETHTOOL = _Ethtool()


def parse_ethtool_s(text: str) -> dict[str, int]:
    """The pause/PFC counters of an ``ethtool -S IFNAME`` printout (fixtures, and hosts
    where a counter is only known by that text)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and PAUSE_NAME.search(name) and value.strip().isdigit():
            out[name.strip()] = int(value)
    return out
