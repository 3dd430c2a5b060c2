"""A KV chunk fetched through a fetch profile over RDMA (netqual.model.fetchprofile, docs/fanin.md).

The verbs counterpart of ``tcp_fetch.py``, with its rules. A chunk is ``slices`` RDMA READs
of the profile's slice size (the chunk rounded up to whole slices); slice i reads the
responder's bulk area at i x slice and lands at the same offset here, so the chunk arrives
as the responder holds it. The slices are dealt out among the profile's QPs of this one
endpoint (Mooncake: 2 QPs per endpoint, sharing one CQ and one memory region); each QP
asks its share in the profile's sequential waves (wave n+1 is posted when wave n has
completed) with at most ``slices_in_flight`` READs outstanding, capped by the negotiated
``max_rd_atomic`` (more would only wait in the send queue, not on the wire). The next
chunk is posted when the whole chunk has completed. **Chunk completion**: the clock before
the chunk's first post to the poll that found its last slice's completion.

One thread drives every QP, and the responder's CPU takes no part (READs need none). This
is the Python loop (pyverbs: one post and one work-completion object per slice, a few us
each): the compiled loop (hotloop.c) runs the ping-pong only. After each cell the last
chunk's slices are checked for the responder's keyed bytes (``tags.BulkCheck``: each
slice's edges against its part of the area).
"""

from __future__ import annotations

import logging
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from netqual.agent.wire.protocol import Channel
from netqual.base.errors import ProbeError
from netqual.model.fetchprofile import FetchProfile, wave_sizes
from netqual.model.plan import ProbePlan
from netqual.transports.integrity import IntegrityFailure
from netqual.transports.interface import RawBulk
from netqual.transports.rdma import verbs
from netqual.transports.rdma.bulk import ReadCompletions, run_cells
from netqual.transports.rdma.conninfo import ConnInfo
from netqual.transports.rdma.endpoint import Endpoint
from netqual.transports.rdma.session import responder_stopped
from netqual.transports.rdma.tags import BulkCheck

log = logging.getLogger("netqual.transports.rdma.transport")  # where the session's go

LOOP = "python (pyverbs; the compiled loop runs the ping-pong only)"


@dataclass(frozen=True)
class Shape:
    """How one chunk size is fetched on an endpoint with ``len(shares)`` QPs in use."""

    slice_bytes: int
    slices: int  # per chunk
    shares: tuple[int, ...]  # slices per QP: QP q owns the next shares[q] slices
    waves: tuple[tuple[int, ...], ...]  # per QP, its share in sequential waves
    depth: int  # READs outstanding per QP

    @classmethod
    def of(cls, prof: FetchProfile, chunk: int, qps: int, rd_atomic: int) -> Shape:
        size, count = prof.slices(chunk)
        shares = tuple(wave_sizes(count, min(qps, count)))
        waves = tuple(tuple(wave_sizes(n, min(prof.round_trips, n))) for n in shares)
        return cls(size, count, shares, waves, max(1, min(prof.slices_in_flight, rd_atomic)))


def landing_bytes(prof: FetchProfile, chunks: tuple[int, ...]) -> int:
    """Local memory the initiator registers for the slices: the largest chunk's."""
    return max((prof.fetched_bytes(c) for c in chunks), default=0)


def fetch_cells(
    ep: Endpoint,
    peer: ConnInfo,
    prof: FetchProfile,
    plan: ProbePlan,
    deadline: float,
    check: BulkCheck,
    channel: Channel,
) -> tuple[RawBulk, ...]:
    """One cell per chunk size of ``plan`` (``plan.reads_for(chunk)`` chunks), as
    tcp_fetch: a profile fixes the depth, so ``plan.depths`` is not iterated. ``channel``:
    the session's control channel, watched between chunks (``read_chunks``)."""
    chunks = tuple(plan.chunks_bytes) if plan.bulk else ()

    def cell(chunk: int) -> Callable[[], RawBulk]:
        def run() -> RawBulk:
            size, count = prof.slices(chunk)
            landing = ep.buf + ep.bulk_offset
            check.clear(landing, size, count, sliced=True)
            out = read_chunks(
                ep, peer, prof, chunk, plan.reads_for(chunk), deadline,
                watch=channel.sock, notice=lambda: responder_stopped(channel),
            )  # fmt: skip
            what = "fetched slices checked"
            if (problem := check.problem(landing, size, count, sliced=True, what=what)) is not None:
                log.warning("rdma fetch from %s: %s", check.peer, problem)
                raise IntegrityFailure(problem)
            return out

        return run

    return run_cells(ep, [(c, _depth(prof, c, len(ep.all_qps)), cell(c)) for c in chunks])


