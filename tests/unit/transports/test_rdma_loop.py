"""Ping-pong, bulk read, QP set-up and teardown, run over in-process fake verbs.

The fake (tests/support/rdma_fakeverbs.py) moves bytes between registered buffers, so these tests
exercise the real polling, signalling, reaping, depth capping, error mapping and the
control-channel session; what they cannot show is timing on a NIC (test_rdma_hw.py).
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import socket
import threading
import time

import pytest
from eventually import eventually
from rdma_fakeverbs import Fabric, module
from rdma_fakeverbs_c import SilentDevice

from netqual.agent.wire.protocol import connect
from netqual.base.errors import ProbeError
from netqual.base.units import KIB
from netqual.model.plan import ProbePlan
from netqual.transports.rdma import RdmaOptions, bulk, devices, hotloop, pingpong, writer
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.transport import RdmaTransport


def _pair(fabric: Fabric, msg: int = 64, bulk_bytes: int = 1 << 20) -> tuple[Endpoint, Endpoint]:
    pv = module(fabric)
    sel = devices.choose(devices.scan(pv), RdmaOptions(), local_ip="127.0.0.1")
    a = Endpoint(pv, sel, msg_bytes=msg, bulk_bytes=bulk_bytes, send_wr=64)
    b = Endpoint(pv, sel, msg_bytes=msg, bulk_bytes=bulk_bytes, send_wr=64)
    a.connect(b.conninfo())
    b.connect(a.conninfo())
    return a, b


def _byte(ep: Endpoint, size: int = 64) -> ctypes.c_uint8:
    return ctypes.c_uint8.from_address(ep.buf + ep.recv_offset + size - 1)


def _loop(fabric: Fabric) -> str:
    return "compiled" if fabric.compiled else "python"


def test_initiator_pingpong_against_an_echoing_peer(fabric: Fabric) -> None:
    a, b = _pair(fabric)
    b_recv = b.buf + b.recv_offset

    def echo(addr: int, n: int) -> None:  # the peer answers each ping at once
        if addr == b_recv:
            _byte(a).value = _byte(b).value

    fabric.on_write = echo
    ran: dict[str, object] = {}
    rtt = pingpong.initiate(
        a,
        b.conninfo(),
        iterations=1000,
        warmup=100,
        size=64,
        deadline=time.monotonic() + 30,
        info=ran,
    )
    assert str(ran["pingpong_loop"]).startswith(_loop(fabric)), ran
    assert isinstance(ran["pingpong_user_cpu_ns_per_round"], int)
    assert rtt.shape == (1000,)
    assert (rtt > 0).all()
    assert _byte(a).value == 1100 & 0xFF  # the sequence byte wrapped four times
    # unsignalled writes never overflow the send queue: one signalled WR every 16
    assert fabric.max_sq_seen <= writer.SIGNAL_EVERY + 1
    a.close()
    b.close()


def test_responder_answers_every_round_then_stops(fabric: Fabric) -> None:
    a, b = _pair(fabric)
    a_recv, rounds = a.buf + a.recv_offset, 300
    pongs = []

    def next_ping(addr: int, n: int) -> None:
        if addr == a_recv:
            pongs.append(_byte(a).value)
            if len(pongs) < rounds:
                _byte(b).value = (len(pongs) + 1) & 0xFF

    fabric.on_write = next_ping
    _byte(b).value = 1
    quiet, _other = socket.socketpair()
    done = pingpong.respond(
        b, a.conninfo(), rounds=rounds, size=64, deadline=time.monotonic() + 30, abort=quiet
    )
    assert done == rounds
    assert pongs == [(i + 1) & 0xFF for i in range(rounds)]


def test_responder_stops_when_the_initiator_speaks(fabric: Fabric) -> None:
    a, b = _pair(fabric)
    mine, theirs = socket.socketpair()
    theirs.sendall(b"x")
    done = pingpong.respond(
        b, a.conninfo(), rounds=10, size=64, deadline=time.monotonic() + 30, abort=mine
    )
    assert done == 0


def test_silent_peer_times_out_with_own_deadline(fabric: Fabric) -> None:
    a, b = _pair(fabric)
    start = time.monotonic()
    with pytest.raises(ProbeError, match=r"timed out after 0 of 20 round trips"):
        pingpong.initiate(
            a, b.conninfo(), iterations=10, warmup=10, size=64, deadline=time.monotonic() + 0.3
        )
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("qp_gone", [True, False])
def test_responder_closing_the_channel_ends_the_pingpong_at_once(
    fabric: Fabric, qp_gone: bool
) -> None:
    """A killed responder agent: its channel closes; the confirming write tells the rest."""
    a, b = _pair(fabric)
    first_post = a.qp.post_send
    posts: list[object] = []

    def post(wr: object, bad_wr: object = None) -> None:  # the first ping lands; then the
        if posts and qp_gone:  # peer's QP is gone: the next write exhausts its retries
            fabric.fail_status = 12
        posts.append(wr)
        first_post(wr)

    a.qp.post_send = post
    mine, theirs = socket.socketpair()
    theirs.close()
    start = time.monotonic()
    with pytest.raises(ProbeError) as caught:
        pingpong.initiate(
            a,
            b.conninfo(),
            iterations=10,
            warmup=10,
            size=64,
            deadline=time.monotonic() + 60,
            channel=mine,
        )
    text = str(caught.value)
    assert text.startswith("rdma ping-pong: the responder closed the control channel")
    assert text.endswith("(after 0 of 20 round trips)")
    if qp_gone:
        assert "IBV_WC_RETRY_EXC_ERR (retry exceeded: peer unreachable or QP gone)" in text
    else:
        assert "yet a write to its QP still completes" in text
    assert time.monotonic() - start < 30  # not the 60 s deadline
    assert len(posts) == 2  # the ping, and the one confirming write


def test_completion_error_names_the_wc_status(fabric: Fabric) -> None:
    a, b = _pair(fabric)
    fabric.fail_status = 12
    with pytest.raises(ProbeError) as info:
        pingpong.initiate(
            a, b.conninfo(), iterations=10, warmup=0, size=64, deadline=time.monotonic() + 10
        )
    assert "IBV_WC_RETRY_EXC_ERR (retry exceeded: peer unreachable or QP gone)" in str(info.value)


def test_bulk_read_moves_the_bytes_and_caps_depth(fabric: Fabric) -> None:
    a, b = _pair(fabric, bulk_bytes=16 * 64 * KIB)
    ctypes.memset(b.buf + b.bulk_offset, 0x5A, 64 * KIB)
    a.rd_atomic = 4  # as if the peer served only 4 reads at once
    cell = bulk.read_cell(
        a, b.conninfo(), chunk=64 * KIB, depth=32, reads=100, deadline=time.monotonic() + 30
    )
    assert cell.depth == 32 and cell.error is None
    assert cell.completion_ns.shape == (100,)
    assert (cell.completion_ns >= 0).all() and cell.elapsed_ns > 0
    assert ctypes.string_at(a.buf + a.bulk_offset, 64 * KIB) == b"\x5a" * (64 * KIB)
    assert fabric.max_sq_seen <= 4


def test_bulk_read_with_a_stale_rkey_is_a_remote_access_error(fabric: Fabric) -> None:
    a, b = _pair(fabric)
    b.mr.close()  # the peer restarted: its rkey is gone
    with pytest.raises(ProbeError, match=r"RDMA READ completion failed: IBV_WC_REM_ACCESS_ERR"):
        bulk.read_cell(
            a, b.conninfo(), chunk=4096, depth=1, reads=3, deadline=time.monotonic() + 10
        )


@pytest.mark.parametrize(
    ("state", "code", "words"),
    [
        ("RTR", 22, r"RTR failed \(EINVAL.*bad GID index, path MTU or rd_atomic"),
        ("RTR", 110, r"RTR failed \(ETIMEDOUT.*MAC address could not be resolved"),
        ("RTS", 22, r"RTS failed \(EINVAL"),
    ],
)
def test_qp_transition_failure_in_plain_words(
    fabric: Fabric, state: str, code: int, words: str
) -> None:
    pv = module(fabric)
    sel = devices.choose(devices.scan(pv), RdmaOptions(), local_ip="127.0.0.1")
    a = Endpoint(pv, sel, msg_bytes=64, bulk_bytes=4096, send_wr=64)
    fabric.fail_transition = (state, code)
    with pytest.raises(ProbeError, match=words):
        a.connect(a.conninfo())
    a.close()


def test_connect_negotiates_rd_atomic_mtu_and_hop_limit(fabric: Fabric) -> None:
    a, _b = _pair(fabric)
    rtr = a.qp.attrs["RTR"]
    assert rtr["ah_attr"].hop_limit == 255 and rtr["ah_attr"].is_global == 1
    assert rtr["ah_attr"].sgid_index == 3  # the RoCE v2 GID of 127.0.0.1
    assert a.qp.attrs["RTS"]["max_rd_atomic"] == a.rd_atomic == 16
    assert rtr["path_mtu"] == 3


def test_close_releases_children_first_and_twice_is_harmless(fabric: Fabric) -> None:
    a, _b = _pair(fabric)
    fabric.closed.clear()
    assert a.close() == []
    assert fabric.closed == ["qp", "cq", "mr", "pd", "ctx"]
    assert a.close() == []
    assert fabric.closed == ["qp", "cq", "mr", "pd", "ctx"]


def test_full_session_over_the_control_channel(fake_agent: int, fabric: Fabric) -> None:
    plan = ProbePlan(
        iterations=200,
        warmup=20,
        size_bytes=64,
        chunks_bytes=(64 * KIB,),
        depths=(1, 4),
        bulk_bytes=64 * KIB * 8,
        min_reads=8,
    )
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch:
        raw = RdmaTransport(node_name="fakeA").initiate(
            ch, plan, time.monotonic() + 60, "127.0.0.1"
        )
    assert raw.rtt_ns.shape == (200,) and raw.warmup_discarded == 20
    assert [(c.chunk_bytes, c.depth, len(c.completion_ns)) for c in raw.bulk] == [
        (64 * KIB, 1, 8),
        (64 * KIB, 4, 8),
    ]
    assert raw.details["device"] == "fake0" and raw.details["gid_type"] == "RoCEv2"
    assert raw.details["responder_rounds"] == 220
    assert raw.details["peer"]["device"] == "fake0"
    assert raw.details["bulk_depth_cap"] == 16
    for loop in (raw.details["pingpong_loop"], raw.details["peer"]["pingpong_loop"]):
        assert loop.startswith(_loop(fabric)), loop
    if not fabric.compiled:
        assert raw.details["pingpong_loop"] == (
            "python (pyverbs; this pyverbs does not give the compiled loop its QP)"
        )


def test_full_session_checks_the_channel_on_every_poll(
    fake_agent: int, fabric: Fabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ends go through their deadline, completion and abort checks after every byte
    poll: a quiet control channel never ends a ping-pong early, on either side."""
    monkeypatch.setattr(writer, "SPINS_PER_CHECK", 1)
    plan = ProbePlan(iterations=300, warmup=30, size_bytes=64, bulk=False)
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch:
        raw = RdmaTransport(node_name="fakeA").initiate(
            ch, plan, time.monotonic() + 60, "127.0.0.1"
        )
    assert raw.rtt_ns.shape == (300,)
    assert raw.details["responder_rounds"] == 330


