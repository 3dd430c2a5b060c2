"""Regression tests for the attacks on the control channel (relay, impostors, starvation).

Each section is one attack on the control channel (docs/security.md); real agent processes,
real sockets.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from agentpool import AgentPool
from e2e_cli import netqual_here
from eventually import eventually
from peers import (
    SMALL,
    SMALL_CLI,
    Server,
    frame,
    node,
    run_cli,
    serving,
    write_inventory,
)

from netqual.agent.probe_request import request_probe
from netqual.agent.wire.handshake import PROTOCOL_VERSION, SessionKeys
from netqual.agent.wire.protocol import (
    FRAME_JSON,
    HEADER,
    MAGIC,
    Channel,
    connect,
    server_handshake,
)
from netqual.base.errors import IntegrityError, PeerError
from netqual.model.node import Node
from netqual.model.path import PathResult
from netqual.run.config import RunConfig
from netqual.run.pairprobe import measure_pair
from netqual.transports import TransportKind

RUN_SHORT = ["--allow-short-plan"]  # a test-sized plan, below the policy's min_samples


def relay_to(port: int) -> Callable[[socket.socket], None]:
    """A token-less byte forwarder to 127.0.0.1:port (the review's relay attack)."""

    def handle(conn: socket.socket) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as up:

            def pump(a: socket.socket, b: socket.socket) -> None:
                with contextlib.suppress(OSError):
                    while data := a.recv(65536):
                        b.sendall(data)
                with contextlib.suppress(OSError):
                    b.shutdown(socket.SHUT_WR)

            back = threading.Thread(target=pump, args=(up, conn), daemon=True)
            back.start()
            pump(conn, up)
            back.join(timeout=10)

    return handle


def hostile_hello(payload: bytes) -> Callable[[socket.socket], None]:
    """An impostor 'agent' that answers every connection with ``payload`` as its hello."""

    def handle(conn: socket.socket) -> None:
        conn.sendall(payload)
        conn.recv(65536)
        time.sleep(0.2)

    return handle


def hostile_welcome(welcome: bytes) -> Callable[[socket.socket], None]:
    """A plausible hello, then ``welcome`` whatever the client says."""
    hello = {"protocol": PROTOCOL_VERSION, "agent": "fake", "version": "0", "auth": "hmac-sha256"}
    hello_frame = frame(
        json.dumps({"kind": "hello", "body": {**hello, "nonce": "ab" * 32}}).encode()
    )

    def handle(conn: socket.socket) -> None:
        conn.sendall(hello_frame)
        conn.recv(65536)
        conn.sendall(welcome)
        time.sleep(0.2)

    return handle


# -- a relay gets nothing, and shows up on both sides ---------------------------
def test_relay_under_another_name_is_unsafe_and_refused_by_the_agent(
    agents: AgentPool, tmp_path: Path
) -> None:
    gpu01, gpu02 = agents.start_many([("gpu01",), ("gpu02", "--verbose")])
    with serving(relay_to(gpu02.port)) as relay:
        inventory = tmp_path / "inventory.toml"
        write_inventory(
            inventory, [("gpu01", gpu01.port), ("gpu02", gpu02.port), ("gpu03", relay.port)],
            agents.token_file,
        )  # fmt: skip
        stopped = run_cli(inventory, tmp_path / "stopped")
        done = run_cli(inventory, tmp_path / "out", "--keep-going")
    # By default the pre-flight check stops the run, naming the node that answered.
    assert stopped.returncode == 3, stopped.stderr
    assert "gpu03: the agent there is gpu02" in " ".join(stopped.stderr.split())
    # --keep-going: the relay's paths are measured as unsafe with the agent's refusal.
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in stopped.stderr + done.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    for p in doc["paths"]:
        if "gpu03" in (p["src"], p["dst"]):
            assert p["verdict"] == "unsafe"
            assert "dialled as 'gpu03' but this agent is 'gpu02'" in p["error"], p["error"]
        else:
            assert p["error"] is None, p["error"]
    said = "dialled as 'gpu03' but this agent is 'gpu02'"
    eventually(lambda: said in gpu02.stderr(), within_s=30, what=gpu02.stderr)
    assert "refused 127.0.0.1:" in gpu02.stderr()
    # No session was opened through the relay: every session the agent ran was gpu01's.
    assert "session" not in gpu02.stderr().replace("session 127.0.0.1", "")


def test_a_frame_injected_into_a_live_session_ends_it(agents: AgentPool, token: bytes) -> None:
    victim, peer = agents.start_many([("victim",), ("peer",)])
    ch, _ = connect("127.0.0.1", victim.port, token, "victim", 5, expect_name="victim")
    with ch:
        assert ch.request("info", reply="info")["name"] == "victim"
        ch.sock.sendall(frame(b'{"kind":"info","body":{}}') + b"\x00" * 32)
        with pytest.raises(PeerError, match="integrity check") as info:
            ch.expect("info")
        assert info.value.code == "protocol"
    eventually(
        lambda: "failed its integrity check" in victim.stderr(), within_s=30, what=victim.stderr
    )
    # And the other way: an agent's frame altered on the way is caught by the client.
    ch, _ = connect("127.0.0.1", victim.port, token, "victim", 5, expect_name="victim")
    with ch:
        keys = ch._keys
        assert keys is not None
        ch.use_keys(SessionKeys(send=keys.send, recv=b"\x00" * 32))
        with pytest.raises(IntegrityError):
            ch.request("info", reply="info")
    out = request_probe(node(victim), node(peer), TransportKind.TCP, SMALL, token, timeout_s=30)
    assert len(out.raw.rtt_ns) == SMALL.iterations


# -- nothing an impostor sends in the handshake crashes `run` -------------------
def test_impostor_agents_with_garbage_handshakes_make_unsafe_paths_not_tracebacks(
    agents: AgentPool, tmp_path: Path
) -> None:
    a, b = agents.start_many([("a",), ("b",)])
    huge = b'{"kind":"hello","body":{"protocol":' + b"9" * 5000 + b"}}"
    behaviours = {
        "nonascii-mac": hostile_welcome(frame(b'{"kind":"welcome","body":{"mac":"\\u00e9"}}')),
        "huge-int": hostile_hello(frame(huge)),
        "nan": hostile_hello(frame(b'{"kind":"hello","body":{"protocol":NaN}}')),
        "garbage": hostile_hello(b"\xff" * 64),
        "mac-list": hostile_welcome(frame(b'{"kind":"welcome","body":{"mac":[1,2]}}')),
    }  # fmt: skip
    with contextlib.ExitStack() as stack:
        servers = {k: stack.enter_context(serving(h)) for k, h in behaviours.items()}
        inventory = tmp_path / "inventory.toml"
        nodes = [("a", a.port), ("b", b.port)] + [(k, s.port) for k, s in servers.items()]
        write_inventory(inventory, nodes, agents.token_file)
        stopped = run_cli(inventory, tmp_path / "stopped")
        done = run_cli(inventory, tmp_path / "out", "--keep-going")
    assert stopped.returncode == 3, stopped.stderr  # the pre-flight check names them
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout + stopped.stderr + stopped.stdout
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    for p in doc["paths"]:
        if {p["src"], p["dst"]} == {"a", "b"}:
            assert p["error"] is None, p["error"]
        else:
            assert p["verdict"] == "unsafe" and p["error"]


# -- pre-auth connections cannot starve authenticated ones ----------------------
def test_64_slow_loris_connections_do_not_starve_a_probe(agents: AgentPool, token: bytes) -> None:
    victim, peer = agents.start_many(
        [("victim", "--max-sessions", "4", "--auth-timeout", "2"), ("peer",)]
    )
    stop = threading.Event()
    opened = [0]

    def loris() -> None:
        """Hold one unauthenticated connection open, trickling; reopen it when dropped."""
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", victim.port), timeout=2) as s:
                    opened[0] += 1
                    s.sendall(HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, 100)[:3])
                    s.settimeout(0.5)
                    while not stop.is_set():
                        try:
                            if s.recv(65536) == b"":
                                break  # dropped by the agent: reconnect at once
                        except TimeoutError:
                            continue
            except OSError:
                time.sleep(0.05)

    threads = [threading.Thread(target=loris, daemon=True) for _ in range(64)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        t0 = time.monotonic()
        for _ in range(3):  # several probes, each while 64 connections are held
            out = request_probe(
                node(victim), node(peer), TransportKind.TCP, SMALL, token, timeout_s=30
            )
            assert len(out.raw.rtt_ns) == SMALL.iterations
            out = request_probe(
                node(peer), node(victim), TransportKind.TCP, SMALL, token, timeout_s=30
            )
            assert out.responder_agent == "victim"
        assert time.monotonic() - t0 < 120  # only catches a hang
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
    assert opened[0] >= 64
    assert victim.alive() and "Traceback" not in victim.stderr()


def test_probe_name_at_address_checks_the_identity(agents: AgentPool) -> None:
    a, b = agents.start_many([("gpu01",), ("gpu02",)])
    base = ["probe", "--token-file", str(agents.token_file)]

    def probe(src: str, dst: str) -> subprocess.CompletedProcess[str]:
        return netqual_here(*base, src, dst, *SMALL_CLI, "--json")

    good = probe(f"gpu01@127.0.0.1:{a.port}", f"gpu02@127.0.0.1:{b.port}")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["src"] == "gpu01"
    wrong = probe(f"gpu01@127.0.0.1:{a.port}", f"gpu09@127.0.0.1:{b.port}")
    assert wrong.returncode == 3
    path = json.loads(wrong.stdout)
    assert path["verdict"] == "unsafe"
    assert "dialled as 'gpu09' but this agent is 'gpu02'" in path["error"]


# -- unvalidated peer values never reach "internal" -------------------------------
@pytest.mark.parametrize(
    "payload",
    [
        b'{"kind":"probe","body":{"peer":{"address":"127.0.0.1","port":1},"plan":{"timeout_s":NaN}}}',
        b'{"kind":"probe","body":{"plan":{"timeout_s":Infinity}}}',
        b'{"kind":"tcp.pingpong","body":{"size_bytes":' + b"9" * 4400 + b',"count":1}}',
        b'{"kind":"probe","body":{"peer":{"address":"127.0.0.1","port":1e400}}}',
        b'{"kind":"probe","body":{"peer":{"address":"127.0.0.1","port":1},"plan":{"timeout_s":1e400}}}',
    ],
)
def test_hostile_values_after_auth_are_protocol_errors(
    agents: AgentPool, token: bytes, payload: bytes
) -> None:
    victim = agents.start("victim")
    ch, _ = connect("127.0.0.1", victim.port, token, "victim", 5, expect_name="victim")
    with ch:
        ch._send_frame(FRAME_JSON, payload)
        with pytest.raises(PeerError) as info:
            ch.expect("never")
        assert info.value.code in ("protocol", "bad-request"), info.value
    assert "Traceback" not in victim.stderr() and "internal" not in victim.stderr()
    ch, _ = connect("127.0.0.1", victim.port, token, "victim", 5, expect_name="victim")
    with ch:
        assert ch.request("info", reply="info")["name"] == "victim"


class FakeAgent:
    """Authenticates properly, then answers a probe with ``result`` (a raw JSON body)."""

    def __init__(self, token: bytes, result: bytes) -> None:
        self.token, self.result = token, result
        self.server = Server(self.handle)

    def handle(self, conn: socket.socket) -> None:
        ch = Channel(conn, "coordinator")
        server_handshake(ch, self.token, "liar", "0")
        ch.recv()
        ch._send_frame(FRAME_JSON, b'{"kind":"probe.result","body":' + self.result + b"}")
        ch.send_bytes(b"\x00" * 8)
        time.sleep(0.5)


@pytest.mark.parametrize(
    "result",
    [
        b'{"rtt_count":NaN}',
        b'{"rtt_count":' + b"7" * 5000 + b"}",
        b'{"rtt_count":1,"responder_agent":"x","bulk":"lots"}',
        b'{"rtt_count":1,"responder_agent":"x","bulk":[{"chunk_bytes":"x"}]}',
        b'{"rtt_count":1,"responder_agent":"x","hops":-3}',
        b'{"rtt_count":1,"responder_agent":"x","details":[1]}',
        b'{"rtt_count":1,"responder_agent":"x","details":{"peer":{"port":"x"}}}',
        b'{"rtt_count":1,"responder_agent":"x","warmup_discarded":1e400}',
        b'{"rtt_count":2,"responder_agent":"x"}',
        b"[]",
    ],
)
def test_coordinator_turns_any_lie_into_an_unsafe_path(result: bytes) -> None:
    token = b"liar-token-" + b"0123456789abcdef" * 2
    fake = FakeAgent(token, result)
    try:
        src = Node(name="liar", address="127.0.0.1", port=fake.server.port)
        dst = Node(name="other", address="127.0.0.1", port=9)
        cfg = RunConfig(nodes=(src, dst), plan=SMALL, token=token)
        path = measure_pair(src, dst, cfg)
    finally:
        fake.server.close()
    assert isinstance(path, PathResult)  # a network failure, not a configuration one
    assert path.verdict.value == "unsafe"
    assert path.error and "liar" in path.error
