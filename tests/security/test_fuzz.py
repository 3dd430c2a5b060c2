"""Structured fuzzing of the control protocol, both ways (Hypothesis, bounded).

Agent side: every message kind, before and after authentication, with fields replaced by
hostile values (huge and negative integers, NaN, infinities, NUL, lone surrogates, wrong
types), deleted, or joined by unknown ones. The agent must answer with a protocol error
(never "internal"), stay up, serve a legitimate probe afterwards, and return to its
thread and file-descriptor baseline. Coordinator side: a fake agent answers the handshake
and the probe with mutated messages; the coordinator must raise a NetqualError (which
``run`` turns into an unsafe path), never anything else.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool, AgentProc, new_token_file
from eventually import eventually
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from netqual.agent.probe_request import request_probe
from netqual.agent.requests import REQUESTS
from netqual.agent.wire.handshake import PROTOCOL_VERSION, ClientHandshake
from netqual.agent.wire.protocol import (
    FRAME_JSON,
    Channel,
    client_handshake,
    connect,
    server_handshake,
)
from netqual.base.errors import NetqualError
from netqual.model.node import Node
from netqual.model.plan import ProbePlan
from netqual.run import preflight
from netqual.transports import TransportKind

EXAMPLES = 40  # per test; each example is one real session with the agent
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # a loaded CI machine is slow, not wrong
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,  # the same cases every run: a failure is reproducible
)
SMALL = ProbePlan(iterations=200, warmup=20, chunks_bytes=(65536,), depths=(1,), timeout_s=20)
ANSWERS = {"protocol", "bad-request", "limit", "busy", "auth", "peer-unreachable",
           "peer-protocol", "probe-failed", "unavailable", "rdma"}  # fmt: skip

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=10**300, max_value=10**4000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["\ud800", "\x00", "a" * 5000, "=cmd|' /C calc'!A0", "127.0.0.1\x00", ""]),
    st.lists(st.integers(min_value=-5, max_value=2**40), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
)

PEER = {"name": "peer", "address": "127.0.0.1", "port": 1}
PLAN = {"iterations": 10, "warmup": 0, "size_bytes": 64, "chunks_bytes": [4096], "depths": [1],
        "bulk": False, "timeout_s": 2}  # fmt: skip
CONNINFO = {"qpn": 1, "psn": 0, "lid": 0, "gid": "fe80:0000:0000:0000:0000:0000:0000:0001",
            "gid_index": 0, "gid_type": "RoCE v2", "link_layer": "Ethernet", "mtu": 3,
            "rkey": "0x1", "addr": "0x1000", "length": 4096, "recv_offset": 0,
            "bulk_offset": 0, "bulk_bytes": 0, "max_rd_atomic": 1,
            "max_dest_rd_atomic": 1}  # fmt: skip
VALID: dict[str, dict[str, Any]] = {
    "info": {},
    "doctor": {},
    "probe": {"peer": PEER, "transport": "tcp", "plan": PLAN, "hops": False},
    "tcp.pingpong": {"size_bytes": 64, "count": 10, "timeout_s": 1},
    "tcp.bulk": {"chunk_bytes": 4096, "reads": 2, "depth": 1, "timeout_s": 1},
    "rdma.connect": {"plan": {"iterations": 1, "warmup": 0, "size_bytes": 64, "chunks_bytes": [],
                              "depths": [], "reads": []}, "conninfo": CONNINFO, "deadline_s": 1,
                     "nonce": "00" * 16},
    "rdma.close": {},
    "snapshot": {},
    "hostpath": {},
    "nics": {},
    "reach": {"addresses": ["127.0.0.1"]},
    "counters.begin": {"tcp": False},
    "counters.end": {},
    "nonsense.kind": {},
}  # fmt: skip
# Request kinds not fuzzed here, and why (every other kind of the registry is)
NOT_FUZZED = {
    kind: "starts engine worker processes; its body is refused by field before any worker "
    "starts (tests/unit/agent/test_engine_requests.py)"
    for kind in ("engines", "engine.target", "engine.initiate")
}


def test_every_request_kind_the_agent_serves_is_fuzzed_with_its_own_fields() -> None:
    """The agent's registry (netqual.agent.requests) decides what is fuzzed: a new kind
    fails here until it has a valid body above, or a reason not to."""
    served = set(REQUESTS)
    assert served - set(NOT_FUZZED) == set(VALID) - {"nonsense.kind"}
    assert set(NOT_FUZZED) <= served
    for kind, body in VALID.items():
        if kind in REQUESTS:
            assert set(body) <= set(REQUESTS[kind].fields), kind


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with 1-3 mutations anywhere in its nested objects."""
    body = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        target = body
        while True:  # walk down into a nested object now and then
            nested = [k for k, v in target.items() if isinstance(v, dict)]
            if not nested or draw(st.booleans()):
                break
            target = target[draw(st.sampled_from(nested))]
        keys = sorted(target)
        op = draw(st.sampled_from(["replace", "delete", "add"] if keys else ["add"]))
        if op == "replace":
            target[draw(st.sampled_from(keys))] = draw(HOSTILE)
        elif op == "delete":
            del target[draw(st.sampled_from(keys))]
        else:
            target[draw(st.text(min_size=1, max_size=8))] = draw(HOSTILE)
    return body


