"""What agents report of their NICs (docs/rails.md): `netqual check --nics` and `netqual
inventory ... --nics-from-agents`, with real agent processes on 127.0.0.1; the rule that
turns a report into inventory nics, and a hostile report, in-process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from agentpool import AgentPool
from e2e_cli import netqual_here, write_inventory

from netqual.agent import nicreport
from netqual.base.errors import BadRequestError
from netqual.model.node import HostNics, IpInterface, Nic, RdmaPort
from netqual.planning.inventory import load_inventory
from netqual.planning.rails import nics_from_report


def _host_interfaces() -> dict[str, list[str]]:
    """This host's interfaces and addresses as `ip` lists them (the agent's source)."""
    out = subprocess.run(
        ["ip", "-j", "address", "show"], capture_output=True, text=True, check=True
    )
    return {
        i["ifname"]: [a["local"] for a in i.get("addr_info", [])] for i in json.loads(out.stdout)
    }


def test_check_nics_shows_what_each_agent_reports(agents: AgentPool, tmp_path: Path) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    r = netqual_here("check", str(inventory), "--nics")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NICs the agents report" in r.stdout
    for node in ("gpu01", "gpu02"):
        assert f"  {node} lo: 127.0.0.1" in r.stdout, r.stdout
    doc = json.loads(netqual_here("check", str(inventory), "--json").stdout)
    lo = [i for i in doc["nodes"][0]["nics"]["interfaces"] if i["name"] == "lo"]
    assert lo and "127.0.0.1" in lo[0]["addresses"] and lo[0]["mtu"] == 65536


def test_inventory_from_hosts_fills_nics_from_the_agents(agents: AgentPool, tmp_path: Path) -> None:
    agent = agents.start("localhost")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text(f"localhost port={agent.port}\n")
    out = tmp_path / "inventory.toml"
    r = netqual_here(
        "inventory", "from-hosts", str(hosts), "--token-file", str(agents.token_file),
        "--nics-from-agents", "--out", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    text = out.read_text()
    nics = load_inventory(out).node("localhost").nics
    expected = nics_from_report(nicreport.collect(), "127.0.0.1")
    assert nics == expected, text
    host = _host_interfaces()
    for nic in nics:  # every NIC written is an interface of this host, with its address
        assert nic.address in host[nic.name] and nic.name != "lo"
    # no token, no agents asked
    r = netqual_here("inventory", "from-hosts", str(hosts), "--nics-from-agents")
    assert r.returncode == 2 and "--nics-from-agents: needs --token-file" in r.stderr


def test_report_to_nics_rule() -> None:
    report = HostNics(
        interfaces=(
            IpInterface("lo", ("127.0.0.1",)),
            IpInterface("eno1", ("10.0.0.11",)),
            IpInterface("ens10", ("10.2.0.11", "fe80::1")),
            IpInterface("ens2", ("fe80::2", "10.1.0.11")),
        ),
        rdma=(
            RdmaPort("mlx5_10", 1, "ACTIVE", "ens10"),
            RdmaPort("mlx5_2", 1, "ACTIVE", "ens2"),
            RdmaPort("mlx5_3", 1, "DOWN", None),
        ),
    )
    assert nics_from_report(report, "10.0.0.11") == (
        Nic("ens2", "10.1.0.11", 0, "mlx5_2"),
        Nic("ens10", "10.2.0.11", 1, "mlx5_10"),
    )
    tcp_only = HostNics(interfaces=report.interfaces)
    assert nics_from_report(tcp_only, "10.0.0.11") == (
        Nic("ens2", "10.1.0.11", 0),
        Nic("ens10", "10.2.0.11", 1),
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"interfaces": [{"name": "eth\x1b[31m", "addresses": []}]}, "nics.interfaces[0].name"),
        ({"interfaces": [{"name": "eth0", "addresses": ["10.0.0.1/24"]}]}, "addresses[0]"),
        ({"interfaces": [{"name": "e", "addresses": []}] * 65}, "nics.interfaces"),
        ({"rdma": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "gids": ["x"]}]}, "gids[0]"),
    ],
)
def test_a_hostile_nic_report_is_refused_naming_the_field(
    body: dict[str, object], field: str
) -> None:
    with pytest.raises(BadRequestError) as caught:
        nicreport.from_peer(body, "gpu01", "10.0.0.1:18515")
    assert field in str(caught.value)
