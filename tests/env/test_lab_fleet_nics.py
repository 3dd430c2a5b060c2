"""The fleet MTU on the interfaces probes use, in the real lab (network namespaces; needs
root): the shipped two-rails topology, whose inventory lists each host's rail NICs. Each
listed NIC is compared per rail; the host's main interface (the one its inventory address
uses, which bipartite and fan-in runs measure) is compared too, as ``mtu[main]`` (it once
was not: ``check --fleet`` exited 0 over a 1500 beside 9000 data NICs). A rail NIC at 1500
is named with its node and NIC and the majority (docs/evidence.md, "MTU per NIC")."""

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
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

TOPOLOGY = Path(lab.default_topology_path()).parent / "two-rails.toml"
# h3's delayed rail-1 link is a TUN device of the lab's relay, up with operstate unknown:
# compared like every interface a probe uses, its driver differs from the veths by design.
POLICY = '[fleet]\nallow_differ = ["driver"]\n'


def netqual(*args: str, netns: str) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", "netns", "exec", netns, sys.executable, "-m", "netqual", *args]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


def outliers(stdout: str) -> list[str]:
    return [line.strip() for line in stdout.splitlines() if "outlier " in line]


def test_main_interface_and_each_nic_are_compared_and_an_outlier_is_named(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(TOPOLOGY), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    hosts = {n.name: n for n in info.nodes}
    ctl = f"{prefix_for(state_dir)}-ctl"
    inventory = str(info.inventory_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)

    check = netqual("check", inventory, "--fleet", "--policy", str(policy), netns=ctl)
    assert check.returncode == 0, check.stdout + check.stderr
    assert outliers(check.stdout) == []
    doc = json.loads(netqual("check", inventory, "--fleet", "--json", netns=ctl).stdout)
    h3 = doc["fleet"]["snapshot"]["h3"]
    # the TUN device (operstate unknown, up) is among the interfaces compared
    assert (h3["nic.to-rail1.operstate"], h3["nic.to-rail1.driver"]) == ("unknown", "tun")
    assert h3["driver"] == "tun,veth"
    assert {s["main_interface"] for s in doc["fleet"]["snapshot"].values()} == {"to-mgmt"}

    system.ip_batch(hosts["h4"].netns, ["link set dev to-mgmt mtu 1500"])
    check = netqual("check", inventory, "--fleet", "--policy", str(policy), netns=ctl)
    (tmp_path / "check-main.txt").write_text(check.stdout + check.stderr)
    assert check.returncode == 1, check.stdout + check.stderr
    assert outliers(check.stdout) == [
        "outlier h4: mtu[main] 1500 on to-mgmt (majority 9000 on h1, h2, h3)"
    ]
    doc = json.loads(netqual("check", inventory, "--fleet", "--json", netns=ctl).stdout)
    h4 = doc["fleet"]["snapshot"]["h4"]
    assert (h4["mtu"], h4["nic.to-mgmt.mtu"], h4["nic.to-rail1.mtu"]) == (
        "1500,9000",
        "1500",
        "9000",
    )
    expect = tmp_path / "expect.toml"
    expect.write_text(POLICY + "mtu = 9000\n")
    check = netqual("check", inventory, "--fleet", "--policy", str(expect), netns=ctl)
    assert check.returncode == 1 and outliers(check.stdout) == [
        "outlier h4: mtu[main] 1500 on to-mgmt (expected 9000)"
    ], check.stdout

    system.ip_batch(hosts["h4"].netns, ["link set dev to-mgmt mtu 9000"])
    system.ip_batch(hosts["h2"].netns, ["link set dev to-rail1 mtu 1500"])
    check = netqual("check", inventory, "--fleet", "--policy", str(policy), netns=ctl)
    (tmp_path / "check-rail.txt").write_text(check.stdout + check.stderr)
    assert check.returncode == 1, check.stdout + check.stderr
    assert outliers(check.stdout) == [
        "outlier h2: mtu[rail1] 1500 on to-rail1 (majority 9000 on h1, h3, h4)"
    ]
