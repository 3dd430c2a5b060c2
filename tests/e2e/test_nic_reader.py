"""One NIC reader (``agent/nicsysfs``) behind two pre-flight answers: a real agent started
with ``--sysfs-root`` on a fixture tree answers ``nics`` (check --nics) and ``snapshot``
(check --fleet) from that tree, and the two agree on every interface's MTU and speed and
every RDMA port's state, netdev and GIDs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from agentpool import AgentPool
from e2e_cli import netqual_here, write_inventory

LINK_LOCAL = "fe80:0000:0000:0000:0202:c9ff:fe00:0001"
MAPPED_V4 = "0000:0000:0000:0000:0000:ffff:c612:010a"  # ::ffff:198.18.1.10
EMPTY = "0000:0000:0000:0000:0000:0000:0000:0000"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def nic_tree(root: Path, names: list[str]) -> None:
    """sysfs for this host's interface names (``ip`` lists the agent's own): each one up
    with its own MTU and speed, one down; an mlx5-style RoCE port on the first one (GID
    slots 0-2 populated, 3 empty) and a down port without GIDs."""
    net = root / "sys" / "class" / "net"
    down = [n for n in names if n != "lo"][1:][-1:]  # the last of two or more
    for i, name in enumerate(names):
        loopback = name == "lo"
        _write(net / name / "type", "772" if loopback else "1")
        _write(net / name / "operstate", "down" if name in down else "up")
        _write(net / name / "mtu", "65536" if loopback else str(9000 - 100 * i))
        _write(net / name / "speed", "-1" if loopback else str(25000 * (i + 1)))
    data = next(n for n in names if n != "lo")
    port = root / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    _write(port / "state", "4: ACTIVE")
    _write(port / "link_layer", "Ethernet")
    gids = [
        (LINK_LOCAL, "IB/RoCE v1"),
        (LINK_LOCAL, "RoCE v2"),
        (MAPPED_V4, "RoCE v2"),
        (EMPTY, ""),
    ]
    for i, (gid, kind) in enumerate(gids):
        _write(port / "gids" / str(i), gid)
        if kind:
            _write(port / "gid_attrs" / "types" / str(i), kind)
            _write(port / "gid_attrs" / "ndevs" / str(i), data)
    _write(port.parent / "2" / "state", "1: DOWN")
    _write(port.parent / "2" / "link_layer", "Ethernet")


def test_nics_and_snapshot_answers_agree_on_one_sysfs_tree(
    agents: AgentPool, tmp_path: Path
) -> None:
    ip = ["ip", "-j", "address", "show"]
    out = subprocess.run(ip, capture_output=True, text=True, check=True)
    names = [i["ifname"] for i in json.loads(out.stdout)]
    assert "lo" in names and len(names) >= 2, names  # lo and at least one other
    root = tmp_path / "host"
    nic_tree(root, names)
    started = agents.start_many([("gpu01", "--sysfs-root", str(root))])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    r = netqual_here("check", str(inventory), "--fleet", "--json")
    doc = json.loads(r.stdout)
    nics = doc["nodes"][0]["nics"]
    snap = doc["fleet"]["snapshot"]["gpu01"]

    interfaces = {i["name"]: i for i in nics["interfaces"]}
    assert set(interfaces) == set(names)
    assert interfaces["lo"]["mtu"] == 65536 and "nic.lo.mtu" not in snap  # loopback: not fleet
    others = [n for n in names if n != "lo"]
    for name in others:
        mine = interfaces[name]
        # the tree's values, not the host's: both answers read the agent's --sysfs-root
        assert mine["mtu"] == 9000 - 100 * names.index(name), mine
        assert snap[f"nic.{name}.mtu"] == str(mine["mtu"])
        assert snap[f"nic.{name}.speed_mbps"] == str(mine["speed_mbps"])
    up = others[:-1] if len(others) > 1 else others  # the down one is not compared
    assert snap["mtu"] == ",".join(sorted(str(9000 - 100 * names.index(n)) for n in up))

    ports = {(p["device"], p["port"]): p for p in nics["rdma"]}
    assert set(ports) == {("mlx5_0", 1), ("mlx5_0", 2)}
    active, down = ports["mlx5_0", 1], ports["mlx5_0", 2]
    assert (active["state"], snap["rdma.mlx5_0/1.state"]) == ("ACTIVE", "ACTIVE")
    assert (down["state"], snap["rdma.mlx5_0/2.state"]) == ("DOWN", "DOWN")
    data = others[0]
    assert active["netdev"] == data and down["netdev"] is None
    assert active["gids"] == [LINK_LOCAL, LINK_LOCAL, MAPPED_V4]  # the empty slot left out
    gid_keys = sorted(k for k in snap if k.startswith("rdma.mlx5_0/1.gid."))
    assert gid_keys == [f"rdma.mlx5_0/1.gid.{i}" for i in range(3)]
    assert all(snap[k].endswith(f" {data}") for k in gid_keys)
    assert (snap["rdma.mlx5_0/1.gid_index"], snap["roce_gid_type"]) == ("2", "RoCE v2")