def payload(kind: str, body: object) -> bytes:
    return json.dumps({"kind": kind, "body": body}).encode()  # NaN/Infinity as JS literals


def _proc_counts(pid: int) -> tuple[int, int]:
    threads = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("Threads:")
    )
    return threads, len(os.listdir(f"/proc/{pid}/fd"))


Victim = tuple[AgentProc, AgentProc, bytes]


@pytest.fixture(scope="module")
def fuzzed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AgentProc, AgentProc, bytes]]:
    workdir = tmp_path_factory.mktemp("fuzz")
    token_file = new_token_file(workdir)
    pool = AgentPool(workdir, token_file)
    try:
        victim, peer = pool.start_many([("victim", "--auth-timeout", "2"), ("peer",)])
        token = token_file.read_bytes().strip()
        _legit_probe(victim, peer, token)  # warm: lazy imports and threads exist now
        yield victim, peer, token
    finally:
        pool.close()


def _legit_probe(victim: AgentProc, peer: AgentProc, token: bytes) -> None:
    src = Node(name="victim", address="127.0.0.1", port=victim.port)
    dst = Node(name="peer", address="127.0.0.1", port=peer.port)
    out = request_probe(src, dst, TransportKind.TCP, SMALL, token, timeout_s=60)
    assert len(out.raw.rtt_ns) == SMALL.iterations


def _answer(ch: Channel) -> dict[str, Any] | None:
    """The agent's reply to one fuzzed request: its error body, or None for a normal reply
    or a closed connection."""
    ch.set_timeout(15)
    try:
        msg = ch.recv()
        if msg.kind == "rdma.accepted":  # checked; what follows is the device's answer
            msg = ch.recv()
    except (NetqualError, OSError):
        return None
    return msg.body if msg.kind == "error" else None


@pytest.mark.parametrize("kind", sorted(VALID))
def test_fuzzed_requests_after_auth(fuzzed: Victim, kind: str) -> None:
    victim, peer, token = fuzzed

    @FUZZ
    @given(body=mutated(VALID[kind]))
    def one(body: dict[str, Any]) -> None:
        ch, _ = connect("127.0.0.1", victim.port, token, "victim", 10, expect_name="victim")
        with ch:
            ch._send_frame(FRAME_JSON, payload(kind, body))
            error = _answer(ch)
            if error is not None:
                assert error.get("code") in ANSWERS, (kind, body, error)

    one()
    _check_agent(victim, peer, token)


@pytest.mark.parametrize("kind", ["auth", "probe", "hello", "welcome"])
def test_fuzzed_messages_before_auth(fuzzed: Victim, kind: str) -> None:
    victim, peer, token = fuzzed
    base = {"nonce": "ab" * 32, "name": "victim", "mac": "cd" * 32}

    @FUZZ
    @given(body=mutated(base))
    def one(body: dict[str, Any]) -> None:
        with socket.create_connection(("127.0.0.1", victim.port), timeout=10) as s:
            ch = Channel(s, "victim")
            ch.set_timeout(10)
            assert ch.recv().kind == "hello"
            ch._send_frame(FRAME_JSON, payload(kind, body))
            error = _answer(ch)
            assert error is not None and error.get("code") in {
                "auth",
                "protocol",
                "limit",
                "bad-request",
            }, (
                kind,
                body,
                error,
            )

    one()
    _check_agent(victim, peer, token)


def _check_agent(victim: AgentProc, peer: AgentProc, token: bytes) -> None:
    """Up, no traceback, serves a probe, and back to its thread/fd baseline."""
    assert victim.alive()
    log = victim.stderr()
    assert "Traceback" not in log and "internal error" not in log, log[-2000:]
    _legit_probe(victim, peer, token)

    # Baseline: main, hop responder and at most a session draining; listener, UDP socket,
    # wake pipe, selector, stdio and the log: a dozen descriptors (sessions may still close).
    def at_baseline() -> bool:
        threads, fds = _proc_counts(victim.proc.pid)
        return threads <= 4 and fds <= 12

    eventually(
        at_baseline,
        within_s=20,
        every_s=0.2,
        what=lambda: (
            f"(threads, fds) {_proc_counts(victim.proc.pid)} back to at most (4, 12); "
            f"descriptors: {os.listdir(f'/proc/{victim.proc.pid}/fd')}"
        ),
    )


