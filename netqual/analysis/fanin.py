"""Fan-in analysis (docs/fanin.md): chunk completion per level, the knee, the verdict per
storage node, and the TTFT projection of a workload at each level.

- Chunk completion percentiles are numpy's default (as ``netqual.analysis.stats``) over every chunk
  of every reader of the level; a percentile is trusted with 10 samples beyond it
  (``stats.needed_samples``: p99 needs 1,000 chunks, p99.9 10,000).
- Ranks in step (SGLang HiCache): a node's i-th chunk is the slowest of its ranks' i-th.
- Knee: the first level whose p99 exceeds the first level's by more than the policy's
  ``fanin_knee_factor``. Safe up to: the last level before the knee (all measured levels
  when there is none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.analysis.counter_evidence import window_findings
from netqual.analysis.stats import needed_samples
from netqual.base.units import format_bytes, format_duration_us
from netqual.model.fanin import ChunkStats, FaninLevel, FaninResult
from netqual.model.node import Node
from netqual.model.path import RawBulk
from netqual.model.workload import Workload

_QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))


def chunk_stats(chunks_ns: Sequence[np.ndarray]) -> ChunkStats | None:
    """Pooled chunk completion of a level's readers; None without any chunk."""
    if not any(len(c) for c in chunks_ns):
        return None
    pooled = np.concatenate([np.asarray(c, dtype=np.float64) for c in chunks_ns])
    us = pooled / 1000.0
    pct = {name: float(np.percentile(us, q * 100.0)) for name, q in _QUANTILES}
    n = len(us)
    untrusted = tuple(name for name, q in _QUANTILES if n < needed_samples(q))
    return ChunkStats(n, pct["p50"], pct["p99"], pct["p999"], untrusted)


def in_step(ranks: Sequence[np.ndarray]) -> npt.NDArray[np.int64]:
    """One node's chunks when its ranks move in step: per index, the slowest rank's."""
    n = min(len(r) for r in ranks)
    slowest: npt.NDArray[np.int64] = np.stack(
        [np.asarray(r[:n], dtype=np.int64) for r in ranks]
    ).max(axis=0)
    return slowest


def shared_uplinks(storage: Node, readers: Sequence[Node]) -> tuple[str, ...]:
    """Racks other than the storage node's holding more than one reader, as
    ``"r1 (3 readers)"``."""
    counts: dict[str, int] = {}
    for r in readers:
        if r.rack and r.rack != storage.rack:
            counts[r.rack] = counts.get(r.rack, 0) + 1
    return tuple(f"{rack} ({n} readers)" for rack, n in sorted(counts.items()) if n > 1)


def level(
    storage: Node,
    readers: Sequence[Node],
    per_node: Sequence[Sequence[RawBulk]],
    errors: Sequence[str],
    ranks_in_step: bool,
) -> FaninLevel:
    """One level from each reader's cells (one cell per rank)."""
    chunks: list[np.ndarray] = []
    goodputs: list[float] = []
    total_bytes, longest_ns = 0, 0
    for cells in per_node:
        ok = [c for c in cells if len(c.completion_ns) and c.elapsed_ns > 0]
        if not ok:
            continue
        if ranks_in_step:
            chunks.append(in_step([c.completion_ns for c in ok]))
        else:
            chunks.extend(c.completion_ns for c in ok)
        node_bytes = sum(c.chunk_bytes * len(c.completion_ns) for c in ok)
        node_ns = max(c.elapsed_ns for c in ok)
        goodputs.append(node_bytes * 8 / node_ns)
        total_bytes += node_bytes
        longest_ns = max(longest_ns, node_ns)
    return FaninLevel(
        readers=len(readers),
        chunk=chunk_stats(chunks),
        goodput_gbps_per_reader=float(np.mean(goodputs)) if goodputs else None,
        aggregate_gbps=total_bytes * 8 / longest_ns if longest_ns else None,
        nodes=tuple(r.name for r in readers),
        shared_uplinks=shared_uplinks(storage, readers),
        errors=tuple(errors),
    )


def knee(levels: Sequence[FaninLevel], factor: float) -> int | None:
    """Readers of the first level whose p99 exceeds the first measured level's x factor."""
    measured = [lv for lv in levels if lv.chunk is not None]
    if len(measured) < 2:
        return None
    base = measured[0].chunk
    assert base is not None
    for lv in measured[1:]:
        assert lv.chunk is not None
        if lv.chunk.p99_us > factor * base.p99_us:
            return lv.readers
    return None


def judge(
    storage: str, profile: str, chunk_bytes: int, factor: float, levels: Sequence[FaninLevel]
) -> FaninResult:
    measured = [lv for lv in levels if lv.chunk is not None]
    k = knee(levels, factor)
    if len(measured) < 2:
        return FaninResult(
            storage, profile, chunk_bytes, factor, tuple(levels), None, None,
            "not judged: fewer than two levels measured",
        )  # fmt: skip
    base = measured[0]
    assert base.chunk is not None
    below = [lv.readers for lv in measured if k is None or lv.readers < k]
    safe = max(below) if below else None
    if k is None:
        verdict = (
            f"safe up to {_readers(safe)} (no knee: chunk p99 within "
            f"{factor:g}x of {base.readers} reader's up to {safe})"
        )
    else:
        at = next(lv for lv in measured if lv.readers == k)
        assert at.chunk is not None
        ratio = at.chunk.p99_us / base.chunk.p99_us
        verdict = (
            f"safe up to {_readers(safe)} (knee at {k}: chunk p99 "
            f"{format_duration_us(at.chunk.p99_us)}, {ratio:.1f}x {base.readers} reader's "
            f"{format_duration_us(base.chunk.p99_us)})"
        )
        if at.shared_uplinks:
            verdict += f"; at {k} readers rack uplinks are shared: {', '.join(at.shared_uplinks)}"
        if at.storage_tcp_retrans:
            verdict += (
                f"; {storage} retransmitted {at.storage_tcp_retrans:,} TCP segments at {k} "
                "readers: loss behind the tail"
            )
        if found := storage_findings(storage, at):
            verdict += f"; {storage}'s counters at {k} readers: {', '.join(found[:3])}"
    few = sorted(
        {lv.readers for lv in measured if "p99" in (lv.chunk.untrusted if lv.chunk else ())}
    )
    if few:
        at_levels = ", ".join(map(str, few))
        verdict += f"; preliminary: p99 from fewer than 1,000 chunks at {at_levels} readers"
    return FaninResult(storage, profile, chunk_bytes, factor, tuple(levels), k, safe, verdict)


