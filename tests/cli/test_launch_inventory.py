"""``netqual inventory from-hosts|from-slurm|from-k8s`` through the CLI: the inventory it
prints loads with ``load_inventory``; bad input exits 2 naming the file, line or field.
The Kubernetes cases read recorded ``kubectl get pods/nodes -o json`` output
(tests/data/k8s); no live cluster is involved."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from agentpool import cli_env
from launch_cli import _cli, _inv
from paths import DATA

from netqual.model.node import Role
from netqual.planning.inventory import load_inventory

K8S = DATA / "k8s"


# -- from-slurm ---------------------------------------------------------------------------


DONE_MEANS = ["--nodelist", "gpu[01-04],stor[1-2]", "--storage", "stor[1-2]"]


def test_from_slurm_nodelist_with_storage_runs_as_inventory(tmp_path: Path) -> None:
    # The real entry point in a process, as a user types it; PATH without scontrol.
    env = cli_env(PATH=os.path.dirname(sys.executable))
    done = subprocess.run(
        [sys.executable, "-m", "netqual", "inventory", "from-slurm", *DONE_MEANS],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    nodes = _inv(tmp_path, done.stdout)
    assert [n[0] for n in nodes] == ["gpu01", "gpu02", "gpu03", "gpu04", "stor1", "stor2"]
    assert [n[3] for n in nodes].count("storage") == 2
    assert {n[3] for n in nodes[:4]} == {"compute"}
    assert all(n[1] == n[0] and n[2] == 18515 for n in nodes)


def test_from_slurm_tasks_per_node_step_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "vm")
    rc, out, err = _cli(
        tmp_path, monkeypatch, capsys, "from-slurm", "--tasks-per-node", "3", "--port", "20100"
    )
    assert rc == 0, err
    assert _inv(tmp_path, out) == [
        ("vm-0", "vm", 20100, "any", None),
        ("vm-1", "vm", 20101, "any", None),
        ("vm-2", "vm", 20102, "any", None),
    ]


TOPOLOGY = """\
SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[01-02]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu[03-04],stor1
SwitchName=spine Level=1 LinkSpeed=1 Nodes=gpu[01-04],stor1 Switches=leaf[1-2]
"""


def test_from_slurm_racks_from_topology_file_and_regex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    (tmp_path / "topo.txt").write_text(TOPOLOGY)
    base = ["from-slurm", "--nodelist", "gpu[01-04],stor1"]
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, *base, "--topology", "topo.txt")
    assert rc == 0, err
    assert [n[4] for n in _inv(tmp_path, out)] == ["leaf1", "leaf1", "leaf2", "leaf2", "leaf2"]
    # An explicit --rack-from wins over the topology.
    rc, out, err = _cli(
        tmp_path, monkeypatch, capsys, *base, "--topology", "topo.txt", "--rack-from", r"^(\D+)"
    )
    assert rc == 0, err
    assert [n[4] for n in _inv(tmp_path, out)] == ["gpu", "gpu", "gpu", "gpu", "stor"]


def test_from_slurm_asks_scontrol_for_topology_and_node_addresses(tmp_path: Path) -> None:
    # A stand-in scontrol on PATH prints what Slurm 22.05 prints; the real one is driven
    # by tests/env/test_slurm_job.py.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "scontrol"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$2" in\n'
        f"  topology) printf '%s' '{TOPOLOGY}' ;;\n"
        "  node) echo 'NodeName=gpu01 Arch=x86_64 CoresPerSocket=8 NodeAddr=10.1.0.1 "
        "NodeHostName=gpu01 OS=Linux 6.1.0 #1 SMP State=IDLE'\n"
        "        echo 'NodeName=gpu02 Arch=x86_64 NodeAddr=10.1.0.2 NodeHostName=gpu02' ;;\n"
        "esac\n"
    )
    fake.chmod(0o755)
    env = cli_env(PATH=f"{bindir}:{os.path.dirname(sys.executable)}")
    done = subprocess.run(
        [sys.executable, "-m", "netqual", "inventory", "from-slurm", "--nodelist", "gpu[01-03]"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _inv(tmp_path, done.stdout) == [
        ("gpu01", "10.1.0.1", 18515, "any", "leaf1"),
        ("gpu02", "10.1.0.2", 18515, "any", "leaf1"),
        ("gpu03", "gpu03", 18515, "any", "leaf2"),
    ]
    assert "leaf switches of scontrol show topology" in done.stdout


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--nodelist", ""], {}, ["--nodelist", "names no host"]),
        (["--nodelist", "gpu[01-"], {}, ["--nodelist", "bad hostlist"]),
        ([], {}, ["--nodelist", "SLURM_JOB_NODELIST is not set"]),
        ([], {"SLURM_JOB_NODELIST": ""}, ["--nodelist", "names no host"]),
        (["--nodelist", "gpu1", "--storage", "stor1"], {}, ["--storage", "stor1"]),
        (["--nodelist", "gpu1,bad/name"], {}, ["--nodelist", "'bad/name'", "letters, digits"]),
        (["--nodelist", "gpu1", "--rack-from", "r(\\d"], {}, ["--rack-from", "regular"]),
        (["--nodelist", "gpu1,x", "--rack-from", "gpu"], {}, ["--rack-from", "'x'"]),
        (["--nodelist", "gpu1", "--tasks-per-node", "0"], {}, ["--tasks-per-node"]),
        (["--nodelist", "gpu1", "--topology", "missing.txt"], {}, ["missing.txt", "cannot read"]),
    ],
    ids=[
        "empty",
        "malformed",
        "no-env",
        "empty-env",
        "stray-storage",
        "bad-name",
        "bad-regex",
        "regex-miss",
        "tasks",
        "topology-file",
    ],
)
def test_from_slurm_bad_input_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    env: dict[str, str],
    words: list[str],
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "from-slurm", *args)
    assert rc == 2
    assert out == ""
    for word in words:
        assert word in err


# -- from-hosts ---------------------------------------------------------------------------

HOSTFILE = """\
# compute nodes (MPI's slots= is ignored)
127.0.0.1  slots=8 role=compute rack=r1
localhost  role=compute rack=r1 port=18600   # trailing comment

