"""The ``probe`` request: the coordinator asks an agent to measure the path to a peer.

Both ends of that exchange live here so the wire format is written once:
``request_probe`` (coordinator side) and ``serve_probe`` (initiating agent side).
Reply: a ``probe.result`` message, then one data frame of int64 RTT samples (ns), then one
data frame of int64 completion times per bulk cell.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.agent import counters
from netqual.agent.wire import hops as hops_mod
from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import Channel, connect, peer_error
from netqual.agent.wire.sessions import SessionLost, Sessions
from netqual.base.errors import (
    BadRequestError,
    ErrorCode,
    LimitError,
    NetqualError,
    PeerError,
    PeerSilentError,
    PeerUnreachableError,
    ProbeError,
    ProtocolError,
    TransportUnavailableError,
)
from netqual.codec import details as details_codec
from netqual.codec.plan import plan_from_dict, plan_to_dict
from netqual.files import filedata
from netqual.model.node import Node
from netqual.model.path import path_label
from netqual.model.plan import PlanFieldError, ProbePlan
from netqual.transports import (
    TRANSPORT_NAMES,
    AgentLimits,
    RawBulk,
    RawProbe,
    Transport,
    TransportKind,
    TransportOptions,
    tcp_fetch,
)
from netqual.transports.integrity import IntegrityFailure
from netqual.transports.rdma.options import RdmaOptions

_SAMPLE = np.dtype("<i8")
log = logging.getLogger("netqual.agent")


@dataclass(frozen=True)
class ProbeOutcome:
    raw: RawProbe
    hops: int | None
    forward_hops: int | None
    initiator: str
    responder_agent: str


class SilentAgentError(ProbeError):
    """The initiating agent took the probe but sent no result before the coordinator's
    timeout: it will most likely do the same with every later probe of the run."""


@dataclass(frozen=True)
class PeerRef:
    """The responder a ``probe`` names: ``name`` None when its identity is not checked."""

    name: str | None
    address: str
    port: int

    @property
    def label(self) -> str:
        return f"{self.name or self.address} ({self.address}:{self.port})"


@dataclass(frozen=True)
class ProbeRequest:
    """The ``probe`` request, decoded and checked against this agent's limits."""

    peer: PeerRef
    transport: str
    plan: ProbePlan
    hops: bool = True
    # The run's device choices (``run``/``probe`` flags): both ends use them over their own.
    options: TransportOptions = field(default_factory=TransportOptions)
    nics: NicRef | None = None  # a probe between two NICs (docs/rails.md)

    def to_body(self) -> dict[str, Any]:
        body = {
            "peer": {"name": self.peer.name, "address": self.peer.address, "port": self.peer.port},
            "transport": self.transport,
            "plan": plan_to_dict(self.plan),
            "hops": self.hops,
            "options": self.options.to_body(),
        }
        if self.nics is not None:
            body["nics"] = self.nics.to_body()
        return body

    def transport_options(self) -> TransportOptions:
        """The run's options, with each side's NIC device over them (per-NIC probes)."""
        if self.nics is None or (self.nics.device is None and self.nics.peer_device is None):
            return self.options
        run = self.options.rdma
        return TransportOptions(
            rdma=RdmaOptions(device=self.nics.device).over(run),
            peer_rdma=RdmaOptions(device=self.nics.peer_device).over(run),
        )

    @classmethod
    def decode(cls, body: Mapping[str, Any], limits: AgentLimits, peer: str) -> ProbeRequest:
        f = Fields(body, "probe", peer)
        target = f.obj("peer")
        assert target is not None
        ref = PeerRef(
            target.optional_name("name"),
            target.address("address"),
            target.integer("port", 1, 65535),
        )
        transport = f.choice("transport", TRANSPORT_NAMES, "tcp")
        try:
            plan = plan_from_dict(body.get("plan", {}))
        except PlanFieldError as err:
            where = "probe.plan" + ("" if err.field == "plan" else f".{err.field}")
            raise BadRequestError(peer, where, err.problem) from err
        if (problem := limits.check(plan)) is not None:
            raise LimitError(peer, problem)
        options = TransportOptions.decode(f.obj("options", None))
        nics = f.obj("nics", None)
        return cls(
            ref, transport, plan, f.flag("hops", True), options,
            None if nics is None else NicRef.decode(nics),
        )  # fmt: skip


