"""Which NIC carried each probe, read from the kernels' counters in the two-rails lab
(root; real namespaces and agents): with `--rails same`, every path's bytes must have
moved on the NIC the inventory names at both ends (docs/evidence.md "carried_by")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netqual import lab

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

TOPOLOGY = Path(lab.default_topology_path()).parent / "two-rails.toml"


def test_every_probe_is_carried_by_the_nics_it_was_planned_on(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(TOPOLOGY), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    out = tmp_path / "run"
    done = subprocess.run(
        ["ip", "netns", "exec", info.control_netns, sys.executable, "-m", "netqual", "run",
         str(info.inventory_path), "--rails", "same", "--out", str(out), "--iterations", "300",
         "--warmup", "20", "--no-bulk", "--allow-short-plan"],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NETQUAL_WIDTH": "100"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    paths = json.loads((out / "results.json").read_text())["paths"]
    assert len(paths) == 12  # 6 host pairs x 2 rails
    for p in paths:
        assert p["error"] is None, p
        carried = p["details"]["carried_by"]
        assert carried == {"src": p["src_nic"], "dst": p["dst_nic"], "problem": None}, p
        moved = p["details"]["counters"]
        nic = moved["src"]["interfaces"][p["src_nic"]]
        assert nic["tx_bytes"] + nic["rx_bytes"] >= moved["probe_bytes"]
        # The other rail's NIC of the host moved only when another probe ran at the same
        # time (rounds are disjoint per NIC, not per host): the window says so.
        other = "to-rail0" if p["src_nic"] == "to-rail1" else "to-rail1"
        quiet = moved["src"]["interfaces"].get(other, {"tx_bytes": 0, "rx_bytes": 0})
        if quiet["tx_bytes"] + quiet["rx_bytes"] >= moved["probe_bytes"] // 10:
            assert moved["src"]["shared"] is True, moved
