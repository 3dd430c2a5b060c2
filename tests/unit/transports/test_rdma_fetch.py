"""Fetch profiles over verbs (transports/rdma/fetch.py) on the fake verbs: a chunk's slices
dealt among the profile's QPs of one endpoint, its waves, the READs outstanding per QP
(the profile's, capped by max_rd_atomic), one completion per chunk, every slice checked
for the responder's keyed bytes, a session through a real agent, and the fan-in sweep's
ranks over RDMA. Real verbs: tests/env/test_rxe_guest.py (Soft-RoCE)."""

from __future__ import annotations

import contextlib
import ctypes
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from eventually import eventually
from rdma_fakeverbs import Fabric, module

from netqual.agent.wire.protocol import connect
from netqual.base.errors import NetqualError, ProbeError
from netqual.base.units import KIB
from netqual.model.fanin import FaninConfig
from netqual.model.fetchprofile import FetchProfile, profile
from netqual.model.node import Node, Role
from netqual.model.path import RawBulk
from netqual.model.plan import ProbePlan
from netqual.transports import TransportKind, TransportOptions, integrity
from netqual.transports.interface import AgentLimits
from netqual.transports.rdma import RdmaOptions, bulk, devices, fetch, verbs, writer
from netqual.transports.rdma import tags as rdma_tags
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.transport import RdmaTransport

MOONCAKE = profile("mooncake")


def _pair(
    fabric: Fabric, qps: int, bulk_bytes: int, peer_qps: int = 0
) -> tuple[Endpoint, Endpoint]:
    """Initiator ``a`` with ``qps`` QPs, responder ``b`` with ``peer_qps`` (default: as many)
    and a bulk area of distinct bytes; connected both ways."""
    pv = module(fabric)
    sel = devices.choose(devices.scan(pv), RdmaOptions(), local_ip="127.0.0.1")
    a = Endpoint(pv, sel, msg_bytes=64, bulk_bytes=bulk_bytes, send_wr=64, qps=qps)
    b = Endpoint(pv, sel, msg_bytes=64, bulk_bytes=bulk_bytes, send_wr=64, qps=peer_qps or qps)
    content = bytes(i * 7 % 251 for i in range(bulk_bytes))
    ctypes.memmove(b.buf + b.bulk_offset, content, bulk_bytes)
    a.connect(b.conninfo())
    return a, b


def _landed(ep: Endpoint, n: int) -> bytes:
    return ctypes.string_at(ep.buf + ep.bulk_offset, n)


def test_mooncake_deals_a_chunks_slices_to_its_two_qps() -> None:
    fabric = Fabric()
    a, b = _pair(fabric, qps=2, bulk_bytes=256 * KIB)
    raw = fetch.read_chunks(a, b.conninfo(), MOONCAKE, 256 * KIB, 10, time.monotonic() + 30)
    assert raw.chunk_bytes == 256 * KIB and raw.error is None
    assert raw.completion_ns.shape == (10,) and (raw.completion_ns > 0).all()
    # one completion per chunk, first post to last slice: the chunks run one after another
    assert raw.elapsed_ns >= raw.completion_ns.sum()
    # 4 slices of 64 KiB a chunk, 2 on each QP, 10 chunks
    assert fabric.reads_by_qp == {int(a.qp.qp_num): 20, int(a.more_qps[0][0].qp_num): 20}
    assert raw.depth == 2  # outstanding per QP: its share (as tcp_fetch records it)
    assert _landed(a, 256 * KIB) == _landed(b, 256 * KIB)  # each slice at its place
    a.close()
    b.close()


@pytest.mark.parametrize(("round_trips", "most_outstanding"), [(1, 4), (2, 2), (4, 1)])
def test_waves_are_sequential_round_trips(round_trips: int, most_outstanding: int) -> None:
    """A chunk of 4 slices in ``round_trips`` waves: wave n+1 is posted only when wave n
    has completed, so at most a wave's slices are ever outstanding."""
    fabric = Fabric()
    prof = FetchProfile("waves", 16 * KIB, 64, 1, round_trips, 1, False, "test")
    a, b = _pair(fabric, qps=1, bulk_bytes=64 * KIB)
    raw = fetch.read_chunks(a, b.conninfo(), prof, 64 * KIB, 20, time.monotonic() + 30)
    assert raw.completion_ns.shape == (20,)
    assert fabric.reads_by_qp == {int(a.qp.qp_num): 80}
    assert fabric.max_sq_seen == most_outstanding
    assert _landed(a, 64 * KIB) == _landed(b, 64 * KIB)


