"""Ping-pong the way perftest's ``ib_write_lat`` does it, timed as a full round trip.

Each side spins on the last byte of its receive area until it holds the round's sequence
byte, then RDMA-WRITEs its own message (inline when the device allows) into the peer's
receive area. No receive queue, no completion on the passive side, no WC object per
message: the only Python work per round trip is one ``post_send`` and a byte poll. Only
every ``SIGNAL_EVERY``-th write asks for a completion, reaped outside the timed section,
so the send queue never fills. The initiator times ``post -> peer's write landed``: the
full RTT (``ib_write_lat`` prints half of it).

The last byte lands last for a message within one MTU (RDMA WRITE places data in order
within a packet; across packets every IB/RoCE NIC we know of places in order too).

Bound to the session key like TCP's (``netqual.transports.integrity``, the one rule): each
ping starts with the initiator's challenge for the round; the responder's reply is the ping
itself, written back from where it landed (no copy: the plain echo of before), except in
the keyed *tagged* rounds, whose reply starts with the responder's tag. ``Tags`` holds the
blocks either end copies in and out (``tags.py``); the initiator's copies fall outside
its timed span.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import resource
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.base.errors import ProbeError
from netqual.transports.rdma import hotloop
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.tags import Tags, untagged
from netqual.transports.rdma.writer import (
    PINGPONG_WR_ID,
    SIGNAL_EVERY,
    Aborted,
    PeerNotice,
    Writer,
    confirm_peer_gone,
)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """A collection inside the timed loop would be a multi-ms outlier that is not the network."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _PythonRounds:
    """The timed rounds in Python over pyverbs: the fallback, and the reference semantics."""

    name = "python"

    def __init__(self, w: Writer, tags: Tags, why: str) -> None:
        self.w, self.tags, self.why, self.done = w, tags, why, 0

    def initiate(
        self,
        warmup: int,
        samples: npt.NDArray[np.int64],
        deadline: float,
        channel: socket.socket | None,
    ) -> None:
        w, clock, move = self.w, time.perf_counter_ns, ctypes.memmove
        width = self.tags.width
        blocks, got = self.tags.blocks.ctypes.data, self.tags.got.ctypes.data
        send, recv = w.send_area, w.recv_area
        for i in range(warmup + len(samples)):
            seq = (i + 1) & 0xFF  # consecutive rounds always differ, so wrap-around is safe
            move(send, blocks + i * width, width)  # round i's challenge, before t0
            w.send_byte.value = seq
            t0 = clock()
            w.post()
            w.wait(seq, deadline, channel)
            t1 = clock()
            move(got + i * width, recv, width)  # the reply's head, after t1
            if i >= warmup:
                samples[i - warmup] = t1 - t0
            if w.unreaped:
                w.reap()
            self.done = i + 1

    def respond(self, rounds: int, deadline: float, abort: socket.socket) -> None:
        w, move, width = self.w, ctypes.memmove, self.tags.width
        blocks, got = self.tags.blocks.ctypes.data, self.tags.got.ctypes.data
        send, recv = w.send_area, w.recv_area
        marks = [int(m) for m in self.tags.marks]
        k, nxt = 0, marks[0]
        for i in range(rounds):
            seq = (i + 1) & 0xFF
            w.wait(seq, deadline, abort)
            if i == nxt:  # a tagged round (every round): answer with our tag
                move(got + k * width, recv, width)
                move(send, blocks + i * width, width)
                w.send_byte.value = seq
                w.post()
                k += 1
                nxt = marks[k]
            else:
                w.post(echo=True)  # the ping as it landed: no copy, as before
            if w.unreaped:
                w.reap()
            self.done = i + 1


