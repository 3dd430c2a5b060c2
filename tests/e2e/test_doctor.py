"""``netqual doctor``: checks in plain words, cross-node mismatches, CLI output and exit codes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import check_golden
from rich.console import Console

from netqual.agent import doctor
from netqual.base.errors import TransportUnavailableError
from netqual.model.node import Node
from netqual.render.doctor import render
from netqual.transports.rdma import verbs

ENV = {**os.environ, "NETQUAL_WIDTH": "100"}


def _port(
    state: str = "ACTIVE", link: str = "Ethernet", mtu: int = 4096, v2: bool = True
) -> dict[str, Any]:
    gids = [
        {
            "index": 0,
            "gid": "fe80:0000:0000:0000:0000:0000:0000:0001",
            "type": "RoCEv1",
            "ip": "fe80::1",
        }
    ]
    if link == "InfiniBand":
        gids = [
            {
                "index": 0,
                "gid": "fe80:0000:0000:0000:0002:c903:000a:000b",
                "type": "IB",
                "ip": "fe80::2:c903:a:b",
            }
        ]
    elif v2:
        gids.append(
            {
                "index": 3,
                "gid": "0000:0000:0000:0000:0000:ffff:0a00:010b",
                "type": "RoCEv2",
                "ip": "10.0.1.11",
            }
        )
    return {
        "port": 1,
        "state": state,
        "link_layer": link,
        "active_mtu_bytes": mtu,
        "lid": 7 if link == "InfiniBand" else 0,
        "gids": gids,
    }


def _report(name: str, *ports: dict[str, Any]) -> dict[str, Any]:
    devices = [
        {
            "name": "mlx5_0",
            "error": None,
            "fw_version": "28.39.1002",
            "max_qp_rd_atom": 16,
            "max_qp_init_rd_atom": 16,
            "ports": list(ports),
        }
    ]
    return {
        "node": name,
        "pyverbs": {
            "available": True,
            "version": "44.0-2",
            "location": "/usr/lib/python3/dist-packages/pyverbs",
            "route": "debian dist-packages",
        },
        "libibverbs": "44.0",
        "sysfs_devices": ["mlx5_0"],
        "devices": devices,
        "problems": doctor.check_devices(devices),
    }


def test_healthy_roce_and_ib_ports_have_no_problems() -> None:
    assert _report("a", _port())["problems"] == []
    assert _report("b", _port(link="InfiniBand"))["problems"] == []


@pytest.mark.parametrize(
    ("port", "words"),
    [
        (_port(state="DOWN"), "mlx5_0 port 1 is DOWN (link down?)"),
        (_port(state="INIT", link="InfiniBand"), "is INIT (no subnet manager?)"),
        (_port(mtu=512), "active MTU 512 is below 1024 for Ethernet"),
        (_port(link="InfiniBand", mtu=2048), "active MTU 2048 is below 4096 for InfiniBand"),
        (_port(v2=False), "no RoCE v2 GID"),
    ],
)
def test_port_problems_in_plain_words(port: dict[str, Any], words: str) -> None:
    problems = _report("a", port)["problems"]
    assert [p["severity"] for p in problems] == ["error"]
    assert words in problems[0]["message"]
    assert not doctor.healthy(problems)


def test_a_down_port_beside_an_active_one_is_a_warning() -> None:
    second = {**_port(state="DOWN"), "port": 2}
    problems = _report("a", _port(), second)["problems"]
    assert [(p["severity"], p["message"][:20]) for p in problems] == [
        ("warning", "mlx5_0 port 2 is DOW")
    ]
    assert doctor.healthy(problems)


def test_mismatches_across_nodes() -> None:
    reports = {
        "gpu01": _report("gpu01", _port()),
        "gpu02": _report("gpu02", _port(mtu=1024)),
        "gpu03": _report("gpu03", _port(v2=False)),
        "ib01": _report("ib01", _port(link="InfiniBand")),
    }
    messages = [p["message"] for p in doctor.compare(reports)]
    assert messages == [
        "link layer differs across nodes: Ethernet on gpu01, gpu02, gpu03; InfiniBand on ib01 "
        "(InfiniBand and RoCE ends cannot connect)",
        "active MTU differs across nodes: 1024 on gpu02; 4096 on gpu01, gpu03, ib01 "
        "(paths run at the smaller MTU)",
        "best RoCE GID type differs across nodes: RoCEv1 on gpu03; RoCEv2 on gpu01, gpu02 "
        "(both ends of a path must use the same RoCE version)",
    ]
    assert doctor.compare({"a": reports["gpu01"], "b": reports["gpu01"]}) == []


def test_unreachable_agent_is_a_problem_not_a_crash() -> None:
    node = Node(name="ghost", address="127.0.0.1", port=1)
    reports = doctor.gather([node], None, timeout_s=2.0)
    assert reports["ghost"]["unreachable"] is True
    problems = doctor.all_problems(reports)
    assert problems[0]["node"] == "ghost"
    assert "could not ask the agent: ghost unreachable" in problems[0]["message"]


def _render(result: dict[str, Any]) -> str:
    buf = io.StringIO()
    render(Console(file=buf, width=100, color_system=None, highlight=False), result)
    return buf.getvalue()


def test_render_golden_two_nodes_with_mismatch() -> None:
    nodes = {"gpu01": _report("gpu01", _port()), "gpu02": _report("gpu02", _port(mtu=1024))}
    problems = doctor.all_problems(nodes)
    result = {
        "mode": "inventory",
        "nodes": nodes,
        "problems": problems,
        "healthy": doctor.healthy(problems),
    }
    check_golden("doctor_two_nodes.txt", _render(result))


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "netqual", "doctor", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env or ENV,
        timeout=60,
    )


def test_doctor_on_this_machine_says_there_is_no_rdma() -> None:
    if verbs.rdma_sysfs_devices():
        pytest.skip("this machine has RDMA devices")
    run = _cli()
    assert run.returncode == 1, run.stderr
    out = " ".join(run.stdout.split())  # undo the console's line wrapping
    try:
        verbs.load()
    except TransportUnavailableError:  # a CI Python that cannot load python3-pyverbs
        assert "x pyverbs is not importable" in out and "apt install python3-pyverbs" in out
    else:
        assert "x no RDMA device (no /sys/class/infiniband); load the NIC driver" in out
        assert "rdma_rxe" in out
    assert "result: NOT ready (1 problem(s))" in out
    assert "Traceback" not in run.stderr


def test_doctor_json_on_this_machine() -> None:
    if verbs.rdma_sysfs_devices():
        pytest.skip("this machine has RDMA devices")
    run = _cli("--json")
    assert run.returncode == 1
    result = json.loads(run.stdout)
    assert result["healthy"] is False and result["mode"] == "local"
    (report,) = result["nodes"].values()
    if report["pyverbs"]["available"]:
        assert report["pyverbs"]["location"].endswith("pyverbs")
    assert report["devices"] == []


def test_doctor_without_pyverbs_gives_the_install_route(tmp_path: Path) -> None:
    run = _cli(env={**ENV, "NETQUAL_PYVERBS_PATH": str(tmp_path)})
    assert run.returncode == 1
    out = " ".join(run.stdout.split())
    assert "pyverbs not importable" in out or "pyverbs is not importable" in out
    assert "apt install python3-pyverbs" in out


def test_doctor_asks_every_agent_of_an_inventory(tmp_path: Path) -> None:
    from netqual.run.localagents import local_agents

    with local_agents(2) as (nodes, token_file):
        inventory = tmp_path / "inventory.toml"
        inventory.write_text(
            "".join(
                f'[[node]]\nname = "{n.name}"\naddress = "{n.address}"\nport = {n.port}\n\n'
                for n in nodes
            )
        )
        run = _cli(
            "--inventory",
            str(inventory),
            "--token-file",
            str(token_file),
            "--transport",
            "rdma",
            "--json",
        )
    result = json.loads(run.stdout)
    assert result["mode"] == "inventory"
    assert sorted(result["nodes"]) == ["node1", "node2"]
    assert run.returncode == (0 if result["healthy"] else 1)
    if not verbs.rdma_sysfs_devices():
        assert {p["node"] for p in result["problems"]} == {"node1", "node2"}