@dataclass(frozen=True)
class NicRef:
    """Which NICs a probe runs between: the initiator binds ``source``; each side opens its
    RDMA ``device`` (the responder ``peer_device``) when the inventory names one."""

    source: str
    device: str | None = None
    peer_device: str | None = None

    def to_body(self) -> dict[str, Any]:
        return {"source": self.source, "device": self.device, "peer_device": self.peer_device}

    @classmethod
    def decode(cls, f: Fields) -> NicRef:
        return cls(f.address("source"), f.optional_name("device"), f.optional_name("peer_device"))


@dataclass(frozen=True)
class BulkHeader:
    chunk_bytes: int
    depth: int
    reads: int
    elapsed_ns: int
    error: str | None
    # how long before the result was sent the cell's last read ended (the agent's own
    # monotonic clock): the coordinator places the cell on its clock from when the result
    # arrives (fan-in ranks' busy intervals, docs/fanin.md); None: an older agent
    ended_ago_ns: int | None = None


@dataclass(frozen=True)
class ProbeResult:
    """The ``probe.result`` message; the sample arrays follow as data frames."""

    responder_agent: str
    warmup_discarded: int
    rtt_count: int
    hops: int | None
    forward_hops: int | None
    bulk: tuple[BulkHeader, ...]
    details: Mapping[str, Any]

    def to_body(self) -> dict[str, Any]:
        body = asdict(self)
        body["details"] = dict(self.details)
        return body

    @classmethod
    def decode(cls, body: Mapping[str, Any], plan: ProbePlan, peer: str) -> ProbeResult:
        """Every count is checked against what was asked: counts size the buffers."""
        f = Fields(body, "probe.result", peer)
        rtt_count = f.integer("rtt_count", 0, plan.iterations)
        max_reads = max((plan.reads_for(c) for c in plan.chunks_bytes), default=0)
        cells = len(plan.chunks_bytes) * len(plan.depths) if plan.bulk else 0
        bulk_list = body.get("bulk", [])
        if not isinstance(bulk_list, list) or len(bulk_list) > cells:
            raise BadRequestError(peer, "probe.result.bulk", f"must be a list of <= {cells} cells")
        bulk = []
        for i, item in enumerate(bulk_list):
            b = Fields(item, f"probe.result.bulk[{i}]", peer)
            bulk.append(
                BulkHeader(
                    chunk_bytes=b.integer("chunk_bytes", 1, max(plan.chunks_bytes)),
                    depth=b.integer("depth", 1, max(plan.depths)),
                    reads=b.integer("reads", 0, max_reads),
                    elapsed_ns=b.integer("elapsed_ns", 0, sample_limit_ns(plan)),
                    error=None if item.get("error") is None else b.text("error"),
                    ended_ago_ns=None
                    if item.get("ended_ago_ns") is None
                    # the probe's time, and what the counters' end may wait after it
                    else b.integer("ended_ago_ns", 0, sample_limit_ns(plan) + 10**10),
                )
            )
        details = dict(f.mapping("details") or {})
        if len(json.dumps(details)) > _MAX_DETAILS_CHARS:
            raise BadRequestError(peer, "probe.result.details", "too large")
        if (why := filedata.problem(details)) is not None:  # what a results file may hold
            raise BadRequestError(peer, "probe.result.details", f"holds {why}")
        if details.get("counters") is not None:
            details["counters"] = counters.checked(
                details["counters"], "probe.result.details.counters", peer
            )
        # every key the registry lists of its type (netqual.model.details): what the results
        # file holds must read back (an unknown key, a newer agent's, is kept)
        if (wrong := details_codec.problem(details)) is not None:
            field = wrong[0]
            raise BadRequestError(
                peer, f"probe.result.details{field}", details_codec.expected(field)
            )

        def hops(key: str) -> int | None:
            return None if body.get(key) is None else f.integer(key, 0, 255)

        return cls(
            responder_agent=f.string("responder_agent", 255),
            warmup_discarded=f.integer("warmup_discarded", 0, plan.warmup, 0),
            rtt_count=rtt_count,
            hops=hops("hops"),
            forward_hops=hops("forward_hops"),
            bulk=tuple(bulk),
            details=dict(details),
        )