class _CompiledRounds:
    """The same rounds in hotloop.c, GIL released; its status codes become the exceptions
    the Python loop raises, so both share every line of error handling below."""

    name = "compiled"

    def __init__(self, w: Writer, tags: Tags, lib: hotloop.Library, qp_address: int) -> None:
        self.w, self.tags, self.lib, self.done = w, tags, lib, 0
        self.state = hotloop.LoopState(
            qp=qp_address,
            send_addr=w.send_area,
            recv_addr=w.recv_area,
            remote_addr=w.remote_addr,
            lkey=w.lkey,
            rkey=w.rkey,
            size=w.size,
            send_flags=w.flags,
            wr_id=PINGPONG_WR_ID,
            abort_fd=-1,
            signal_fd=-1,
            blocks_addr=tags.blocks.ctypes.data,
            got_addr=tags.got.ctypes.data,
            marks_addr=tags.marks.ctypes.data,
            width=tags.width,
        )

    def _run(self, abort: socket.socket | None, call: Callable[[], tuple[int, int]]) -> None:
        st, w = self.state, self.w
        st.abort_fd = abort.fileno() if abort is not None else -1
        st.posted, st.unreaped = w.posted, w.unreaped
        with hotloop.signal_wakeup() as wakeup:
            st.signal_fd = wakeup
            status, done = call()
            while status == hotloop.SIGNAL:
                # Back in the interpreter, the signal's handler runs (Ctrl-C raises here,
                # as in the Python loop); a handler that returns lets the rounds resume.
                hotloop.drain(wakeup)
                status, done = call()
        w.posted, w.unreaped = int(st.posted), int(st.unreaped)  # the confirming write goes on
        self.done = done
        if status == hotloop.TIMEOUT:
            raise TimeoutError("no reply from the peer")
        if status == hotloop.ABORTED:
            raise Aborted()
        if status == hotloop.WC_ERROR:
            raise w.ep.completion_error("RDMA WRITE", int(st.wc_status), int(st.vendor_err))
        if status == hotloop.POST_ERROR:
            code = abs(int(st.post_errno))
            raise ProbeError(f"rdma post_send failed: {errno.errorcode.get(code, code)}")

    def initiate(
        self,
        warmup: int,
        samples: npt.NDArray[np.int64],
        deadline: float,
        channel: socket.socket | None,
    ) -> None:
        self._run(
            channel,
            lambda: hotloop.initiate(
                self.lib,
                self.state,
                warmup=warmup,
                iterations=len(samples),
                deadline_ns=_ns(deadline),
                samples_address=samples.ctypes.data,
            ),
        )

    def respond(self, rounds: int, deadline: float, abort: socket.socket) -> None:
        self._run(
            abort,
            lambda: hotloop.respond(self.lib, self.state, rounds=rounds, deadline_ns=_ns(deadline)),
        )


def _cpu_per_round(before: resource.struct_rusage, rounds: int) -> dict[str, int]:
    """This thread's CPU time per round trip (both ends busy-poll, as perftest does: user
    time is about the RTT; system time counts the loop's syscalls, the abort checks)."""
    after = resource.getrusage(resource.RUSAGE_THREAD)
    per = 1e9 / max(1, rounds)
    return {
        "pingpong_user_cpu_ns_per_round": round((after.ru_utime - before.ru_utime) * per),
        "pingpong_sys_cpu_ns_per_round": round((after.ru_stime - before.ru_stime) * per),
    }


def _ns(deadline: float) -> int:
    """time.monotonic() seconds -> CLOCK_MONOTONIC ns, what the C loop reads."""
    return min(int(deadline * 1e9), 2**63 - 1)


Rounds = _PythonRounds | _CompiledRounds


def compiled_loop(ep: Endpoint) -> tuple[hotloop.Library, int] | str:
    """The compiled loop and the address of ``ep``'s ibv_qp, or why the Python loop runs
    (``hotloop.chosen``, then the QP found is checked)."""
    found = hotloop.chosen(lambda: ep.pv.qp_address(ep.qp))
    if isinstance(found, str):
        return found
    problem = hotloop.check_qp(found[0], found[1], int(ep.qp.qp_num))
    return problem if problem is not None else found


