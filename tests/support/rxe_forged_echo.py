"""Runs INSIDE the Soft-RoCE guest (forked by tests/support/rxe_guest_cases.py; not collected by
pytest): the RDMA ping-pong's session-key check over real verbs (rxe0 -> rxe1).

For each loop (compiled hotloop.c, then Python) a responder agent is forked that is
honest, *forged* (its tags come from a key other than the session's: something answering
for the node without its key), *replayed* (it writes every ping back as it came, the
challenges without a single tag: what anything on the path can do) or *blank-bulk* (its
READs return memory without the keyed bytes). The initiator
probes it in-process through ``RdmaTransport.initiate`` with the real session keys.
Prints one JSON object {"<mode>/<loop>": {"ok", "error", "elapsed_s"}} on stdout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import signal
import sys
import time

from netqual.agent.server import Agent
from netqual.agent.wire.protocol import Channel, connect
from netqual.model.limits import AgentLimits
from netqual.model.plan import ProbePlan
from netqual.transports import TransportOptions
from netqual.transports.rdma import RdmaOptions
from netqual.transports.rdma import tags as rdma_tags
from netqual.transports.rdma.hotloop import LOOP_ENV
from netqual.transports.rdma.transport import RdmaTransport

HOST, PORT = "198.18.0.2", 18605
# One small bulk cell: the honest responder's keyed bulk bytes pass over real READs. 100
# round trips: a forged or replayed reply fails the first check, and an honest run keeps
# every one (eight probes, 400 each spun both vCPUs for 10-30 s under TCG).
PLAN = ProbePlan(
    iterations=100, warmup=10, size_bytes=64, chunks_bytes=(64 * 1024,), depths=(2,),
    bulk_bytes=64 * 1024 * 8, min_reads=8, timeout_s=300,
)  # fmt: skip


def _tamper(mode: str) -> None:
    if mode == "forged":
        real = Channel.measurement_key

        def forged(self: Channel, *, responder: bool) -> bytes | None:
            return os.urandom(32) if responder else real(self, responder=responder)

        Channel.measurement_key = forged  # type: ignore[method-assign]
    elif mode == "replayed":
        real_tags = rdma_tags.for_responder

        def replayed(
            ch: Channel, nonce: bytes, count: int, size: int, bulk_bytes: int
        ) -> rdma_tags.Tags:
            honest = real_tags(ch, nonce, count, size, bulk_bytes)
            return dataclasses.replace(rdma_tags.untagged(count, size), bulk=honest.bulk)

        rdma_tags.for_responder = replayed
    elif mode == "blank-bulk":  # READs answered from memory without the keyed bytes
        rdma_tags.fill_bulk = lambda tags, address: None


def _responder(mode: str, token: bytes) -> int:
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        os.read(r, 1)  # listening
        os.close(r)
        return pid
    os.close(r)
    os.sched_setaffinity(0, {1})
    _tamper(mode)
    options = TransportOptions(rdma=RdmaOptions(device="rxe1"))
    agent = Agent(HOST, PORT, token, name="rxeF", limits=AgentLimits(), transport_options=options)
    agent.bind()
    os.write(w, b"x")
    try:
        agent.serve_forever()
    finally:
        os._exit(0)


def main() -> int:
    token = secrets.token_hex(32).encode()
    os.sched_setaffinity(0, {0})
    out: dict[str, dict[str, object]] = {}
    for loop in ("compiled", "python"):
        if loop == "python":
            os.environ[LOOP_ENV] = "python"
        for mode in ("honest", "forged", "replayed", "blank-bulk"):
            pid = _responder(mode, token)
            start = time.monotonic()
            try:
                ch, _ = connect(HOST, PORT, token, "rxeF", 60, expect_name="rxeF")
                with ch:
                    raw = RdmaTransport(RdmaOptions(device="rxe0"), node_name="rxeI").initiate(
                        ch, PLAN, time.monotonic() + PLAN.timeout_s, HOST
                    )
                out[f"{mode}/{loop}"] = {
                    "ok": True,
                    "error": "",
                    "samples": len(raw.rtt_ns),
                    "loop": raw.details.get("pingpong_loop", ""),
                    "bulk_errors": [c.error for c in raw.bulk],
                }
            except Exception as err:  # what the initiator says is the result
                out[f"{mode}/{loop}"] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
            out[f"{mode}/{loop}"]["elapsed_s"] = round(time.monotonic() - start, 1)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