# -- the coordinator against a fake agent ---------------------------------------------------
TOKEN = b"fuzz-token-" + bytes.fromhex("9f2c7e1d5b3a8064e4f1a7c0b9d2386e")
HELLO = {
    "protocol": PROTOCOL_VERSION,
    "agent": "liar",
    "version": "0",
    "auth": "hmac-sha256",
    "nonce": "ab" * 32,
}
RESULT = {"responder_agent": "other", "warmup_discarded": 20, "rtt_count": 1, "hops": 1,
          "forward_hops": None, "details": {"tcp_nodelay": True},
          "bulk": [{"chunk_bytes": 65536, "depth": 1, "reads": 1, "elapsed_ns": 5,
                    "error": None}]}  # fmt: skip


def _fake_agent(behaviour: str, body: dict[str, Any]) -> tuple[int, threading.Thread]:
    lst = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with lst:
            lst.settimeout(10)
            try:
                conn, _ = lst.accept()
            except OSError:
                return
            with conn:
                ch = Channel(conn, "coordinator")
                ch.set_timeout(10)
                try:
                    if behaviour == "hello":
                        ch._send_frame(FRAME_JSON, payload("hello", body))
                        ch.recv()
                        return
                    server_handshake(ch, TOKEN, "liar", "0")
                    ch.recv()
                    ch._send_frame(FRAME_JSON, payload(behaviour, body))
                    for _ in range(2):
                        ch.send_bytes(b"\x01" * 8)
                    ch.recv()
                except (NetqualError, OSError):
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return lst.getsockname()[1], t


INFO = {"name": "liar", "version": "0", "pid": 1, "host": "h", "transports": ["tcp", "rdma"],
        "limits": {}, "time_ns": 1_700_000_000_000_000_000}  # fmt: skip


def test_preflight_against_a_fuzzed_info_reply() -> None:
    """``check`` and ``run``'s first step read the agent's info: a row, never a crash."""

    @settings(FUZZ, max_examples=100)
    @given(body=mutated(INFO))
    @example(body={**INFO, "time_ns": "soon"})
    @example(body={**INFO, "time_ns": 10**400})
    @example(body={**INFO, "transports": [1, None]})
    def one(body: dict[str, Any]) -> None:
        port, t = _fake_agent("info", body)
        node = Node(name="liar", address="127.0.0.1", port=port)
        row = preflight.check_node(node, TOKEN, "rdma", timeout_s=10)
        assert row.node == "liar"
        t.join(15)
        assert not t.is_alive(), "the fuzzed agent's thread did not finish"

    one()


@pytest.mark.parametrize("behaviour", ["hello", "probe.result"])
def test_coordinator_against_a_fuzzed_agent(behaviour: str) -> None:
    base = HELLO if behaviour == "hello" else RESULT

    @settings(FUZZ, max_examples=100)
    @given(body=mutated(base))
    def one(body: dict[str, Any]) -> None:
        port, t = _fake_agent(behaviour, body)
        src = Node(name="liar", address="127.0.0.1", port=port)
        dst = Node(name="other", address="127.0.0.1", port=9)
        # A NetqualError is what run turns into an unsafe path; anything else fails.
        with contextlib.suppress(NetqualError):
            request_probe(src, dst, TransportKind.TCP, SMALL, TOKEN, timeout_s=10)
        t.join(15)
        assert not t.is_alive(), "the fuzzed agent's thread did not finish"

    one()


def test_client_handshake_survives_any_hello_body() -> None:
    """No socket: ClientHandshake alone, the fastest way through many hostile hellos."""

    @settings(FUZZ, max_examples=300)
    @given(body=mutated(HELLO))
    def one(body: dict[str, Any]) -> None:
        with contextlib.suppress(NetqualError):
            ClientHandshake(TOKEN, "liar").auth(json.loads(json.dumps(body)), "liar")

    one()


def test_client_handshake_over_a_socket_pair() -> None:
    """A sanity check that the fuzz harness can succeed: the unmutated hello passes."""
    a, b = socket.socketpair()
    ca, cb = Channel(a, "agent"), Channel(b, "client")
    t = threading.Thread(target=server_handshake, args=(ca, TOKEN, "liar", "0"))
    t.start()
    hello = client_handshake(cb, TOKEN, "liar")
    t.join(5)
    assert not t.is_alive()
    assert hello.agent == "liar"
    a.close()
    b.close()