def loop_name(ep: Endpoint) -> str:
    """Which loop a ping-pong on ``ep`` runs, in words (results' details, doctor)."""
    found = compiled_loop(ep)
    return COMPILED_NAME if not isinstance(found, str) else f"python (pyverbs; {found})"


COMPILED_NAME = "compiled (hotloop.c, GIL released, CLOCK_MONOTONIC)"


def _rounds(w: Writer, tags: Tags) -> Rounds:
    found = compiled_loop(w.ep)
    if isinstance(found, str):
        return _PythonRounds(w, tags, found)
    return _CompiledRounds(w, tags, *found)


def initiate(
    ep: Endpoint,
    peer: ConnInfo,
    *,
    iterations: int,
    warmup: int,
    size: int,
    deadline: float,
    channel: socket.socket | None = None,
    notice: PeerNotice | None = None,
    info: dict[str, Any] | None = None,
    tags: Tags | None = None,
) -> npt.NDArray[np.int64]:
    """Run warmup + iterations round trips; return the kept full-RTT samples (ns).
    ``channel``: the control socket. The responder says nothing on it during the ping-pong
    unless it stops early, so it turning readable means the responder stopped (``notice``
    reads why) or is gone (closed: a confirming write tells what became of its QP).
    ``info`` (when given) receives which loop ran and the CPU time it took per round.
    ``tags``: the challenges to send and room for the replies' heads (none: zeros)."""
    w = Writer(ep, peer, size)
    rounds = _rounds(w, tags or untagged(warmup + iterations, size))
    if info is not None:
        info["pingpong_loop"] = loop_description(rounds)
    samples = np.empty(iterations, dtype=np.int64)
    total = warmup + iterations
    with _no_gc():
        try:
            before = resource.getrusage(resource.RUSAGE_THREAD)
            rounds.initiate(warmup, samples, deadline, channel)
            if info is not None:
                info.update(_cpu_per_round(before, total))
        except Aborted:
            said = notice() if notice is not None else None
            why = said if said is not None else confirm_peer_gone(w, deadline)
            raise ProbeError(
                f"rdma ping-pong: {why} (after {rounds.done} of {total} round trips)"
            ) from None
        except TimeoutError as err:
            raise ProbeError(
                f"rdma ping-pong timed out after {rounds.done} of {total} round trips: {err}"
            ) from err
        except ProbeError as err:
            raise ProbeError(f"{err.problem} (after {rounds.done} of {total} round trips)") from err
    return samples


def respond(
    ep: Endpoint,
    peer: ConnInfo,
    *,
    rounds: int,
    size: int,
    deadline: float,
    abort: socket.socket,
    tags: Tags | None = None,
) -> int:
    """Answer ``rounds`` pings. Returns the rounds completed; stops early if aborted.
    ``tags``: this end's tags and tagged rounds (none: every round echoes)."""
    loop = _rounds(Writer(ep, peer, size), tags or untagged(rounds, size))
    with _no_gc():
        try:
            loop.respond(rounds, deadline, abort)
        except Aborted:
            return loop.done
        except TimeoutError as err:
            raise ProbeError(
                f"rdma ping-pong responder timed out after {loop.done} of {rounds} rounds: {err}"
            ) from err
    return loop.done


def loop_description(rounds: Rounds) -> str:
    if isinstance(rounds, _CompiledRounds):
        return COMPILED_NAME
    return f"python (pyverbs; {rounds.why})"


def pingpong_details(ep: Endpoint, size: int) -> dict[str, Any]:
    return {
        "pingpong_method": "rdma-write, poll last byte (as ib_write_lat), full RTT",
        "pingpong_inline": ep.inline_bytes >= size,
        "inline_bytes": ep.inline_bytes,
        "signal_every": SIGNAL_EVERY,
    }