def test_reads_in_flight_are_capped_by_max_rd_atomic() -> None:
    """Mooncake asks 64 slices at once per QP; the fake device serves 16 READs per QP (its
    max_qp_rd_atom): more would only wait in the send queue, timed as if on the wire."""
    fabric = Fabric()
    a, b = _pair(fabric, qps=2, bulk_bytes=8 << 20)  # 128 slices: 64 per QP
    raw = fetch.read_chunks(a, b.conninfo(), MOONCAKE, 8 << 20, 3, time.monotonic() + 30)
    assert raw.completion_ns.shape == (3,) and raw.depth == 64
    assert fabric.max_sq_seen == 16 == a.rd_atomic
    assert sorted(fabric.reads_by_qp.values()) == [192, 192]
    assert _landed(a, 8 << 20) == _landed(b, 8 << 20)


def test_a_peer_with_fewer_qps_is_refused_in_plain_words() -> None:
    with pytest.raises(ProbeError) as caught:
        _pair(Fabric(), qps=2, bulk_bytes=64 * KIB, peer_qps=1)
    assert str(caught.value) == (
        "the peer opened 1 QP(s), 2 asked (an agent older than fetch profiles over RDMA?)"
    )


class _SilentCq:
    """A CQ that never completes anything: every poll is empty."""

    def __init__(self) -> None:
        self.polls = 0

    def poll(self, num_entries: int = 1) -> tuple[int, list[Any]]:
        self.polls += 1
        return 0, []


def test_bulk_reads_and_fetches_wait_for_reads_in_one_loop_with_one_deadline() -> None:
    # bulk.ReadCompletions: the deadline is looked at every EMPTY_POLLS_PER_CHECK empty
    # polls, and each caller says how far it got
    a, b = _pair(Fabric(), qps=2, bulk_bytes=256 * KIB)
    a.cq = cq = _SilentCq()
    late = time.monotonic() + 0.05
    with pytest.raises(ProbeError, match=r"^rdma bulk read 4096 B x1 timed out after 0 of 3"):
        bulk.read_cell(a, b.conninfo(), chunk=4096, depth=1, reads=3, deadline=late)
    assert cq.polls % bulk.EMPTY_POLLS_PER_CHECK == 0
    with pytest.raises(ProbeError, match=r"^rdma fetch \(mooncake\) timed out after 0 of 9"):
        fetch.read_chunks(a, b.conninfo(), MOONCAKE, 256 * KIB, 9, time.monotonic() + 0.05)
    assert cq.polls % bulk.EMPTY_POLLS_PER_CHECK == 0


def test_read_completions_pass_over_ping_pong_writes_and_raise_a_failed_read() -> None:
    a, _ = _pair(Fabric(), qps=1, bulk_bytes=64 * KIB)
    wc = SimpleNamespace
    batches = [
        (2, [wc(wr_id=writer.PINGPONG_WR_ID, status=0), wc(wr_id=3, status=0), None]),
        (1, [wc(wr_id=writer.PINGPONG_WR_ID, status=0)]),  # only a late write: wait on
        (0, []),
        (2, [wc(wr_id=5, status=0), wc(wr_id=1, status=0)]),
        (1, [wc(wr_id=2, status=12, vendor_err=0x81)]),
    ]
    a.cq = SimpleNamespace(poll=lambda most: batches.pop(0))
    reads = bulk.ReadCompletions(a, time.monotonic() + 30)
    assert reads.wait(4, lambda: "late")[1] == [3]
    assert reads.wait(4, lambda: "late")[1] == [5, 1]
    assert reads.empty == 1
    with pytest.raises(ProbeError, match=r"RDMA READ completion failed: IBV_WC_RETRY_EXC_ERR"):
        reads.wait(4, lambda: "late")


def test_the_deadline_ends_a_fetch() -> None:
    a, b = _pair(Fabric(), qps=2, bulk_bytes=256 * KIB)
    with pytest.raises(ProbeError, match=r"rdma fetch \(mooncake\) timed out after 1 of 1000"):
        fetch.read_chunks(a, b.conninfo(), MOONCAKE, 256 * KIB, 1000, time.monotonic() - 1)