@pytest.mark.parametrize("round_", [1, 17, 192])
def test_responder_that_stops_early_tells_the_initiator_at_once(
    fake_agent: int, fabric: Fabric, round_: int
) -> None:
    """The responder's write of round N fails (its QP errs): it says so on the control
    channel, and the initiator stops with that reason at once instead of spinning on a
    reply that never comes until its own deadline (60 s here)."""
    # QP numbers are handed out in order: this end's QP next, then the responder's
    fabric.fail_write = (next(fabric.qpns) + 2, round_)
    plan = ProbePlan(iterations=200, warmup=20, size_bytes=64, bulk=False)
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    start = time.monotonic()
    with ch, pytest.raises(ProbeError) as caught:
        RdmaTransport(node_name="fakeA").initiate(ch, plan, start + 60, "127.0.0.1")
    assert time.monotonic() - start < 10
    assert str(caught.value) == (
        "rdma ping-pong: the responder stopped early: rdma RDMA WRITE completion failed: "
        "IBV_WC_RETRY_EXC_ERR (retry exceeded: peer unreachable or QP gone); no ACK within "
        "67.11 ms, 6 retries (QP timeout 14: raise --rdma-qp-timeout for a slow responder, "
        f"e.g. rxe/siw on a loaded host, or a long-haul link) (after {round_ - 1} of 220 "
        "round trips)"
    )