_DROPS = ("rx_dropped", "tx_dropped", "rx_errors", "tx_errors")


def storage_findings(storage: str, lv: FaninLevel) -> tuple[str, ...]:
    """What the storage node's own counters counted over the level that points at loss or
    congestion, in words: RDMA sequence errors and ACK timeouts, then pause/PFC frames,
    CNPs and ECN marks (the rules of a path's counters, ``window_findings``), then
    interface drops and errors. () when none moved, or nothing was counted."""
    w = lv.storage_counters
    if not w:
        return ()
    loss, congestion = window_findings(w, storage)
    drops = [
        f"{k} {n:,} on {storage} {nic}"
        for nic, c in _entries(w, "interfaces")
        for k in _DROPS
        if (n := _count(c.get(k)))
    ]
    return (*loss, *congestion, *drops)


def storage_sent(lv: FaninLevel) -> str | None:
    """The storage node's interface or RDMA port that sent the most over the level, as
    ``"eth0 sent 1.25 GiB"``; None when nothing was counted. (RDMA port data counters
    count 4-byte words; rxe has packet counts only, named as such.)"""
    w = lv.storage_counters
    if not w:
        return None
    sent: list[tuple[int, str]] = []
    for nic, c in _entries(w, "interfaces"):
        if n := _count(c.get("tx_bytes")):
            sent.append((n, f"{nic} sent {format_bytes(n)}"))
    for port, c in _entries(w, "rdma"):
        if n := _count(c.get("port_xmit_data")):
            sent.append((4 * n, f"{port} sent {format_bytes(4 * n)}"))
        elif n := _count(c.get("sent_pkts")):
            sent.append((0, f"{port} sent {n:,} packets"))
    return max(sent)[1] if sent else None


def _entries(window: Mapping[str, Any], group: str) -> list[tuple[str, Mapping[str, Any]]]:
    entries = window.get(group)
    if not isinstance(entries, Mapping):
        return []
    return [(str(k), v) for k, v in sorted(entries.items()) if isinstance(v, Mapping)]


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _readers(k: int | None) -> str:
    return f"{k} concurrent reader{'' if k == 1 else 's'}"


@dataclass(frozen=True)
class Projection:
    """A workload's KV fetch per request at one level, against its baseline."""

    readers: int
    chunks: int  # prompt_tokens x hit_ratio / chunk_tokens
    fetch_p50_us: float  # every chunk at the level's p50, one after another
    fetch_p99_us: float  # every chunk at the level's p99 (the spread's far end)
    baseline_us: float  # the same chunks recomputed or read locally
    change_p50_us: float  # fetch - baseline: negative = TTFT shorter with offload
    change_p99_us: float

    @property
    def pays(self) -> bool:
        """Offload shortens TTFT at this level even with every chunk at p99."""
        return self.change_p99_us < 0


def no_projection(result: FaninResult, w: Workload) -> str | None:
    """Why ``w`` cannot be projected on this sweep; None when it can."""
    if w.prompt_chunks is None:
        return "the workload gives no prompt_tokens: no per-request projection"
    if result.chunk_bytes != w.chunk_bytes:
        return (
            f"the sweep fetched {result.chunk_bytes:,}-byte chunks, the workload's are "
            f"{w.chunk_bytes:,} bytes per rank: no projection (run --fanin with --workload)"
        )
    return None


def project(result: FaninResult, w: Workload) -> tuple[Projection, ...]:
    """Per measured level; () when ``no_projection`` says why not."""
    chunks = w.prompt_chunks
    if chunks is None or no_projection(result, w) is not None:
        return ()
    serial = w.round_trips_per_chunk
    base = chunks * w.budget_us
    out = []
    for lv in result.levels:
        if lv.chunk is None:
            continue
        p50 = chunks * serial * lv.chunk.p50_us
        p99 = chunks * serial * lv.chunk.p99_us
        out.append(Projection(lv.readers, chunks, p50, p99, base, p50 - base, p99 - base))
    return tuple(out)


def pays_sentence(projections: Sequence[Projection]) -> str:
    """Up to which concurrency offload pays (every chunk at p99); needs one projection."""
    k = pays_up_to(projections)
    if k is None:
        return f"offload does not pay even at {projections[0].readers} reader(s)"
    return f"offload pays up to {_readers(k)}"


def pays_up_to(projections: Sequence[Projection]) -> int | None:
    """The most readers up to which every level's projection pays; None: not even 1."""
    best = None
    for p in projections:
        if not p.pays:
            break
        best = p.readers
    return best
