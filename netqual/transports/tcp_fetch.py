"""A KV chunk fetched through a fetch profile over TCP (netqual.fetchprofile, docs/fanin.md).

The responder is the plain ``tcp.bulk`` one (a slice is one of its reads), so any agent
that serves bulk reads serves a profile. The initiator groups the reads: a chunk is
``slices`` reads of the profile's slice size, asked in ``waves`` sequential round trips
with at most ``slices_in_flight`` outstanding; the next chunk is asked only when the whole
chunk has arrived. **Chunk completion** is first request of the chunk to last byte of its
last slice: what a KV miss waits for. Every slice carries the responder's tags, checked
after the cell as in the plain bulk loop.

One connection per rank: a profile's ``connections`` is recorded, not opened (a TCP
stream per QP would need more sessions per rank; ``details.fetch`` says what was used).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import numpy as np

from netqual.agent.wire.protocol import Channel
from netqual.errors import PeerUnreachableError, ProbeError
from netqual.fetchprofile import FetchProfile, profile
from netqual.models import ProbePlan, RawBulk, RawProbe
from netqual.transports import integrity
from netqual.transports.interface import accepted
from netqual.transports.tcp import (
    _REQ_BYTES,
    _bulk_tag_width,
    _kernel_timeouts,
    _key,
    _recv_full,
    _remaining,
)


def initiate(ch: Channel, plan: ProbePlan, deadline: float) -> RawProbe:
    """Every chunk size of ``plan`` fetched ``plan.reads_for(chunk)`` times; no ping-pong."""
    prof = profile(plan.fetch_profile)
    cells = tuple(fetch(ch, prof, c, plan.reads_for(c), deadline) for c in plan.chunks_bytes)
    used: dict[str, Any] = {
        "profile": prof.name,
        "slice_bytes": [prof.slices(c)[0] for c in plan.chunks_bytes],
        "slices_per_chunk": [prof.slices(c)[1] for c in plan.chunks_bytes],
        "slices_in_flight": prof.slices_in_flight,
        "round_trips": [prof.waves(c) for c in plan.chunks_bytes],
        "connections_used": 1,
    }
    return RawProbe(np.empty(0, dtype=np.int64), 0, cells, {"fetch": used})


def wave_sizes(slices: int, waves: int) -> list[int]:
    """``slices`` split into ``waves`` sequential groups, the first ones one larger."""
    return [slices // waves + (1 if i < slices % waves else 0) for i in range(waves)]


def fetch(ch: Channel, prof: FetchProfile, chunk: int, chunks: int, deadline: float) -> RawBulk:
    """``chunks`` chunks of ``chunk`` bytes; one completion time per chunk (ns)."""
    size, per_chunk = prof.slices(chunk)
    waves = wave_sizes(per_chunk, prof.waves(chunk))
    depth = min(prof.slices_in_flight, per_chunk)
    reads = per_chunk * chunks
    timeout = _remaining(deadline, f"fetch {chunk} bytes ({prof.name})")
    ch.set_deadline(deadline)
    nonce = integrity.new_nonce()
    accepted(
        ch,
        "tcp.bulk",
        {
            "chunk_bytes": size,
            "reads": reads,
            "depth": depth,
            "timeout_s": timeout,
            "nonce": nonce.hex(),
        },
        deadline,
    )
    sock = ch.sock
    _kernel_timeouts(sock, timeout)
    view = memoryview(bytearray(size))
    w = _bulk_tag_width(size)
    tail = size - w
    challenges = secrets.token_bytes(reads * _REQ_BYTES)
    cview = memoryview(challenges)
    heads, tails = bytearray(reads * w), bytearray(reads * w)
    done = np.empty(chunks, dtype=np.int64)
    pc = time.perf_counter_ns
    nxt = got = 0  # reads asked, reads arrived (over the whole cell)

    def ask() -> None:
        nonlocal nxt
        sock.sendall(cview[nxt * _REQ_BYTES : (nxt + 1) * _REQ_BYTES])
        nxt += 1

    try:
        start = pc()
        for j in range(chunks):
            t0 = pc()
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
            done[j] = pc() - t0
            if time.monotonic() > deadline:
                raise ProbeError(f"fetch timed out after {j + 1} of {chunks} chunks")
        elapsed = pc() - start
    except BlockingIOError as err:
        raise ProbeError(f"fetch: {ch.peer} sent nothing for {timeout:.1f} s") from err
    except OSError as err:
        raise PeerUnreachableError(ch.peer, f"fetch failed: {err}") from err
    if w:
        tags = integrity.keystream(_key(ch, responder=False), b"tcp.bulk", nonce, 2 * reads * w)
        mine = b"".join(
            heads[i * w : (i + 1) * w] + tails[i * w : (i + 1) * w] for i in range(reads)
        )
        bad = integrity.mismatches(mine, tags, 2 * w)
    else:
        bad = 0
    integrity.check_end(ch, "tcp.bulk.end", deadline, challenges, bad, reads, "fetched slices")
    return RawBulk(chunk_bytes=chunk, depth=depth, completion_ns=done, elapsed_ns=elapsed)