_MAX_DETAILS_CHARS = 16_384
# (transport name, the run's options from the request) -> the transport this agent uses
TransportFactory = Callable[[str, TransportOptions], Transport]


def serve_probe(
    ch: Channel,
    body: Mapping[str, Any],
    agent_name: str,
    token: bytes | None,
    limits: AgentLimits,
    make_transport: TransportFactory,
    counting: counters.Counting | None = None,
) -> None:
    """Run on the initiating agent. A bad request raises (the agent answers it); a failed
    measurement is answered here as an error naming both ends."""
    req = ProbeRequest.decode(body, limits, ch.peer)
    target = req.peer.name or req.peer.address
    phase = "setup"
    watch = CoordinatorWatch(ch)
    try:
        transport = make_transport(req.transport, req.transport_options())
        transport.check_available()
        deadline = time.monotonic() + req.plan.timeout_s
        hop = hops_mod.measure(req.peer.address, req.peer.port) if req.hops else None
        connect_s = min(10.0, req.plan.timeout_s)
        peer_ch, hello = connect(
            req.peer.address, req.peer.port, token, target, connect_s,
            expect_name=req.peer.name, source=req.nics.source if req.nics else None,
        )  # fmt: skip
        phase = "measure"
        with contextlib.ExitStack() as sessions:
            sessions.enter_context(peer_ch)
            watch.attach(peer_ch.sock)

            def another() -> Channel:  # a fetch profile's further connections (tcp_fetch)
                extra, _ = connect(
                    req.peer.address, req.peer.port, token, target, connect_s,
                    expect_name=req.peer.name, source=req.nics.source if req.nics else None,
                )  # fmt: skip
                watch.attach(extra.sock)  # ends with the coordinator too, not at the deadline
                return extra

            # Host counters before and after the phase, both ends (never inside the loop).
            window = counters.ProbeWindow(counting, peer_ch, req.transport == "tcp", deadline)
            if window.late:  # its late answer would be read as the next request's
                log.info(
                    "probe %s -> %s: no answer to counters.begin in time; a fresh session",
                    agent_name, req.peer.label,
                )  # fmt: skip
                peer_ch.close()
                peer_ch = sessions.enter_context(another())
            raw = _initiate(transport, peer_ch, req.plan, deadline, req.peer.address, another)
            if (moved := window.close()) is not None:
                raw = replace(raw, details={**raw.details, "counters": moved})
            watch.close()
            with contextlib.suppress(NetqualError, OSError):
                peer_ch.set_timeout(2.0)
                peer_ch.send("bye")
    except (NetqualError, TimeoutError) as err:
        watch.close()
        if watch.gone.is_set():
            log.info(
                "probe %s -> %s stopped: the coordinator %s left (%s)",
                agent_name, req.peer.label, ch.peer, err,
            )  # fmt: skip
            return
        if isinstance(err, IntegrityFailure):
            log.warning("probe %s -> %s: %s", agent_name, req.peer.label, err.problem)
        ch.send_error(*_failure(err, phase, req.peer, agent_name, req.nics is not None))
        return
    finally:
        watch.close()
    now = time.perf_counter_ns()  # the clock the transports time their cells on
    bulk = tuple(
        BulkHeader(
            b.chunk_bytes, b.depth, len(b.completion_ns), b.elapsed_ns, b.error,
            None if b.started_ns is None else max(0, now - b.started_ns - b.elapsed_ns),
        )
        for b in raw.bulk
    )  # fmt: skip
    result = ProbeResult(
        hello.agent,
        raw.warmup_discarded,
        len(raw.rtt_ns),
        hop.hops if hop else None,
        hop.forward_hops if hop else None,
        bulk,
        raw.details,
    )
    ch.send("probe.result", result.to_body())
    for samples in (raw.rtt_ns, *(b.completion_ns for b in raw.bulk)):
        ch.send_bytes(np.asarray(samples, dtype=_SAMPLE).tobytes())