@pytest.mark.parametrize(
    ("said", "reason"),
    [
        (None, "the responder closed the control channel"),
        ("the responder stopped early: x", "the responder stopped early: x"),
    ],
)
def test_a_control_channel_that_turns_readable_ends_the_fetch(
    said: str | None, reason: str
) -> None:
    """The responder says nothing while its area is read: its channel turning readable
    means it stopped, closed, or that the coordinator left (CoordinatorWatch shuts the
    channel down). The fetch stops after the chunk in progress, not at its deadline."""
    a, b = _pair(Fabric(), qps=2, bulk_bytes=256 * KIB)
    mine, theirs = socket.socketpair()
    theirs.close()
    with mine, pytest.raises(ProbeError) as caught:
        fetch.read_chunks(
            a, b.conninfo(), MOONCAKE, 256 * KIB, 100_000, time.monotonic() + 60,
            watch=mine, notice=lambda: said,
        )  # fmt: skip
    assert str(caught.value) == f"rdma fetch (mooncake): {reason} (after 1 of 100000 chunks)"


def _plan(name: str, chunk: int, chunks: int) -> ProbePlan:
    """What the fan-in sweep asks of a rank (run/fanin.py plan_for)."""
    return ProbePlan(
        iterations=1, warmup=0, chunks_bytes=(chunk,), depths=(profile(name).slices_in_flight,),
        bulk_bytes=0, min_reads=chunks, timeout_s=60, fetch_profile=name,
    )  # fmt: skip


def _initiate(port: int, plan: ProbePlan) -> tuple[tuple[RawBulk, ...], Mapping[str, Any]]:
    ch, _hello = connect("127.0.0.1", port, None, peer="fakeB")
    with ch:
        raw = RdmaTransport(node_name="fakeA").initiate(ch, plan, time.monotonic() + 60, "x")
    return raw.bulk, raw.details


def test_a_session_runs_the_profile_on_both_ends_qps(fake_agent: int, fabric: Fabric) -> None:
    """Through a real agent: the responder opens as many QPs as asked, the initiator
    fetches over them, and details.fetch says what ran."""
    cells, details = _initiate(fake_agent, _plan("mooncake", 192 * KIB, 12))
    [cell] = cells
    assert (cell.chunk_bytes, cell.depth, len(cell.completion_ns), cell.error) == (
        192 * KIB, 2, 12, None,
    )  # fmt: skip
    assert details["fetch"] == {
        "profile": "mooncake",
        "slice_bytes": [64 * KIB],
        "slices_per_chunk": [3],
        "slices_in_flight": 64,
        "round_trips": [1],
        "connections_used": [2],
        "reads_in_flight_per_qp": 16,
        "loop": "python (pyverbs; the compiled loop runs the ping-pong only)",
    }
    assert sorted(fabric.reads_by_qp.values()) == [12, 24]  # slices 0-1 and 2 of each chunk


def test_plain_profile_is_one_whole_chunk_read_at_a_time(fake_agent: int, fabric: Fabric) -> None:
    cells, details = _initiate(fake_agent, _plan("plain", 100_000, 7))
    [cell] = cells
    assert (cell.chunk_bytes, cell.depth, len(cell.completion_ns)) == (100_000, 1, 7)
    assert details["fetch"]["connections_used"] == [1]
    assert list(fabric.reads_by_qp.values()) == [7] and fabric.max_sq_seen <= 1 + 16


