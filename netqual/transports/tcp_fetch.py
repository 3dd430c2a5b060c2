"""A KV chunk fetched through a fetch profile over TCP (netqual.model.fetchprofile, docs/fanin.md).

The responder is the plain ``tcp.bulk`` one (a slice is one of its reads), so any agent
that serves bulk reads serves a profile. The initiator groups the reads: a chunk is
``slices`` reads of the profile's slice size, asked in ``waves`` sequential round trips
with at most ``slices_in_flight`` outstanding; the next chunk is asked only when the whole
chunk has arrived. **Chunk completion** is first request of the chunk to last byte of its
last slice: what a KV miss waits for. Every slice carries the responder's tags, checked
after the cell as in the plain bulk loop.

A profile with several connections per endpoint (Mooncake: 2 QPs) opens them, each an
authenticated session of its own: a chunk's slices are dealt out among them (never more
connections than slices), each keeps ``slices_in_flight`` outstanding, and they start every
chunk together (a barrier), so a chunk completes when its slowest connection's share has.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from netqual.agent.wire.protocol import Channel
from netqual.base.errors import NetqualError, PeerUnreachableError, ProbeError
from netqual.model.fetchprofile import FetchProfile, profile, wave_sizes
from netqual.model.path import RawBulk, RawProbe
from netqual.model.plan import ProbePlan
from netqual.transports.tcp import _REQ_BYTES, BulkCell, _recv_full


def initiate(
    ch: Channel, plan: ProbePlan, deadline: float, another: Callable[[], Channel] | None = None
) -> RawProbe:
    """Every chunk size of ``plan`` fetched ``plan.reads_for(chunk)`` times; no ping-pong.
    ``another`` opens a further connection to the peer (a profile's connections > 1)."""
    prof = profile(plan.fetch_profile)
    most = max(prof.connections_for(c) for c in plan.chunks_bytes)
    chans = [ch]
    try:
        if another is not None:
            chans += [another() for _ in range(most - 1)]
        cells = tuple(fetch(chans, prof, c, plan.reads_for(c), deadline) for c in plan.chunks_bytes)
    finally:
        for extra in chans[1:]:
            with contextlib.suppress(NetqualError, OSError):
                extra.set_timeout(2.0)
                extra.send("bye")
            extra.close()
    used = prof.used(tuple(plan.chunks_bytes), len(chans))
    return RawProbe(np.empty(0, dtype=np.int64), 0, cells, {"fetch": used})


def fetch(
    chans: Sequence[Channel], prof: FetchProfile, chunk: int, chunks: int, deadline: float
) -> RawBulk:
    """``chunks`` chunks of ``chunk`` bytes over ``chans``; one completion per chunk (ns):
    the first connection's start of the chunk to the last one's last byte."""
    size, per_chunk = prof.slices(chunk)
    shares = wave_sizes(per_chunk, min(len(chans), per_chunk))
    n = len(shares)
    starts = np.zeros((n, chunks), dtype=np.int64)
    ends = np.zeros((n, chunks), dtype=np.int64)
    barrier = threading.Barrier(n) if n > 1 else None
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            _share(chans[i], prof, size, shares[i], chunks, deadline, barrier, starts[i], ends[i])
        except BaseException as err:
            errors.append(err)
            if barrier is not None:
                barrier.abort()

    if n == 1:
        work(0)
    else:
        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()) + 5.0)
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    done = ends.max(axis=0) - starts.min(axis=0)
    first = int(starts.min())
    elapsed = int(ends.max()) - first
    depth = min(prof.slices_in_flight, max(shares))
    return RawBulk(chunk, depth, completion_ns=done, elapsed_ns=elapsed, started_ns=first)


def _share(
    ch: Channel,
    prof: FetchProfile,
    size: int,
    per_chunk: int,
    chunks: int,
    deadline: float,
    barrier: threading.Barrier | None,
    starts: np.ndarray,
    ends: np.ndarray,
) -> None:
    """One connection's ``per_chunk`` slices of every chunk; fills ``starts``/``ends``."""
    waves = wave_sizes(per_chunk, min(prof.round_trips, per_chunk))
    depth = min(prof.slices_in_flight, per_chunk)
    reads = per_chunk * chunks
    what = f"fetch {size}-byte slices ({prof.name})"
    cell = BulkCell.open(ch, size, reads, depth, deadline, what)
    sock, view, w, tail, cview = cell.sock, cell.view, cell.w, cell.tail, cell.cview
    heads, tails, timeout = cell.heads, cell.tails, cell.timeout_s
    pc = time.perf_counter_ns
    nxt = got = 0  # reads asked, reads arrived (over the whole cell)

    def ask() -> None:
        nonlocal nxt
        sock.sendall(cview[nxt * _REQ_BYTES : (nxt + 1) * _REQ_BYTES])
        nxt += 1

    try:
        for j in range(chunks):
            if barrier is not None:  # every connection starts the chunk together
                barrier.wait(max(0.001, deadline - time.monotonic()))
            starts[j] = pc()
            for n in waves:
                end = got + n  # this wave's reads: [got, end)
                while nxt < min(end, got + depth):
                    ask()
                while got < end:
                    _recv_full(sock, view, ch.peer)
                    heads[got * w : (got + 1) * w] = view[:w]
                    tails[got * w : (got + 1) * w] = view[tail:]
                    got += 1
                    if nxt < end:
                        ask()
            ends[j] = pc()
            if time.monotonic() > deadline:
                raise ProbeError(f"fetch timed out after {j + 1} of {chunks} chunks")
    except BlockingIOError as err:
        raise ProbeError(f"fetch: {ch.peer} sent nothing for {timeout:.1f} s") from err
    except OSError as err:
        raise PeerUnreachableError(ch.peer, f"fetch failed: {err}") from err
    cell.check(ch, deadline, "fetched slices")
