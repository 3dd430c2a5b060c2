"""Authenticated measurements: nobody on the path can answer the timed traffic for a node.

Unit tests drive the TCP transport over a socket pair against a forging peer; the end to
end test puts a real forging proxy process (tests/support/forging_proxy.py) at a node's address.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from agentpool import AgentPool, cli_env
from eventually import eventually
from paths import SUPPORT
from peers import SMALL, node, run_cli, write_inventory
from sockets import _tcp_pair

from netqual.agent.wire.protocol import Channel
from netqual.model.node import Node
from netqual.model.path import PathResult
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.verdict import Verdict
from netqual.run.config import RunConfig
from netqual.run.pairprobe import measure_pair
from netqual.transports.integrity import (
    IntegrityFailure,
    Rounds,
    miss_probability,
    reversed_blocks,
)
from netqual.transports.interface import AgentLimits
from netqual.transports.tcp import TcpTransport

PROXY = SUPPORT / "forging_proxy.py"
INTEGRITY = "measurement integrity check failed"


Serve = Callable[[Channel, str, dict[str, object]], None]


def _peer(ch: Channel, serve: Serve) -> threading.Thread:
    def run() -> None:
        try:
            while (msg := ch.recv()).kind != "bye":
                serve(ch, msg.kind, msg.body)
        except Exception:  # the initiator hung up: the test looks at the initiator
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _honest(ch: Channel, kind: str, body: dict[str, object]) -> None:
    TcpTransport().respond(ch, kind, body, AgentLimits())


def _forger(ch: Channel, kind: str, body: dict[str, object]) -> None:
    """Accepts like an agent, then echoes pings / sends zero chunks, and claims to have
    received whatever the initiator says it sent."""
    ch.send("ok")
    if kind == "tcp.pingpong":
        size = int(str(body["size_bytes"]))
        for _ in range(int(str(body["count"]))):
            ch.send_all(ch.recv_exact(size))
    else:
        chunk = int(str(body["chunk_bytes"]))
        for _ in range(int(str(body["reads"]))):
            ch.recv_exact(8)
            ch.send_all(bytes(chunk))
    end = ch.recv()
    ch.send("ok", {"received": end.body["sent"]})


PLAN = ProbePlan(
    iterations=200, warmup=10, size_bytes=64, chunks_bytes=(4096,), depths=(2,),
    bulk_bytes=256 * 1024,
)  # fmt: skip


@pytest.mark.parametrize("size_bytes", [1, 5, 64, 1000])
def test_an_honest_responder_passes_every_message_size(size_bytes: int) -> None:
    initiator, responder = _tcp_pair()
    _peer(responder, _honest)
    plan = ProbePlan(
        iterations=50, warmup=5, size_bytes=size_bytes, chunks_bytes=(1, 3, 4096),
        depths=(1,), bulk_bytes=8192,
    )  # fmt: skip
    raw = TcpTransport().initiate(initiator, plan, time.monotonic() + 20, "127.0.0.1")
    assert len(raw.rtt_ns) == 50
    assert [len(b.completion_ns) for b in raw.bulk] == [8192, 2730, 32]
    initiator.send("bye")


@pytest.mark.parametrize("phase", ["ping-pong replies", "bulk chunks"])
def test_a_peer_without_the_key_that_answers_itself_fails_the_integrity_check(
    phase: str,
) -> None:
    initiator, responder = _tcp_pair()
    if phase == "ping-pong replies":
        _peer(responder, _forger)
    else:  # honest ping-pong, forged bulk
        _peer(responder, lambda ch, k, b: (_honest if k == "tcp.pingpong" else _forger)(ch, k, b))
    failed = f"of [0-9]+ {phase} did not carry .*'s session-key tag"
    with pytest.raises(IntegrityFailure, match=failed):
        TcpTransport().initiate(initiator, PLAN, time.monotonic() + 20, "127.0.0.1")


def test_round_windows_reveal_only_past_rounds() -> None:
    """What follows round i's block in its message is earlier rounds' blocks, never a later
    one (a forger reading a ping must not learn the next challenge or tag)."""
    blocks = bytes(range(40))  # 5 rounds of 8
    r = Rounds(5, 24, blocks)
    for i in range(5):
        window = bytes(r.send_window(i))
        assert window[:8] == blocks[i * 8 : i * 8 + 8]
        later = {blocks[j * 8 : j * 8 + 8] for j in range(i + 1, 5)}
        assert not any(window[k : k + 8] in later for k in range(0, 24, 8))
    assert reversed_blocks(reversed_blocks(blocks, 8), 8) == blocks


def test_every_round_is_bound_to_the_key() -> None:
    """A forger that answers rounds itself must guess each one's tag: the miss probability
    the docs derive (docs/security.md, "Tail forgery")."""
    assert miss_probability(8, 1) == 2.0**-64
    assert miss_probability(1, 3) < 1e-6 < miss_probability(1, 2)  # a 1-byte message
    assert miss_probability(0, 100) == 1.0  # nothing to tag: nothing claimed


# -- a real forging proxy process in front of a node ---------------------------------------
@contextmanager
def proxy(upstream_port: int, mode: str, *extra: str) -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, str(PROXY), str(upstream_port), mode, *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=cli_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        yield int(line.rsplit(":", 1)[1])
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_forging_proxy_cannot_make_its_path_offload_safe(
    agents: AgentPool, tmp_path: Path
) -> None:
    gpu01, gpu02, gpu03 = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    with proxy(gpu02.port, "forge") as port:
        inventory = tmp_path / "inventory.toml"
        nodes = [("gpu01", gpu01.port), ("gpu02", port), ("gpu03", gpu03.port)]
        write_inventory(inventory, nodes, agents.token_file)
        done = run_cli(inventory, tmp_path / "out", "--keep-going")
    assert "Traceback" not in done.stderr, done.stderr
    doc = json.loads((tmp_path / "out/results.json").read_text())
    paths = {(p["src"], p["dst"]): p for p in doc["paths"]}
    to_gpu02 = [p for (src, dst), p in paths.items() if dst == "gpu02"]
    assert to_gpu02, sorted(paths)
    for forged in to_gpu02:  # measured through the proxy
        assert forged["verdict"] == "unsafe"
        assert INTEGRITY in forged["error"], forged["error"]
        assert "ping-pong replies did not carry" in forged["error"]
    assert INTEGRITY in " ".join(done.stdout.split()), done.stdout
    # Paths not measured into the proxy are judged normally in the same run.
    others = [p for (src, dst), p in paths.items() if dst != "gpu02"]
    assert others and all(p["error"] is None for p in others), others
    # Both agents logged it: the initiator its failed check, the responder the initiator's.
    initiator = next(a for a in (gpu01, gpu03) if a.name == to_gpu02[0]["src"])
    eventually(lambda: INTEGRITY in initiator.stderr(), within_s=30, what=initiator.stderr)
    eventually(
        lambda: "ping-pong integrity check failed" in gpu02.stderr(),
        within_s=30,
        what=gpu02.stderr,
    )


def test_the_same_proxy_relaying_honestly_is_measured_normally(
    agents: AgentPool, token: bytes
) -> None:
    """Control for the test above: the proxy itself is transparent, only forging fails."""
    gpu01, gpu02 = agents.start_many([("gpu01",), ("gpu02",)])
    with proxy(gpu02.port, "relay") as port:
        behind = Node(name="gpu02", address="127.0.0.1", port=port)
        cfg = RunConfig(nodes=(node(gpu01), behind), plan=SMALL, token=token)
        path = measure_pair(node(gpu01), behind, cfg)
    assert isinstance(path, PathResult) and path.error is None, path
    assert path.rtt is not None and path.rtt.samples == SMALL.iterations
    assert INTEGRITY not in gpu01.stderr() + gpu02.stderr()


# The tail forger: a path whose slowest 2% of rounds take 20 ms more (its p99 is >= 20 ms,
# unsafe); the proxy relays every other round and answers the slow ones itself at once.
# 1,020 rounds (20 warm-up; 1,000 kept is the fewest a p99 is trusted with): 20 forged per
# run. The old sampled tags (about one round in 64 at this size) missed all 20 with
# probability ~0.73; every round tagged, a forged round passes only by guessing its 8 tag
# bytes: 2**(-64*20) per run, so 20 runs stay below 1e-380 if nothing else breaks it.
TAIL_PLAN = ProbePlan(iterations=1000, warmup=20, bulk=False, timeout_s=30)
TAIL_POLICY = Policy(safe_max_us=10_000, unsafe_above_us=15_000, min_samples=1000)


def _tail_probe(agents: AgentPool, token: bytes, mode: str, runs: int) -> list[PathResult]:
    gpu01, gpu02 = agents.start_many([("gpu01",), ("gpu02",)])
    paths: list[PathResult] = []
    with proxy(gpu02.port, mode, "--tail", "2", "--delay-ms", "20") as port:
        behind = Node(name="gpu02", address="127.0.0.1", port=port)
        cfg = RunConfig(
            nodes=(node(gpu01), behind), plan=TAIL_PLAN, token=token, policy=TAIL_POLICY
        )
        for _ in range(runs):
            measured = measure_pair(node(gpu01), behind, cfg)
            assert isinstance(measured, PathResult), measured  # both agents answer: measured
            paths.append(measured)
    return paths


def test_forging_only_the_slow_tail_never_makes_a_path_offload_safe(
    agents: AgentPool, token: bytes
) -> None:
    paths = _tail_probe(agents, token, "forge", 20)
    verdicts = [p.verdict for p in paths]
    assert verdicts.count(Verdict.SAFE) == 0, verdicts
    caught = [p for p in paths if p.error and "ping-pong replies did not carry" in p.error]
    for p in paths:  # caught, or (a loaded host) a probe that failed outright: never judged
        assert p.verdict is Verdict.UNSAFE
        assert p in caught or p.rtt is None, p.error
    assert len(caught) >= 10, [p.error for p in paths]


def test_the_slow_tail_relayed_honestly_is_unsafe_by_its_p99(
    agents: AgentPool, token: bytes
) -> None:
    """Control: the tail the forger hides is real (p99 >= 20 ms), and relaying is clean."""
    (path,) = _tail_probe(agents, token, "relay", 1)
    assert path.error is None, path.error
    assert path.rtt is not None and path.rtt.p99_us >= 20_000
    assert path.verdict is Verdict.UNSAFE