def _initiate(
    transport: Transport,
    ch: Channel,
    plan: ProbePlan,
    deadline: float,
    peer_address: str,
    another: Callable[[], Channel],
) -> RawProbe:
    """The transport's probe, or a fetch profile's chunks: TCP's in tcp_fetch, over further
    connections that ``another`` opens; RDMA's inside its session (transports/rdma/fetch.py,
    its QPs all on the one endpoint)."""
    if plan.fetch_profile and transport.name == "tcp":
        return tcp_fetch.initiate(ch, plan, deadline, another)
    return transport.initiate(ch, plan, deadline, peer_address)


class CoordinatorWatch:
    """Stops a probe within ``POLL_S`` once the coordinator's channel closes.

    The coordinator says nothing while its probe runs, so the channel turning readable
    means it closed (killed, or Ctrl-C): the probe's connections to the responder are then
    shut down, which ends the initiator's loops (and the responder's) at once, instead of
    measuring for a run that is gone, on top of the next run's probes. Every connection
    is attached (a fetch profile's further ones too): one left open keeps its loop, and
    so the probe, waiting for a stalled responder until the probe's deadline.
    """

    POLL_S = 0.2

    def __init__(self, ch: Channel) -> None:
        self.ch = ch
        self.gone = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._peers: list[socket.socket] = []
        # close() wakes the watcher at once through this (it used to wait out the select's
        # POLL_S: every probe request took up to 0.2 s longer, 0.1 s on average)
        self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._thread = threading.Thread(target=self._run, name="coordinator-watch", daemon=True)
        self._thread.start()

    def attach(self, peer_sock: socket.socket) -> None:
        """A connection of the probe to the responder: shut down when the coordinator
        leaves (at once when it has left already)."""
        with self._lock:
            self._peers.append(peer_sock)
        if self.gone.is_set():
            self._shutdown()

    def close(self) -> None:
        """The probe is over: stop watching (the channel is the session's again). Returns
        as soon as the watcher has stopped; a second call does nothing."""
        if self._closed.is_set():
            return
        self._closed.set()
        os.eventfd_write(self._wake, 1)
        self._thread.join(timeout=2 * self.POLL_S + 1)
        if not self._thread.is_alive():  # else leave the fd to it rather than close it under it
            os.close(self._wake)

    def _shutdown(self) -> None:
        with self._lock:
            peers = list(self._peers)
        for peer in peers:  # one already closed raises OSError (its fd is -1): skipped
            with contextlib.suppress(OSError):
                peer.shutdown(socket.SHUT_RDWR)

    def _run(self) -> None:
        sock = self.ch.sock
        while not self._closed.is_set():
            try:
                readable = select.select([sock.fileno(), self._wake], [], [], self.POLL_S)[0]
                if self._closed.is_set():
                    return
                if sock.fileno() not in readable:
                    continue
                left = not sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except (OSError, ValueError):  # reset, or the socket is gone
                left = True
            if left:
                self.gone.set()
                self._shutdown()
            return  # gone, or it spoke mid-probe (the next recv deals with that)