def test_a_coordinator_that_leaves_ends_a_fetch_from_a_stalled_responder(
    fake_agent: int, fabric: Fabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stalled responder (SIGSTOP: its NIC still answers READs, its process reads
    nothing) and a coordinator that leaves mid-fetch, which CoordinatorWatch turns into a
    shutdown of the probe's control channel: the fetch watches that channel between
    chunks and ends, instead of reading a million 8 KiB chunks for a run that is gone."""
    resumed = threading.Event()
    answer_end = integrity.answer_end

    def stall(*args: Any) -> None:  # the responder answers the ping-pong's end, then stops
        answer_end(*args)
        resumed.wait(30)

    monkeypatch.setattr(integrity, "answer_end", stall)
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    left: list[float] = []

    def leave() -> None:  # once the fetch's READs have begun (if never, the test fails below)
        with contextlib.suppress(AssertionError):
            eventually(
                lambda: sum(fabric.reads_by_qp.values()) >= 100,
                within_s=30,
                every_s=0.01,
                what="the fetch's READs begin",
            )
        left.append(time.monotonic())
        ch.sock.shutdown(socket.SHUT_RDWR)

    coordinator = threading.Thread(target=leave, daemon=True)
    coordinator.start()
    try:
        with ch, pytest.raises((NetqualError, OSError)):
            plan = _plan("nixl", 8 * KIB, 1_000_000)
            RdmaTransport(node_name="fakeA").initiate(ch, plan, time.monotonic() + 120, "x")
        assert left and time.monotonic() - left[0] < 3.0
        assert sum(fabric.reads_by_qp.values()) < 500_000
    finally:
        resumed.set()
        coordinator.join(5)


@pytest.mark.parametrize(("spoiled", "bad"), [("all", 4), ("third slice", 1)])
def test_every_slice_is_checked_for_the_responders_keyed_bytes(
    fake_agent: int, monkeypatch: pytest.MonkeyPatch, spoiled: str, bad: int
) -> None:
    """A responder area without the keyed bytes, or with one slice's part not the keyed
    bytes: the cell fails naming how many slices did not carry the peer's tag."""
    real = rdma_tags.fill_bulk

    def spoil(tags: rdma_tags.Tags, address: int) -> None:
        if spoiled != "all":
            real(tags, address)
            ctypes.memset(address + 2 * 64 * KIB, 0, 64 * KIB)

    monkeypatch.setattr(rdma_tags, "fill_bulk", spoil)
    cells, _details = _initiate(fake_agent, _plan("mooncake", 256 * KIB, 5))
    [cell] = cells
    assert cell.error == (
        f"measurement integrity check failed: {bad} of 4 fetched slices checked did not "
        "carry fakeB's session-key tag (something on the path answered for the node or "
        "altered the traffic)"
    )


@pytest.fixture
def two_agents(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Fabric, list[Node]]]:
    """A compute and a storage agent (threads) whose RDMA transport runs on one fake fabric."""
    from netqual.agent.server import Agent

    fabric = Fabric()
    monkeypatch.setitem(verbs._loaded, "pyverbs", module(fabric))
    agents, threads, nodes = [], [], []
    for name, role in (("c1", Role.COMPUTE), ("st", Role.STORAGE)):
        agent = Agent("127.0.0.1", 0, None, name=name, limits=AgentLimits())
        _host, port = agent.bind()
        threads.append(threading.Thread(target=agent.serve_forever, daemon=True))
        threads[-1].start()
        agents.append(agent)
        nodes.append(Node(name, "127.0.0.1", port, role=role))
    try:
        yield fabric, nodes
    finally:
        for agent, thread in zip(agents, threads, strict=True):
            agent.stop()
            thread.join(5)


def test_fanin_sweep_runs_mooncake_over_rdma(two_agents: tuple[Fabric, list[Node]]) -> None:
    """``run --fanin 1 --fetch-profile mooncake --transport rdma`` as the sweep drives it:
    8 ranks, each its own session with 2 QPs, one completion per chunk per rank."""
    from netqual.run.fanin import SweepContext, sweep

    fabric, nodes = two_agents
    ctx = SweepContext(TransportKind.RDMA, None, TransportOptions(), 2.0, 60.0)
    [st] = sweep(nodes, FaninConfig((1,), "mooncake", 128 * KIB, 5), ctx)
    [level] = st.levels
    assert st.profile == "mooncake" and level.errors == (), level
    assert level.chunk is not None and level.chunk.samples == 8 * 5
    assert sorted(fabric.reads_by_qp.values()) == [5] * 16  # 8 ranks x 2 QPs, a slice each


def test_a_session_plan_carries_qps_only_when_more_than_one() -> None:
    """An older responder reads a plan without ``qps`` as one QP (and would refuse more:
    the initiator then says so, test above); a profile's chunk is its whole slices."""
    from netqual.transports.rdma.session import SessionPlan

    one = SessionPlan.from_plan(_plan("plain", 100_000, 7))
    assert "qps" not in one.to_json() and one.chunks_bytes == (100_000,)
    assert SessionPlan.from_json(one.to_json()).qps == 1
    two = SessionPlan.from_plan(_plan("mooncake", 100_000, 7))
    assert two.to_json()["qps"] == 2 and two.chunks_bytes == (128 * KIB,)
    assert SessionPlan.from_json(two.to_json()) == two