def _depth(prof: FetchProfile, chunk: int, qps: int) -> int:
    """The cell's recorded depth, as tcp_fetch records it: slices outstanding per
    connection (QP) before the device's cap (``details.fetch.reads_in_flight_per_qp``)."""
    shares = wave_sizes(prof.slices(chunk)[1], min(qps, prof.slices(chunk)[1]))
    return min(prof.slices_in_flight, max(shares))


def details(prof: FetchProfile, plan: ProbePlan, ep: Endpoint) -> dict[str, Any]:
    """``details.fetch``: the profile as it ran on these QPs."""
    used = prof.used(tuple(plan.chunks_bytes), len(ep.all_qps))
    used["reads_in_flight_per_qp"] = max(1, min(prof.slices_in_flight, ep.rd_atomic))
    used["loop"] = LOOP
    return used


def read_chunks(
    ep: Endpoint,
    peer: ConnInfo,
    prof: FetchProfile,
    chunk: int,
    chunks: int,
    deadline: float,
    *,
    watch: socket.socket | None = None,
    notice: Callable[[], str | None] = lambda: None,
) -> RawBulk:
    """``chunks`` chunks of ``chunk`` bytes; one completion per chunk (ns).

    The responder says nothing while its area is read, so ``watch`` (its control channel)
    turning readable means it stopped (``notice`` reads why), closed, or that the
    coordinator left (CoordinatorWatch shuts the channel down): checked between chunks,
    outside the timed span, the fetch stops there instead of at its deadline."""
    qps = ep.all_qps
    sh = Shape.of(prof, chunk, len(qps), ep.rd_atomic)
    size, fetched = sh.slice_bytes, sh.slice_bytes * sh.slices
    if fetched > peer.bulk_bytes:
        raise ProbeError(f"peer's bulk area ({peer.bulk_bytes} B) is smaller than {fetched} B")
    if fetched > ep.bulk_bytes:
        raise ProbeError(f"the landing area ({ep.bulk_bytes} B) is smaller than {fetched} B")
    if size > ep.sel.port.max_msg_bytes:
        raise ProbeError(f"{size} B exceeds the port's max message size")
    pv, lkey = ep.pv, int(ep.mr.lkey)
    landing, remote = ep.buf + ep.bulk_offset, peer.addr + peer.bulk_offset
    wrs: list[Any] = []
    owner: list[int] = []
    first: list[int] = []
    for q, n in enumerate(sh.shares):
        first.append(len(wrs))
        for i in range(len(wrs), len(wrs) + n):  # wr_id: the slice's place in the chunk
            sg = verbs.sge(pv, landing + i * size, size, lkey)
            wr = verbs.send_wr(pv, i, verbs.WR_RDMA_READ, sg, verbs.SEND_SIGNALED)
            wr.set_wr_rdma(peer.rkey, remote + i * size)
            wrs.append(wr)
            owner.append(q)
    used = range(len(sh.shares))
    clock = time.perf_counter_ns
    completion = np.empty(chunks, dtype=np.int64)
    completions = ReadCompletions(ep, deadline)
    j = 0

    def timed_out() -> str:
        return f"rdma fetch ({prof.name}) timed out after {j} of {chunks} chunks"

    start = clock()
    for j in range(chunks):
        posted = [0] * len(used)  # per QP: slices of its share posted, arrived
        arrived = [0] * len(used)
        wave = [0] * len(used)  # per QP: its current wave, and the count that ends it
        wave_end = [sh.waves[q][0] for q in used]
        t0 = clock()
        for q in used:
            while posted[q] < wave_end[q] and posted[q] - arrived[q] < sh.depth:
                qps[q].post_send(wrs[first[q] + posted[q]])
                posted[q] += 1
        left = sh.slices
        while left:
            now, ended = completions.wait(sh.depth * len(used), timed_out)
            for i in ended:
                q = owner[i]
                arrived[q] += 1
                left -= 1
                if arrived[q] == wave_end[q] and wave[q] + 1 < len(sh.waves[q]):
                    wave[q] += 1  # this QP's wave is in: ask its next one
                    wave_end[q] += sh.waves[q][wave[q]]
                while posted[q] < wave_end[q] and posted[q] - arrived[q] < sh.depth:
                    qps[q].post_send(wrs[first[q] + posted[q]])
                    posted[q] += 1
            if not left:
                completion[j] = now - t0
        if j + 1 == chunks:
            break
        if time.monotonic() > deadline:
            raise ProbeError(f"rdma fetch ({prof.name}) timed out after {j + 1} of {chunks} chunks")
        if watch is not None and select.select([watch], [], [], 0)[0]:
            why = notice() or "the responder closed the control channel"
            raise ProbeError(f"rdma fetch ({prof.name}): {why} (after {j + 1} of {chunks} chunks)")
    depth = _depth(prof, chunk, len(qps))
    elapsed = clock() - start
    return RawBulk(chunk, depth, completion_ns=completion, elapsed_ns=elapsed, started_ns=start)