# Connect errors that say the endpoint is set up wrong, not that the network failed: no
# listener (refused), no route, a source address not on this host. A host that does not
# answer (EHOSTUNREACH after ARP, a timeout) may be a dead link: that stays a verdict.
CONFIGURATION_ERRNOS = frozenset({errno.ECONNREFUSED, errno.ENETUNREACH, errno.EADDRNOTAVAIL})


def _configuration(err: PeerUnreachableError) -> bool:
    cause = err.__cause__
    return isinstance(cause, OSError) and cause.errno in CONFIGURATION_ERRNOS


def _failure(
    err: NetqualError | TimeoutError,
    phase: str,
    peer: PeerRef,
    me: str,
    nic_set_up: bool = False,
) -> tuple[ErrorCode, str]:
    """The code and words a failed probe is answered with, naming both ends.
    ``nic_set_up``: the probe ran between listed NICs (a rails run's endpoints)."""
    target = peer.name or peer.address
    if isinstance(err, TransportUnavailableError):
        hint = f" (hint: {err.hint})" if err.hint else ""
        return ErrorCode.UNAVAILABLE, f"{err.transport} unavailable on {me}: {err.problem}{hint}"
    if isinstance(err, PeerError):
        return err.code, f"{target}: {err.message}"
    if isinstance(err, PeerUnreachableError):
        if phase == "setup" and nic_set_up and _configuration(err):
            # a NIC endpoint nothing listens on, with no route, or a source not on this
            # host: the set-up's, not the network's (docs/rails.md)
            return ErrorCode.UNAVAILABLE, (
                f"NIC endpoint {peer.label} not reachable from {me}: {err.problem} "
                "(configuration: does the agent listen on that address, is it routed?)"
            )
        where = f"{peer.label} unreachable from {me}" if phase == "setup" else peer.label
        return ErrorCode.PEER_UNREACHABLE, f"{where}: {err.problem}"
    if isinstance(err, ProtocolError) and phase == "setup":
        return ErrorCode.PEER_PROTOCOL, f"{peer.label} refused {me}: {err.problem}"
    if isinstance(err, PeerSilentError):
        return ErrorCode.PEER_SILENT, f"{path_label(me, target)}: {err}"
    if isinstance(err, TimeoutError):
        return ErrorCode.PROBE_FAILED, f"{path_label(me, target)}: timed out"
    if isinstance(err, (ProbeError, ProtocolError)):
        return ErrorCode.PROBE_FAILED, f"{path_label(me, target)}: {err}"
    return err.code, f"{path_label(me, target)}: {err}"


def request_probe(
    src: Node,
    dst: Node,
    transport: TransportKind,
    plan: ProbePlan,
    token: bytes | None,
    timeout_s: float,
    options: TransportOptions | None = None,
    sessions: Sessions | None = None,
) -> ProbeOutcome:
    """Coordinator side: ask ``src``'s agent to probe ``dst``. Raises NetqualError on any
    failure, whatever the agent sends.

    ``options``: device choices both ends use instead of their own (``run``/``probe`` flags).
    ``sessions``: where an open session to ``src`` is taken from and given back to (a run's
    requests); without it the request opens a session and ends it with ``bye``.
    """
    nics = None
    if src.nic is not None and dst.nic is not None:
        nics = NicRef(src.nic.address, src.nic.device, dst.nic.device)
    request = ProbeRequest(
        PeerRef(dst.identity, dst.address, dst.port),
        transport.value,
        plan,
        options=options or TransportOptions(),
        nics=nics,
    )
    connect_s = min(10.0, timeout_s)
    if sessions is not None:
        return sessions.use(src, connect_s, lambda ch: _exchange(ch, request, src, timeout_s))
    ch, _hello = connect(
        src.control_address, src.port, token, src.name, connect_s, expect_name=src.identity
    )
    with ch:
        try:
            out = _exchange(ch, request, src, timeout_s)
        except SessionLost as lost:
            raise lost.err from lost.err
        with contextlib.suppress(NetqualError):
            ch.send("bye")
    return out