10.9.0.[1-2] role=storage rack=r2 site=east
"""


def test_from_hosts_resolves_and_keeps_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hosts").write_text(HOSTFILE)
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "from-hosts", "hosts", "--token-file", "t")
    assert rc == 0, err
    assert _inv(tmp_path, out) == [
        ("127.0.0.1", "127.0.0.1", 18515, "compute", "r1"),
        ("localhost", "127.0.0.1", 18600, "compute", "r1"),
        ("10.9.0.1", "10.9.0.1", 18515, "storage", "r2"),
        ("10.9.0.2", "10.9.0.2", 18515, "storage", "r2"),
    ]
    inv = load_inventory(tmp_path / "generated.toml")
    assert inv.token_file == tmp_path / "t"
    assert inv.node("10.9.0.2").labels == {"site": "east"}
    assert inv.node("10.9.0.2").role is Role.STORAGE


def test_token_file_is_written_as_the_inventory_will_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: `--token-file tok --out sub/inv.toml` wrote token_file = "tok", which the
    inventory reads relative to sub/: check failed to find it."""
    (tmp_path / "hosts").write_text("127.0.0.1\n")
    (tmp_path / "sub").mkdir()
    args = ["from-hosts", "hosts", "--token-file", "tok", "--out", "sub/inv.toml"]
    rc, _, err = _cli(tmp_path, monkeypatch, capsys, *args)
    assert rc == 0, err
    assert 'token_file = "../tok"' in (tmp_path / "sub" / "inv.toml").read_text()
    token = load_inventory(tmp_path / "sub" / "inv.toml").token_file
    assert token is not None and token.resolve() == (tmp_path / "tok").resolve()


