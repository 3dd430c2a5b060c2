"""RDMA ping-pong bound to the session key (transports/rdma/tags.py, the rule of
transports/integrity.py), over the fake verbs with both loops (Python and hotloop.c): an
honest responder passes; one without the key (forged tags) or one that only echoes
(replays the challenges it was sent) fails with the integrity reason naming the peer,
and the responder logs it. The same cases over real verbs, in the Soft-RoCE guest:
tests/support/rxe_forged_echo.py."""

from __future__ import annotations

import dataclasses
import logging
import os
import time

import numpy as np
import pytest
from rdma_fakeverbs import Fabric, module

from netqual.agent.wire.protocol import Channel, connect
from netqual.model.plan import ProbePlan
from netqual.transports import integrity
from netqual.transports.integrity import IntegrityFailure
from netqual.transports.rdma import RdmaOptions, devices, pingpong
from netqual.transports.rdma import tags as rdma_tags
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.transport import RdmaTransport

PLAN = ProbePlan(iterations=600, warmup=20, size_bytes=64, bulk=False)


def _probe(port: int, plan: ProbePlan = PLAN) -> None:
    ch, _hello = connect("127.0.0.1", port, None, peer="fakeB")
    with ch:
        RdmaTransport(node_name="fakeA").initiate(ch, plan, time.monotonic() + 60, "127.0.0.1")


@pytest.mark.parametrize("size", [1, 2, 9, 64, 4000])
def test_an_honest_responder_passes_every_message_size(fake_agent: int, size: int) -> None:
    _probe(fake_agent, ProbePlan(iterations=300, warmup=10, size_bytes=size, bulk=False))


def test_a_responder_without_the_key_fails_naming_the_peer(
    fake_agent: int,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Something that answers for fakeB without its session key: its tags are its own."""
    real = Channel.measurement_key

    def forged(self: Channel, *, responder: bool) -> bytes | None:
        return os.urandom(32) if responder else real(self, responder=responder)

    monkeypatch.setattr(Channel, "measurement_key", forged)
    with caplog.at_level(logging.WARNING, "netqual.agent"), pytest.raises(IntegrityFailure) as e:
        _probe(fake_agent)
    assert str(e.value).startswith("measurement integrity check failed: ")
    assert "ping-pong replies did not carry fakeB's session-key tag" in str(e.value)
    # Every round is tagged, so every reply carries the wrong key's tag.
    assert "620 of 620 ping-pong replies" in str(e.value)
    assert "rdma ping-pong integrity check failed" in caplog.text  # the responder's log


def test_a_responder_that_only_echoes_fails(
    fake_agent: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay: every ping written back as it came (what anything on the path can do
    without the key); the tagged rounds lack the tag."""

    real = rdma_tags.for_responder

    def echo_only(ch: Channel, nonce: bytes, count: int, size: int, bulk: int) -> rdma_tags.Tags:
        honest = real(ch, nonce, count, size, bulk)
        return dataclasses.replace(rdma_tags.untagged(count, size), bulk=honest.bulk)

    monkeypatch.setattr(rdma_tags, "for_responder", echo_only)
    with pytest.raises(IntegrityFailure, match=r"620 of 620 ping-pong replies did not carry"):
        _probe(fake_agent)


def test_replies_are_checked_head_by_head() -> None:
    """The initiator's side alone: every reply must start with the responder's tag for its
    round; one wrong byte, or the challenge echoed, is one bad reply."""
    count, size, nonce, key = 600, 64, b"n" * 16, b"k" * 32
    t = rdma_tags.for_initiator(count, size)
    w = t.width
    stream = integrity.responder_tags(key, rdma_tags.WHAT, nonce, count, w)
    replies = bytearray(stream)
    check = integrity.check_replies
    challenges = t.blocks.tobytes()
    assert check(key, rdma_tags.WHAT, nonce, challenges, bytes(replies), count) == 0
    replies[0] ^= 1
    replies[7 * w : 8 * w] = challenges[7 * w : 8 * w]  # one round echoed (forged)
    assert check(key, rdma_tags.WHAT, nonce, challenges, bytes(replies), count) == 2
    assert rdma_tags.tag_width(1) == 0 and rdma_tags.tag_width(5) == 4
    assert rdma_tags.tag_width(64) == 8


def test_every_round_is_tagged() -> None:
    """The responder's marks list every round, so no round can be forged unseen."""
    ch = type("Ch", (), {"measurement_key": lambda self, responder: b"k" * 32})()
    t = rdma_tags.for_responder(ch, b"n" * 16, 300, 64, 0)
    assert t.marks.tolist() == [*range(300), 300] and len(t.got) == 300 * t.width


def test_the_loop_copies_only_outside_the_timed_span(fabric: Fabric) -> None:
    """Both loops fill ``got`` with the reply heads: with an echoing fake peer the heads
    are the challenges sent, round by round."""
    pv = module(fabric)
    sel = devices.choose(devices.scan(pv), RdmaOptions(), local_ip="127.0.0.1")
    a, b = (Endpoint(pv, sel, msg_bytes=64, bulk_bytes=1 << 20, send_wr=64) for _ in "ab")
    a.connect(b.conninfo())
    b.connect(a.conninfo())
    b_recv = b.buf + b.recv_offset

    def echo(addr: int, n: int) -> None:  # the peer writes the ping back at once
        if addr == b_recv:
            import ctypes

            ctypes.memmove(a.buf + a.recv_offset, b_recv, 64)

    fabric.on_write = echo
    t = rdma_tags.for_initiator(120, 64)
    pingpong.initiate(a, b.conninfo(), iterations=100, warmup=20, size=64,
                      deadline=time.monotonic() + 30, tags=t)  # fmt: skip
    assert np.array_equal(t.got, t.blocks) and t.blocks.any()


@pytest.mark.parametrize("depth", [1, 4])
def test_bulk_reads_without_the_keyed_content_fail_the_cell(
    fake_agent: int,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    depth: int,
) -> None:
    """READs answered from memory that does not hold the responder's keyed bytes (what
    something answering for the node without its key returns): the cell fails with the
    integrity reason, the cells after it are not run; the honest control passes."""
    plan = ProbePlan(
        iterations=100, warmup=10, size_bytes=64, chunks_bytes=(64 * 1024, 4096),
        depths=(depth,), bulk_bytes=64 * 1024 * 8, min_reads=8,
    )  # fmt: skip
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch:
        raw = RdmaTransport(node_name="fakeA").initiate(ch, plan, time.monotonic() + 60, "x")
    assert [c.error for c in raw.bulk] == [None, None]

    monkeypatch.setattr(rdma_tags, "fill_bulk", lambda tags, address: None)
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch, caplog.at_level(logging.WARNING, "netqual.transports.rdma.transport"):
        raw = RdmaTransport(node_name="fakeA").initiate(ch, plan, time.monotonic() + 60, "x")
    slots = min(depth, 8)
    assert raw.bulk[0].error == (
        f"measurement integrity check failed: {slots} of {slots} bulk reads checked did not "
        "carry fakeB's session-key tag (something on the path answered for the node or "
        "altered the traffic)"
    )
    assert raw.bulk[1].error == "not run: an earlier bulk cell failed"
    assert len(raw.rtt_ns) == 100  # the ping-pong checked out and is kept
    assert "rdma bulk read from fakeB: measurement integrity check failed" in caplog.text