def _exchange(ch: Channel, request: ProbeRequest, src: Node, timeout_s: float) -> ProbeOutcome:
    """The ``probe`` request and its whole answer on an authenticated session."""
    silent = f"no result from {src.name} within {timeout_s:g} s"
    ch.set_deadline(time.monotonic() + timeout_s)
    try:
        ch.send("probe", request.to_body())
    except PeerUnreachableError as err:
        raise SessionLost(err) from err  # before any answer: see agent.wire.sessions
    try:
        first = ch.recv()
        arrived_ns = time.perf_counter_ns()  # places the agent's cells on this clock
    except PeerUnreachableError as err:
        raise SessionLost(err) from err
    except TimeoutError as err:
        raise SilentAgentError(silent) from err
    try:
        if first.kind == "error":
            raise peer_error(first.body, ch.peer)
        if first.kind != "probe.result":
            raise ProtocolError(ch.peer, f"expected 'probe.result', got {first.kind!r}")
        res = ProbeResult.decode(first.body, request.plan, src.name)
        limit_ns = sample_limit_ns(request.plan)
        rtt = _samples(ch, res.rtt_count, "an RTT sample", limit_ns)
        done = "a bulk completion time"
        bulk = tuple(
            RawBulk(
                b.chunk_bytes, b.depth, _samples(ch, b.reads, done, limit_ns), b.elapsed_ns,
                b.error,
                None if b.ended_ago_ns is None else arrived_ns - b.ended_ago_ns - b.elapsed_ns,
            )
            for b in res.bulk
        )  # fmt: skip
    except TimeoutError as err:
        raise SilentAgentError(silent) from err
    except BadRequestError as err:
        raise ProtocolError(src.name, f"malformed probe result: {err.problem}") from err
    return ProbeOutcome(
        raw=RawProbe(rtt, res.warmup_discarded, bulk, res.details),
        hops=res.hops,
        forward_hops=res.forward_hops,
        initiator=src.name,
        responder_agent=res.responder_agent,
    )


IMPOSSIBLE_SAMPLE = "agent reported impossible values"


SAMPLE_SLACK_S = 1.0  # scheduling past a deadline: a loop notices it a little late


def sample_limit_ns(plan: ProbePlan) -> int:
    """The longest time an initiator can have measured in a probe of ``plan``: its loops
    stop at the probe's timeout, so no round trip, read or cell lasts longer (plus
    ``SAMPLE_SLACK_S``)."""
    return int((plan.timeout_s + SAMPLE_SLACK_S) * 1e9)


def _samples(ch: Channel, count: int, what: str, limit_ns: int) -> npt.NDArray[np.int64]:
    """One data frame of exactly ``count`` int64 samples (the count was checked already),
    each a physical duration: more than 0 and at most ``limit_ns`` (the probe's timeout).
    Anything else is refused here, where it enters, so it never reaches a statistic or a
    results file: the path fails with the reason."""
    data = ch.recv_bytes(count * _SAMPLE.itemsize)
    if len(data) != count * _SAMPLE.itemsize:
        got = len(data) // _SAMPLE.itemsize
        raise ProtocolError(ch.peer, f"sent {got} samples, announced {count}")
    samples = np.frombuffer(data, dtype=_SAMPLE).astype(np.int64)
    if count:
        low, high = int(samples.min()), int(samples.max())
        if low <= 0 or high > limit_ns:
            bad = low if low <= 0 else high
            raise ProtocolError(
                ch.peer,
                f"{IMPOSSIBLE_SAMPLE}: {what} of {bad:,} ns (a measured time is more than 0 "
                f"and at most the probe's timeout, {limit_ns / 1e9:g} s with slack)",
            )
    return samples