def test_responder_refuses_a_plan_over_its_limits(fake_agent: int) -> None:
    plan = ProbePlan(iterations=2_000_000, warmup=0, bulk=False)
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with (
        ch,
        pytest.raises(
            Exception, match=r"iterations\+warmup 2000000 exceeds max_iterations=1000000"
        ),
    ):
        RdmaTransport(node_name="fakeA").initiate(ch, plan, time.monotonic() + 30, "127.0.0.1")


def test_initiator_failure_after_connect_releases_both_ends(
    fake_agent: int, fabric: Fabric
) -> None:
    fabric.fail_transition = ("RTR", 22)
    fabric.fail_transition_skip = 1  # the responder's RTR succeeds, the initiator's fails
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch, pytest.raises(ProbeError, match=r"RTR failed \(EINVAL"):
        RdmaTransport(node_name="fakeA").initiate(
            ch, ProbePlan(iterations=50, warmup=0, bulk=False), time.monotonic() + 30, "127.0.0.1"
        )
    # The responder tears down in its own thread: wait for its last release (the context),
    # not for an interval that a loaded machine may not honour.
    eventually(
        lambda: fabric.closed.count("ctx") >= 4,
        within_s=10,
        every_s=0.01,
        what=lambda: f"the responder's last release (its context): {fabric.closed}",
    )
    for kind in ("qp", "cq", "mr", "pd"):
        assert fabric.closed.count(kind) == 2, (kind, fabric.closed)
    assert fabric.closed.count("ctx") == 4  # two device scans and two endpoints


