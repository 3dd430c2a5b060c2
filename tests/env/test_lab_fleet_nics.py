"""The fleet MTU per inventory NIC in the real lab (network namespaces; needs root): the
shipped two-rails topology, whose inventory lists each host's rail NICs. One host's
management link at 1500 beside 9000 data NICs is no outlier for ``check --fleet`` (the
every-interface ``mtu`` would read 1500,9000 there); one host's rail-1 NIC at 1500 is,
named with its node and NIC and the majority (docs/evidence.md, "MTU per NIC")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netqual import lab
from netqual.lab import system
from netqual.lab.layout import prefix_for

REASON = lab.lab_available()
pytestmark = [pytest.mark.root, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

TOPOLOGY = Path(lab.default_topology_path()).parent / "two-rails.toml"


def netqual(*args: str, netns: str) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", "netns", "exec", netns, sys.executable, "-m", "netqual", *args]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_management_nic_is_not_compared_and_a_data_nic_outlier_is_named(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(TOPOLOGY), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    hosts = {n.name: n for n in info.nodes}
    ctl = f"{prefix_for(state_dir)}-ctl"
    inventory = str(info.inventory_path)

    system.ip_batch(hosts["h4"].netns, ["link set dev to-mgmt mtu 1500"])
    check = netqual("check", inventory, "--fleet", netns=ctl)
    (tmp_path / "check-mgmt.txt").write_text(check.stdout + check.stderr)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "outlier" not in check.stdout
    doc = json.loads(netqual("check", inventory, "--fleet", "--json", netns=ctl).stdout)
    h4 = doc["fleet"]["snapshot"]["h4"]
    assert (h4["mtu"], h4["nic.to-mgmt.mtu"], h4["nic.to-rail1.mtu"]) == (
        "1500,9000",
        "1500",
        "9000",
    )

    system.ip_batch(hosts["h2"].netns, ["link set dev to-rail1 mtu 1500"])
    check = netqual("check", inventory, "--fleet", netns=ctl)
    (tmp_path / "check-rail.txt").write_text(check.stdout + check.stderr)
    assert check.returncode == 1, check.stdout + check.stderr
    outliers = [line.strip() for line in check.stdout.splitlines() if "outlier " in line]
    assert outliers == ["outlier h2: mtu[rail1] 1500 on to-rail1 (majority 9000 on h1, h3, h4)"]
