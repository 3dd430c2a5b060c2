"""The ``probe`` request: the coordinator asks an agent to measure the path to a peer.

Both ends of that exchange live here so the wire format is written once:
``request_probe`` (coordinator side) and ``serve_probe`` (initiating agent side).
Reply: a ``probe.result`` message, then one data frame of int64 RTT samples (ns), then one
data frame of int64 completion times per bulk cell.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from netqual import hops as hops_mod
from netqual.errors import (
    ErrorCode,
    NetqualError,
    PeerError,
    PeerUnreachableError,
    ProbeError,
    ProtocolError,
    TransportUnavailableError,
)
from netqual.models import Node, ProbePlan
from netqual.plan_codec import plan_from_dict, plan_to_dict
from netqual.protocol import Channel, connect
from netqual.transports import (
    AgentLimits,
    RawBulk,
    RawProbe,
    Transport,
    TransportKind,
    TransportOptions,
)

_SAMPLE = np.dtype("<i8")


@dataclass(frozen=True)
class ProbeOutcome:
    raw: RawProbe
    hops: int | None
    forward_hops: int | None
    initiator: str
    responder_agent: str


def _peer_label(peer: Mapping[str, Any]) -> str:
    return f"{peer.get('name')} ({peer.get('address')}:{peer.get('port')})"


def _validate_plan(plan: ProbePlan, limits: AgentLimits) -> str | None:
    """Name the first agent limit the plan exceeds, or None."""
    if plan.warmup + plan.iterations > limits.max_iterations:
        return (
            f"iterations+warmup {plan.warmup + plan.iterations} exceeds "
            f"max_iterations={limits.max_iterations}"
        )
    if plan.timeout_s > limits.max_duration_s:
        return f"timeout {plan.timeout_s:g} s exceeds max_duration_s={limits.max_duration_s:g}"
    if plan.size_bytes > limits.max_message_bytes:
        return f"size {plan.size_bytes} exceeds max_message_bytes={limits.max_message_bytes}"
    if plan.bulk:
        for c in plan.chunks_bytes:
            if c > limits.max_chunk_bytes:
                return f"chunk {c} exceeds max_chunk_bytes={limits.max_chunk_bytes}"
            if plan.reads_for(c) * c > limits.max_bulk_bytes:
                return (
                    f"bulk cell of {plan.reads_for(c)} x {c} bytes exceeds "
                    f"max_bulk_bytes={limits.max_bulk_bytes}"
                )
        if max(plan.depths) > limits.max_depth:
            return f"depth {max(plan.depths)} exceeds max_depth={limits.max_depth}"
    return None


TransportFactory = Callable[[str, Any], Transport]


def serve_probe(
    ch: Channel,
    body: Mapping[str, Any],
    agent_name: str,
    token: bytes | None,
    limits: AgentLimits,
    make_transport: TransportFactory,
) -> None:
    """Run on the initiating agent. Every failure is answered as an error message."""
    peer = body.get("peer")
    if not isinstance(peer, dict) or not isinstance(peer.get("address"), str):
        ch.send_error(ErrorCode.BAD_REQUEST, "probe needs peer {name, address, port}")
        return
    try:
        plan = plan_from_dict(body.get("plan") or {})
        port = int(peer.get("port", 0))
    except (TypeError, ValueError) as err:
        ch.send_error(ErrorCode.BAD_REQUEST, f"bad probe request: {err}")
        return
    if (problem := _validate_plan(plan, limits)) is not None:
        ch.send_error(ErrorCode.LIMIT, problem)
        return
    expect_name = peer.get("name")
    if expect_name is not None and not isinstance(expect_name, str):
        ch.send_error(ErrorCode.BAD_REQUEST, "probe.peer.name must be a string")
        return
    peer_name = expect_name or peer["address"]
    label = _peer_label(peer)
    try:
        transport = make_transport(str(body.get("transport", "tcp")), body)
        transport.check_available()
    except TransportUnavailableError as err:
        ch.send_error(
            ErrorCode.UNAVAILABLE,
            f"{err.transport} unavailable on {agent_name}: {err.problem}"
            + (f" (hint: {err.hint})" if err.hint else ""),
        )
        return
    except NetqualError as err:
        ch.send_error(ErrorCode.BAD_REQUEST, str(err))
        return
    deadline = time.monotonic() + min(plan.timeout_s, limits.max_duration_s)
    hop = hops_mod.measure(peer["address"], port) if body.get("hops", True) else None
    try:
        peer_ch, hello = connect(
            peer["address"],
            port,
            token,
            peer=peer_name,
            timeout_s=min(10.0, plan.timeout_s),
            expect_name=expect_name,
        )
    except PeerUnreachableError as err:
        message = f"{label} unreachable from {agent_name}: {err.problem}"
        ch.send_error(ErrorCode.PEER_UNREACHABLE, message)
        return
    except ProtocolError as err:
        ch.send_error(ErrorCode.PEER_PROTOCOL, f"{label} refused {agent_name}: {err.problem}")
        return
    try:
        raw = transport.initiate(peer_ch, plan, deadline, peer["address"])
        try:
            peer_ch.set_timeout(2.0)
            peer_ch.send("bye")
        except (NetqualError, OSError):
            pass
    except PeerError as err:
        ch.send_error(err.code, f"{peer_name}: {err.message}")
        return
    except PeerUnreachableError as err:
        ch.send_error(ErrorCode.PEER_UNREACHABLE, f"{label}: {err.problem}")
        return
    except (ProbeError, ProtocolError) as err:
        ch.send_error(ErrorCode.PROBE_FAILED, f"{agent_name} -> {peer_name}: {err}")
        return
    except TimeoutError:
        ch.send_error(ErrorCode.PROBE_FAILED, f"{agent_name} -> {peer_name}: timed out")
        return
    finally:
        peer_ch.close()
    ch.send(
        "probe.result",
        {
            "responder_agent": hello.agent,
            "warmup_discarded": raw.warmup_discarded,
            "rtt_count": len(raw.rtt_ns),
            "hops": hop.hops if hop else None,
            "forward_hops": hop.forward_hops if hop else None,
            "bulk": [
                {
                    "chunk_bytes": b.chunk_bytes,
                    "depth": b.depth,
                    "reads": len(b.completion_ns),
                    "elapsed_ns": b.elapsed_ns,
                    "error": b.error,
                }
                for b in raw.bulk
            ],
            "details": dict(raw.details),
        },
    )
    ch.send_bytes(np.asarray(raw.rtt_ns, dtype=_SAMPLE).tobytes())
    for b in raw.bulk:
        ch.send_bytes(np.asarray(b.completion_ns, dtype=_SAMPLE).tobytes())


def request_probe(
    src: Node,
    dst: Node,
    transport: TransportKind,
    plan: ProbePlan,
    token: bytes | None,
    timeout_s: float,
    options: TransportOptions | None = None,
) -> ProbeOutcome:
    """Coordinator side: ask ``src``'s agent to probe ``dst``. Raises on any failure.

    ``options``: device choices both ends use instead of their own (``run``/``probe`` flags).
    """
    deadline = time.monotonic() + timeout_s
    ch, _hello = connect(
        src.address, src.port, token, src.name, min(10.0, timeout_s), expect_name=src.identity
    )
    with ch:
        ch.set_deadline(deadline)
        ch.send(
            "probe",
            {
                "peer": {"name": dst.identity, "address": dst.address, "port": dst.port},
                "transport": transport.value,
                "plan": plan_to_dict(plan),
                "hops": True,
                **(options.request_fields() if options is not None else {}),
            },
        )
        try:
            res = ch.expect("probe.result")
            n = int(res["rtt_count"])
            # Never trust an announced count beyond what was asked: it sizes the buffer.
            if not 0 <= n <= plan.iterations:
                raise ValueError(f"rtt_count {n} outside 0..{plan.iterations}")
            max_reads = max((plan.reads_for(c) for c in plan.chunks_bytes), default=0)
            rtt = np.frombuffer(ch.recv_bytes(n * _SAMPLE.itemsize), dtype=_SAMPLE).astype(np.int64)
            bulk = []
            for b in res.get("bulk", []):
                reads = int(b["reads"])
                if not 0 <= reads <= max_reads:
                    raise ValueError(f"bulk reads {reads} outside 0..{max_reads}")
                comp = np.frombuffer(ch.recv_bytes(reads * _SAMPLE.itemsize), dtype=_SAMPLE)
                bulk.append(
                    RawBulk(
                        int(b["chunk_bytes"]),
                        int(b["depth"]),
                        comp.astype(np.int64),
                        int(b["elapsed_ns"]),
                        b.get("error"),
                    )
                )
            with contextlib.suppress(NetqualError):
                ch.send("bye")
        except TimeoutError as err:
            raise ProbeError(f"no result from {src.name} within {timeout_s:g} s") from err
        except (KeyError, TypeError, ValueError) as err:
            raise ProtocolError(src.name, f"malformed probe result: {err!r}") from err
    if len(rtt) != n:
        raise ProtocolError(src.name, f"sent {len(rtt)} samples, announced {n}")
    return ProbeOutcome(
        raw=RawProbe(
            rtt_ns=rtt,
            warmup_discarded=int(res.get("warmup_discarded", 0)),
            bulk=tuple(bulk),
            details=dict(res.get("details") or {}),
        ),
        hops=res.get("hops"),
        forward_hops=res.get("forward_hops"),
        initiator=src.name,
        responder_agent=str(res.get("responder_agent")),
    )