def test_from_hosts_out_file_and_no_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hosts").write_text("node-does-not-exist.invalid\n")
    rc, out, err = _cli(
        tmp_path, monkeypatch, capsys, "from-hosts", "hosts", "--no-resolve", "--out", "inv.toml"
    )
    assert rc == 0, err
    assert out == ""
    assert "inv.toml (1 nodes)" in err
    text = (tmp_path / "inv.toml").read_text()
    assert _inv(tmp_path, text) == [
        ("node-does-not-exist.invalid", "node-does-not-exist.invalid", 18515, "any", None)
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "localhost\nno-such-host.invalid\n",
            ["hosts: line 2", "'no-such-host.invalid'", "resolve"],
        ),
        ("# only a comment\n\n", ["hosts", "no hosts"]),
        ("localhost colour=blue\n", ["line 1", "unknown field 'colour'"]),
        ("localhost role\n", ["line 1", "key=value"]),
        ("localhost role=gpu\n", ["line 1", "unknown role 'gpu'"]),
        ("localhost port=99999\n", ["line 1", "port"]),
        ("127.0.0.1\n127.0.0.1\n", ["line 2", "appears twice", "line 1"]),
        ("gpu[01-\n", ["line 1", "bad hostlist"]),
        ("bad$name\n", ["line 1", "letters, digits"]),
    ],
    ids=["unknown-host", "empty", "field", "no-value", "role", "port", "dup", "hostlist", "name"],
)
def test_from_hosts_bad_input_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    words: list[str],
) -> None:
    (tmp_path / "hosts").write_text(text)
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "from-hosts", "hosts")
    assert rc == 2
    assert out == ""
    for word in words:
        assert word in err


def test_from_hosts_unreadable_file_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _cli(tmp_path, monkeypatch, capsys, "from-hosts", "missing-hosts")
    assert rc == 2
    assert "missing-hosts: cannot read" in err
    if os.geteuid() != 0:  # root reads any file
        (tmp_path / "locked").write_text("localhost\n")
        (tmp_path / "locked").chmod(0)
        rc, _, err = _cli(tmp_path, monkeypatch, capsys, "from-hosts", "locked")
        assert rc == 2
        assert "locked: cannot read" in err
        (tmp_path / "locked").chmod(stat.S_IRUSR | stat.S_IWUSR)


# -- from-k8s -----------------------------------------------------------------------------


def test_from_k8s_recorded_kubectl_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _cli(
        tmp_path,
        monkeypatch,
        capsys,
        "from-k8s",
        "--pods",
        str(K8S / "pods.json"),
        "--nodes",
        str(K8S / "nodes.json"),
    )
    assert rc == 0, err
    # The coredns pod does not match app=netqual-agent; control-1 runs no agent.
    assert _inv(tmp_path, out) == [
        ("gpu-node-a1", "10.20.1.11", 18515, "compute", "r1"),
        ("gpu-node-a2", "10.20.1.12", 18515, "compute", "r1"),
        ("stor-node-b1", "10.20.2.21", 18515, "storage", "r2"),
    ]
    inv = load_inventory(tmp_path / "generated.toml")
    assert inv.node("stor-node-b1").labels == {"site": "eu-west-1b", "region": "eu-west"}


def _edited(tmp_path: Path, name: str, edit: object) -> Path:
    data = json.loads((K8S / name).read_text())
    assert callable(edit)
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_from_k8s_port_label_and_selector_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def port(data: dict) -> None:  # type: ignore[type-arg]
        data["items"][0]["spec"]["containers"][0]["ports"][0]["containerPort"] = 19000

    pods = _edited(tmp_path, "pods.json", port)
    rc, out, err = _cli(
        tmp_path,
        monkeypatch,
        capsys,
        "from-k8s",
        "--pods",
        str(pods),
        "--nodes",
        str(K8S / "nodes.json"),
        "--selector",
        "app=netqual-agent,pod-template-generation!=2",
        "--rack-label",
        "topology.kubernetes.io/zone",
        "--role-label",
        "absent.example/role",
    )
    assert rc == 0, err
    assert _inv(tmp_path, out) == [
        ("gpu-node-a1", "10.20.1.11", 19000, "any", "eu-west-1a"),
        ("gpu-node-a2", "10.20.1.12", 18515, "any", "eu-west-1a"),
        ("stor-node-b1", "10.20.2.21", 18515, "any", "eu-west-1b"),
    ]


