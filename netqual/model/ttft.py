"""The one TTFT model (docs/workload.md, "The TTFT model"): a KV chunk fetched over the
network against its baseline, and what that does to time-to-first-token.

One meaning of ``round_trips_per_chunk`` (n) everywhere: the round trips a chunk costs one
after another on the request's critical path; the chunk's bytes count once, at the
goodput the reader gets. For one node's chunk (all its ranks' shares):

    fetch = n x RTT + wire,                wire = chunk bytes x 8 / goodput
    speedup = budget / fetch               (budget: the chunk read locally or recomputed)
    line(s) = (budget / s - wire) / n      (the RTT at which speedup falls to s)
    TTFT change = f x (fetch' / budget - 1)

with f the share of the baseline request's prefill path spent getting its cached chunks,
and fetch' the fetch a request waits for: n x RTT + wire with a serial loader (a node's
requests queue behind each other's round trips, so concurrency cancels), n x RTT / q(c) +
wire with parallel loaders (their chains overlap; q(c) = (c + 1) / 2).

A measured bulk cell (the chunk at ``ranks_per_node`` reads in flight) completes in one
round trip plus the bytes, so fetch = cell + (n - 1) x RTT: the same number. Every user
(the per-path workload verdict, ``netqual workload``'s lines, the fan-in projection, the
report's TTFT change) calls these functions; they take floats or numpy arrays alike.
"""

from __future__ import annotations

import enum
import math
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # arrays come from the callers: every agent's plan imports this module
    import numpy as np
    import numpy.typing as npt

Num = TypeVar("Num", float, "npt.NDArray[np.float64]")

# A healthy RDMA path's round trip (2-10 us, DESIGN "Where the numbers come from"): where
# `netqual workload` shows the TTFT change a healthy fabric gives
HEALTHY_RDMA_RTT_US = 7.5


class Loader(str, enum.Enum):
    """Whether a node's concurrent requests wait for each other's serial round trips."""

    SERIAL = "serial"  # one request's loads after another's (vLLM + LMCache, Mooncake store)
    PARALLEL = "parallel"  # asynchronous transfers whose chains overlap (NIXL)


def wire_us(chunk_bytes: float, goodput_gbps: float) -> float:
    """The chunk's bytes at a goodput (10^9 bit/s): counted once, whatever the round trips."""
    return chunk_bytes * 8 / (goodput_gbps * 1e3)


def fetch_us(rtt_us: float, goodput_gbps: float, chunk_bytes: float, round_trips: float) -> float:
    """One chunk: ``round_trips`` serial round trips plus its bytes once at the goodput."""
    return round_trips * rtt_us + wire_us(chunk_bytes, goodput_gbps)


def fetch_from_cell_us(cell_us: Num, rtt_us: Num, round_trips: float) -> Num:
    """The fetch from a measured cell, which already holds one round trip and the bytes:
    ``fetch_us(rtt, goodput_from_cell_gbps(cell, rtt, bytes), bytes, n)``."""
    return cell_us + (round_trips - 1) * rtt_us


def goodput_from_cell_gbps(cell_us: float, rtt_us: float, chunk_bytes: float) -> float:
    """The goodput a measured cell implies: its time less its one round trip."""
    return chunk_bytes * 8 / ((cell_us - rtt_us) * 1e3)


def break_even_rtt_us(
    budget_us: float, wire: float, round_trips: float, speedup: float = 1.0
) -> float | None:
    """The largest RTT at which the fetch still beats the budget by ``speedup``: None when
    the bytes alone are too slow, inf when the chunk costs no serial round trip."""
    room = budget_us / speedup - wire
    if room <= 0:
        return None
    return math.inf if round_trips == 0 else room / round_trips


def break_even_from_cell_us(
    budget_us: float, cell_us: Num, rtt_us: Num, round_trips: float, speedup: float = 1.0
) -> Num:
    """``break_even_rtt_us`` of a path from its measured cell and RTT (wire = cell - RTT);
    not positive where the bytes alone are too slow (the caller says "never")."""
    if round_trips == 0:
        return rtt_us * 0 + math.inf
    return rtt_us + (budget_us / speedup - cell_us) / round_trips


def queue_position(concurrency: int) -> float:
    """How many requests' shared work the median request waits for: (c + 1) / 2."""
    return (concurrency + 1) / 2


def ttft_change(
    rtt_us: float,
    wire: float,
    round_trips: float,
    budget_us: float,
    kv_share: float,
    loader: Loader = Loader.SERIAL,
    concurrency: int = 1,
) -> float:
    """Relative TTFT change with offload against the baseline (negative: shorter) for a
    node with ``concurrency`` requests in flight (module docstring)."""
    share = 1.0 if loader is Loader.SERIAL else queue_position(concurrency)
    return kv_share * ((round_trips * rtt_us / share + wire) / budget_us - 1)


def ttft_break_even_rtt_us(
    wire: float,
    round_trips: float,
    budget_us: float,
    loader: Loader = Loader.SERIAL,
    concurrency: int = 1,
) -> float | None:
    """The RTT at which the TTFT gain is gone (``ttft_change`` 0): None when not even at
    zero RTT, inf when the chunk costs no serial round trip. With a serial loader it is
    the speedup-1 line at any concurrency."""
    share = 1.0 if loader is Loader.SERIAL else queue_position(concurrency)
    room = budget_us - wire
    if room <= 0:
        return None
    return math.inf if round_trips == 0 else room * share / round_trips
