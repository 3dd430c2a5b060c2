"""The ETHTOOL_GSTATS ioctl on a real driver (root): a veth pair in a namespace this test
creates. veth has driver statistics but no pause counters, so the names are read and
none is kept: the ioctl's structs are right, and "no pause counter" is empty, not an error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating a network namespace needs root"),
]

SCRIPT = """
import json, socket
from netqual.agent import ethtool
e = ethtool._Ethtool()
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    n = e._count(s, "nqc0")
    names = e._strings(s, "nqc0", n)
    stats = e._stats(s, "nqc0", n)
print(json.dumps({"n": n, "names": names, "stats": list(stats), "pause": e.pause("nqc0"),
                  "lo": e.pause("lo")}))
"""


def test_veth_statistics_by_ioctl() -> None:
    ns = f"nqcounters-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    try:
        veth = ["ip", "-n", ns, "link", "add", "nqc0", "type", "veth", "peer", "name", "nqc1"]
        subprocess.run(veth, check=True, timeout=30)
        out = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SCRIPT],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=30)
    # veth: peer_ifindex and per-queue XDP counters (drivers/net/veth.c)
    assert got["n"] == len(got["names"]) == len(got["stats"]) > 0
    assert "peer_ifindex" in got["names"]
    assert got["pause"] == {} and got["lo"] == {}