def test_failed_bulk_cell_keeps_the_rtt_and_skips_later_cells(
    fake_agent: int, fabric: Fabric
) -> None:
    fabric.fail_read_status = 12
    plan = ProbePlan(
        iterations=50,
        warmup=5,
        chunks_bytes=(4 * KIB, 8 * KIB),
        depths=(1,),
        bulk_bytes=16 * KIB,
        min_reads=2,
    )
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch:
        raw = RdmaTransport(node_name="fakeA").initiate(
            ch, plan, time.monotonic() + 30, "127.0.0.1"
        )
    assert raw.rtt_ns.shape == (50,)
    first, second = raw.bulk
    assert (
        first.error is not None
        and "RDMA READ completion failed: IBV_WC_RETRY_EXC_ERR" in first.error
    )
    assert second.error == "not run: an earlier bulk cell failed"
    assert len(second.completion_ns) == 0


def test_a_qp_handle_that_fails_its_check_runs_the_python_loop_and_says_why() -> None:
    if isinstance(lib := hotloop.library(), str):
        pytest.skip(lib)
    fabric = Fabric()
    fabric.compiled = True
    a, b = _pair(fabric)
    a.pv = dataclasses.replace(a.pv, qp_address=lambda qp: 8)
    ran: dict[str, object] = {}
    _byte(a).value = 0

    def echo(addr: int, n: int) -> None:
        _byte(a).value = _byte(b).value

    fabric.on_write = echo
    pingpong.initiate(
        a, b.conninfo(), iterations=20, warmup=0, size=64, deadline=time.monotonic() + 30, info=ran
    )
    assert ran["pingpong_loop"] == (
        "python (pyverbs; the QP handle found at 0x8 is not readable memory)"
    )


@pytest.mark.parametrize("case", ["forced", "not built", "no QP address"])
def test_doctor_and_every_pingpong_choose_the_loop_alike(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # hotloop.chosen: one decision, worded by the doctor and by the path's details
    monkeypatch.delenv(hotloop.LOOP_ENV, raising=False)
    fabric = Fabric()
    fabric.compiled = True
    a, _ = _pair(fabric)
    qp_class: type | None = type(a.qp)
    if case == "forced":
        monkeypatch.setenv(hotloop.LOOP_ENV, "Python ")
        why, doctor = hotloop.FORCED, "python loop (NETQUAL_RDMA_LOOP=python)"
    elif case == "not built":
        monkeypatch.setitem(hotloop._cache, "lib", "the compiled loop was not built (test)")
        why = "the compiled loop was not built (test)"
        doctor = f"python loop: {why}"
    else:
        if isinstance(lib := hotloop.library(), str):
            pytest.skip(lib)
        a.pv = dataclasses.replace(a.pv, qp_address=lambda qp: None)
        qp_class = None
        why = "this pyverbs does not give the compiled loop its QP"
        doctor = f"python loop: {why}"
    assert pingpong.loop_name(a) == f"python (pyverbs; {why})"
    assert hotloop.status(qp_class) == (False, doctor)


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize("raises", [True, False])
def test_a_signal_reaches_its_handler_during_the_wait(fabric: Fabric, raises: bool) -> None:
    """Ctrl-C (or any handled signal) while waiting on a silent peer: the handler runs at
    once, also while the compiled loop holds no GIL (it watches Python's signal wakeup fd
    and returns); a handler that raises ends the ping-pong, one that returns lets the
    rounds resume, without a second write, until their own deadline. The compiled loop
    runs on a device of C alone here: a Python callback inside the loop would let the
    handler run without the wakeup."""
    a, b = _pair(fabric)
    if fabric.compiled:
        lib = hotloop.library()
        assert not isinstance(lib, str)
        silent = SilentDevice(int(a.qp.qp_num), lib.layout)
        a.pv = dataclasses.replace(a.pv, qp_address=lambda qp: silent.address)
    seen: list[float] = []

    def handler(signum: int, frame: object) -> None:
        seen.append(time.monotonic())
        if raises:
            raise _Interrupted()

    old = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    start = time.monotonic()
    ran: dict[str, object] = {}
    try:
        timer.start()
        expected = _Interrupted if raises else ProbeError
        with pytest.raises(expected, match=None if raises else r"timed out after 0 of 20"):
            pingpong.initiate(
                a,
                b.conninfo(),
                iterations=10,
                warmup=10,
                size=64,
                deadline=start + (60 if raises else 1.5),
                info=ran,
            )
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, old)
    assert str(ran["pingpong_loop"]).startswith(_loop(fabric))
    assert len(seen) == 1 and seen[0] - start < 5
    if raises:
        assert time.monotonic() - start < 5  # not the 60 s deadline
    else:
        assert time.monotonic() - start >= 1.5
    if not fabric.compiled:
        assert a.qp.writes == 1  # the one ping: a resumed wait posts nothing again
