"""Inventory generators validate what they are given before anything is written: user text
in the header comment cannot inject a [[node]], a --rack-from regex cannot hang the
command, and the node count is capped unless --max-nodes says otherwise. And the agent's
UDP hop responder cannot be used as an amplifier."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from agentpool import AgentPool
from launch_cli import _cli, _inv

from netqual.agent.wire import hops

INJECTION = '\n[[node]]\nname = "evil"\naddress = "198.51.100.7"\n'


def test_a_newline_in_the_hostfile_path_cannot_inject_a_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hostfile = tmp_path / f"hosts{INJECTION}"
    hostfile.write_text("gpu01\ngpu02\n")
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, "from-hosts", str(hostfile), "--no-resolve")
    assert rc == 0, err
    assert [n[0] for n in _inv(tmp_path, out)] == ["gpu01", "gpu02"]
    assert out.splitlines()[0].startswith("# Written by netqual inventory: hostfile ")
    assert "\\x0a[[node]]\\x0aname" in out.splitlines()[0]  # visible, inside the comment


def test_a_regex_comment_cannot_inject_a_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rack_from = f"^(r[0-9]+)(?#{INJECTION})"
    args = ["from-slurm", "--nodelist", "r1n1,r2n1", "--rack-from", rack_from]
    rc, out, err = _cli(tmp_path, monkeypatch, capsys, *args, "--topology", "/dev/null")
    assert rc == 0, err
    assert [(n[0], n[4]) for n in _inv(tmp_path, out)] == [("r1n1", "r1"), ("r2n1", "r2")]


def test_a_catastrophic_regex_is_stopped_not_hung(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["from-slurm", "--nodelist", "a" * 40 + "c[1-3]", "--rack-from", "^(a+)+b$"]
    t0 = time.monotonic()
    rc, _, err = _cli(tmp_path, monkeypatch, capsys, *args, "--topology", "/dev/null")
    took = time.monotonic() - t0
    assert rc == 2 and "--rack-from: '^(a+)+b$' took over 2 s" in err, err
    assert took < 15  # 2^40 steps would take hours; the child is killed at 2 s


def test_the_node_count_is_capped_unless_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    big = ",".join(f"n{k}x[0-99999]" for k in range(3))  # 300,000 nodes
    rc, _, err = _cli(tmp_path, monkeypatch, capsys, "from-slurm", "--nodelist", big)
    assert rc == 2 and "more than 10,000 nodes; pass --max-nodes N" in err, err
    small = ["from-slurm", "--nodelist", "gpu[1-4]", "--topology", "/dev/null"]
    rc, _, err = _cli(tmp_path, monkeypatch, capsys, *small, "--max-nodes", "3")
    assert rc == 2 and "more than 3 nodes" in err
    rc, out, _ = _cli(tmp_path, monkeypatch, capsys, *small, "--max-nodes", "4")
    assert rc == 0 and len(_inv(tmp_path, out)) == 4
    hostfile = tmp_path / "hosts"
    hostfile.write_text("gpu[1-4]\n")
    rc, _, err = _cli(
        tmp_path, monkeypatch, capsys, "from-hosts", str(hostfile), "--max-nodes", "2"
    )
    assert rc == 2 and "more than 2 nodes" in err  # before any name is resolved


def test_the_hop_responder_never_answers_with_more_bytes_than_it_got(
    agents: AgentPool,
) -> None:
    """A spoofed source gets at most what the spoofer sent: a reply is exactly as long as
    its request, and a request of any other shape gets nothing."""
    (agent,) = agents.start_many([("gpu01",)])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.5)
        s.connect(("127.0.0.1", agent.port))
        for request in (hops.MAGIC + b"n" * 16, b"x" * 21, hops.MAGIC + b"n" * 16 + b"\0" * 40):
            s.send(request)  # the old 20-byte shape, a wrong magic, a long request
            with pytest.raises(TimeoutError):
                s.recv(100)
        request = hops.MAGIC + b"n" * 16 + b"\0"
        s.send(request)
        reply = s.recv(100)
        assert len(reply) == len(request) == 21 and reply[:-1] == request[:-1]
    found = hops.measure("127.0.0.1", agent.port)
    assert found is not None and found.hops == 1  # loopback: directly connected