def _no_ip(data: dict) -> None:  # type: ignore[type-arg]
    del data["items"][1]["status"]["podIP"]
    data["items"][1]["status"]["phase"] = "Pending"


def _unscheduled(data: dict) -> None:  # type: ignore[type-arg]
    del data["items"][2]["spec"]["nodeName"]


def _unknown_node(data: dict) -> None:  # type: ignore[type-arg]
    data["items"][2]["spec"]["nodeName"] = "gone-node"


def _bad_ip(data: dict) -> None:  # type: ignore[type-arg]
    data["items"][0]["status"]["podIP"] = "10.20.1.11;reboot"


def _bad_role(data: dict) -> None:  # type: ignore[type-arg]
    data["items"][1]["metadata"]["labels"]["netqual.io/role"] = "gpu"


@pytest.mark.parametrize(
    ("pods_edit", "nodes_edit", "extra", "words"),
    [
        (_no_ip, None, [], ["pods.json", "items[1] (pod netqual-agent-7hx2m).status.podIP"]),
        (_unscheduled, None, [], ["pods.json", "items[2] (pod netqual-agent-b8r5t).spec.nodeName"]),
        (_unknown_node, None, [], ["nodes.json", "no node 'gone-node'"]),
        (None, _bad_role, [], ["nodes.json", "metadata.labels.netqual.io/role", "'gpu'"]),
        (_bad_ip, None, [], ["pods.json: items[0] (pod netqual-agent-4kz9q)", "address"]),
        (None, None, ["--selector", "app=nothing"], ["pods.json", "no pod matches"]),
        (None, None, ["--selector", "app in (a,b)"], ["--selector", "equality"]),
    ],
    ids=["no-ip", "unscheduled", "unknown-node", "bad-role", "bad-ip", "no-match", "set-selector"],
)
def test_from_k8s_bad_input_exits_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pods_edit: object,
    nodes_edit: object,
    extra: list[str],
    words: list[str],
) -> None:
    pods = _edited(tmp_path, "pods.json", pods_edit) if pods_edit else K8S / "pods.json"
    nodes = _edited(tmp_path, "nodes.json", nodes_edit) if nodes_edit else K8S / "nodes.json"
    rc, out, err = _cli(
        tmp_path,
        monkeypatch,
        capsys,
        "from-k8s",
        "--pods",
        str(pods),
        "--nodes",
        str(nodes),
        *extra,
    )
    assert rc == 2
    assert out == ""
    for word in words:
        assert word in err


def test_from_k8s_unreadable_and_half_given_files_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = str(K8S / "nodes.json")
    rc, _, err = _cli(
        tmp_path, monkeypatch, capsys, "from-k8s", "--pods", "nope.json", "--nodes", nodes
    )
    assert (rc, "nope.json: cannot read" in err) == (2, True)
    (tmp_path / "text.json").write_text("NAME READY\nnetqual-agent-4kz9q 1/1\n")
    rc, _, err = _cli(
        tmp_path, monkeypatch, capsys, "from-k8s", "--pods", "text.json", "--nodes", nodes
    )
    assert (rc, "text.json: not valid JSON" in err) == (2, True)
    (tmp_path / "obj.json").write_text('{"kind": "Pod"}')
    rc, _, err = _cli(
        tmp_path, monkeypatch, capsys, "from-k8s", "--pods", "obj.json", "--nodes", nodes
    )
    assert (rc, "obj.json: items" in err) == (2, True)
    rc, _, err = _cli(tmp_path, monkeypatch, capsys, "from-k8s", "--nodes", nodes)
    assert (rc, "both --pods and --nodes" in err) == (2, True)


def test_from_k8s_live_without_client_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in ("kubernetes", "kubernetes.client", "kubernetes.config"):
        monkeypatch.setitem(sys.modules, module, None)  # import -> ImportError
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "from-k8s", "--namespace", "netqual")
    assert rc == 2
    assert out == ""
    assert "netqual[k8s]" in err
    assert "--pods FILE --nodes FILE" in err
