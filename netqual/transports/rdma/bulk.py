"""Bulk read: RDMA READ of ``chunk_bytes`` with ``depth`` reads outstanding.

The responder's CPU takes no part (that is what KV-cache offload over RDMA looks like).
Outstanding reads are capped by the negotiated ``max_rd_atomic`` (own
``max_qp_init_rd_atom`` and the peer's ``max_qp_rd_atom``): more would only queue in the
send queue and inflate per-read completion time with waiting that the engine would not see.
Per read we time post -> its completion polled; the cell's elapsed time runs from the
first post to the last completion.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import numpy as np

from netqual.base.errors import ProbeError
from netqual.transports.integrity import IntegrityFailure
from netqual.transports.interface import RawBulk
from netqual.transports.rdma import verbs
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.session import SessionPlan
from netqual.transports.rdma.tags import BulkCheck
from netqual.transports.rdma.writer import PINGPONG_WR_ID

# The transport's logger: an integrity failure is logged where the session's are.
log = logging.getLogger("netqual.transports.rdma.transport")

LOCAL_BULK_CAP_BYTES = 256 << 20  # reads beyond this many bytes in flight share landing slots
EMPTY_POLLS_PER_CHECK = 1024


class ReadCompletions:
    """The RDMA READ completions on an endpoint's CQ, found by polling: the one completion
    loop of bulk reads (``read_cell``) and fetches (``fetch.read_chunks``). A late ping-pong
    completion on the shared CQ is passed over; a failed READ raises the endpoint's
    completion error. Empty polls are counted over the object's life, and every
    ``EMPTY_POLLS_PER_CHECK`` of them the deadline is looked at, however often reads end."""

    def __init__(self, ep: Endpoint, deadline: float) -> None:
        self.ep = ep
        self.deadline = deadline
        self.empty = 0

    def wait(self, most: int, timed_out: Callable[[], str]) -> tuple[int, list[int]]:
        """Polls (``most`` a poll) until READs complete: the clock (``perf_counter_ns``)
        when they were found, and their work request ids. Past the deadline: ProbeError
        saying ``timed_out()``."""
        poll, empty = self.ep.cq.poll, self.empty
        while True:
            count, wcs = poll(most)
            if not count:
                empty += 1
                if empty % EMPTY_POLLS_PER_CHECK == 0 and time.monotonic() > self.deadline:
                    self.empty = empty
                    raise ProbeError(timed_out())
                continue
            now = time.perf_counter_ns()
            done = []
            for wc in wcs[:count]:
                if wc.wr_id == PINGPONG_WR_ID:
                    continue  # a late ping-pong write completion on the shared CQ
                if wc.status != 0:
                    self.empty = empty
                    raise self.ep.completion_error("RDMA READ", int(wc.status), int(wc.vendor_err))
                done.append(int(wc.wr_id))
            if done:
                self.empty = empty
                return now, done


def effective_depth(depth: int, rd_atomic: int) -> int:
    return max(1, min(depth, rd_atomic))


def landing_bytes(chunks: tuple[int, ...], depths: tuple[int, ...], rd_atomic: int) -> int:
    """Bytes of local memory the initiator registers for READ destinations."""
    most = 0
    for chunk in chunks:
        for depth in depths:
            slots = max(1, min(effective_depth(depth, rd_atomic), LOCAL_BULK_CAP_BYTES // chunk))
            most = max(most, slots * chunk)
    return most


def landing_slots(ep: Endpoint, chunk: int, depth: int) -> int:
    """Chunk-sized places in the landing area a cell's reads cycle through (read i lands in
    slot ``(i mod inflight) mod slots``)."""
    return max(1, min(effective_depth(depth, ep.rd_atomic), ep.bulk_bytes // chunk))


def read_cell(
    ep: Endpoint, peer: ConnInfo, *, chunk: int, depth: int, reads: int, deadline: float
) -> RawBulk:
    """One (chunk, depth) cell; ``depth`` is the requested depth, capped by ep.rd_atomic."""
    if chunk > peer.bulk_bytes:
        raise ProbeError(
            f"peer's bulk area ({peer.bulk_bytes} B) is smaller than a {chunk} B chunk"
        )
    if chunk > ep.sel.port.max_msg_bytes:
        raise ProbeError(
            f"{chunk} B exceeds the port's max message size {ep.sel.port.max_msg_bytes}"
        )
    pv, qp = ep.pv, ep.qp
    inflight = effective_depth(depth, ep.rd_atomic)
    slots = landing_slots(ep, chunk, depth)
    lkey = int(ep.mr.lkey)
    wrs = []
    for s in range(inflight):
        sg = verbs.sge(pv, ep.buf + ep.bulk_offset + (s % slots) * chunk, chunk, lkey)
        wr = verbs.send_wr(pv, s, verbs.WR_RDMA_READ, sg, verbs.SEND_SIGNALED)
        wr.set_wr_rdma(peer.rkey, peer.addr + peer.bulk_offset)
        wrs.append(wr)
    clock = time.perf_counter_ns
    posted_at = [0] * inflight
    completion = np.empty(reads, dtype=np.int64)
    posted = done = 0
    completions = ReadCompletions(ep, deadline)

    def timed_out() -> str:
        return f"rdma bulk read {chunk} B x{depth} timed out after {done} of {reads} reads"

    start = clock()
    for s in range(min(inflight, reads)):
        posted_at[s] = clock()
        qp.post_send(wrs[s])
        posted += 1
    while done < reads:
        now, ended = completions.wait(inflight, timed_out)
        for s in ended:
            completion[done] = now - posted_at[s]
            done += 1
            if posted < reads:
                posted_at[s] = clock()
                qp.post_send(wrs[s])
                posted += 1
    elapsed = clock() - start
    return RawBulk(chunk, depth, completion_ns=completion, elapsed_ns=elapsed, started_ns=start)


def read_cells(
    ep: Endpoint, peer: ConnInfo, cells: SessionPlan, deadline: float, check: BulkCheck
) -> tuple[RawBulk, ...]:
    """Every cell, each checked for the responder's keyed bytes (``tags.BulkCheck``)."""

    def cell(chunk: int, depth: int, reads: int) -> Callable[[], RawBulk]:
        def run() -> RawBulk:
            landing = ep.buf + ep.bulk_offset
            slots = min(reads, landing_slots(ep, chunk, depth))
            check.clear(landing, chunk, slots)
            out = read_cell(ep, peer, chunk=chunk, depth=depth, reads=reads, deadline=deadline)
            if (problem := check.problem(landing, chunk, slots)) is not None:
                log.warning("rdma bulk read from %s: %s", check.peer, problem)
                raise IntegrityFailure(problem)
            return out

        return run

    return run_cells(ep, [(c, d, cell(c, d, r)) for c, d, r in cells.cells()])


def run_cells(
    ep: Endpoint, cells: Sequence[tuple[int, int, Callable[[], RawBulk]]]
) -> tuple[RawBulk, ...]:
    """(chunk, depth, run) in order. A failed cell carries its error (the path is judged
    unsafe, the RTT samples are kept) and the cells after it are not run: the QP is in the
    error state or still has reads out."""
    out: list[RawBulk] = []
    failed = False
    for chunk, depth, run in cells:
        error = "not run: an earlier bulk cell failed" if failed else None
        if not failed:
            try:
                out.append(run())
                continue
            except ProbeError as err:
                error = err.problem
            except ep.pv.error as err:
                error = f"rdma verbs call failed: {err}"
            failed = True
        out.append(RawBulk(chunk, depth, np.empty(0, dtype=np.int64), 0, error=error))
    return tuple(out)
