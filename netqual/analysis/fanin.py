"""Fan-in analysis (docs/fanin.md): chunk completion per level, goodput over the time the
ranks were busy, the knee, the verdict per storage node, and the TTFT projection of a
workload at each level.

- Chunk completion percentiles are numpy's default (as ``netqual.analysis.stats``) over every chunk
  of every reader of the level, with the p99's 95% confidence interval (order statistics,
  ``stats.quantile_ci``).
- Ranks in step (SGLang HiCache): a node's i-th chunk is the slowest of its ranks' i-th.
- Goodput: every rank's interval (first request to last byte) on the coordinator's clock.
  The level's rate = its bytes over the union of the intervals (the time any rank read);
  aggregate = the bytes that arrived while every reader was reading, over that time (the
  rate at k readers at once, as iperf3 with k streams measures it); per reader = the
  aggregate / k.
- Knee: each level's p99 interval against ``fanin_knee_factor`` x the first level's:
  *beyond* when its bottom is above factor x the first's top, *within* when its top is at
  most factor x the first's bottom, else *undecided* (preliminary). The knee is the first
  level beyond; safe up to: the last of the levels, from the first, that are within.
- Before the knee is put on shared rack uplinks, another storage node's sweep with the
  same readers over the same uplinks is consulted (``judge_all``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from netqual.analysis.counter_evidence import window_findings
from netqual.analysis.stats import needed_samples, quantile_ci
from netqual.base.units import format_bytes, format_duration_us
from netqual.model.fanin import Call, ChunkStats, FaninLevel, FaninResult, RankSpan
from netqual.model.node import Node
from netqual.model.path import RawBulk
from netqual.model.ttft import fetch_from_cell_us
from netqual.model.workload import Workload
from netqual.table.run import Results

_QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))
# A level whose readers were all reading at once for less than this share of its busy time
# did not measure that many concurrent readers: its aggregate is then over the whole busy
# time, and it is never "within" the knee factor
MIN_ALL_READING = 0.5
# The first level anchors the knee only while its own chunk p99 is not surely past this
# many times its p50 (or the knee factor, if larger): ``base_doubt``
BASE_TAIL = 5.0


def chunk_stats(chunks_ns: Sequence[np.ndarray]) -> ChunkStats | None:
    """Pooled chunk completion of a level's readers; None without any chunk."""
    if not any(len(c) for c in chunks_ns):
        return None
    pooled = np.concatenate([np.asarray(c, dtype=np.float64) for c in chunks_ns])
    us = np.sort(pooled / 1000.0)
    pct = {name: float(np.percentile(us, q * 100.0)) for name, q in _QUANTILES}
    n = len(us)
    untrusted = tuple(name for name, q in _QUANTILES if n < needed_samples(q))
    ci = quantile_ci(us, 0.99)
    return ChunkStats(n, pct["p50"], pct["p99"], pct["p999"], untrusted, ci)


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


def busy_ns(intervals: Sequence[tuple[int, int]]) -> int:
    """The length of the union of ``[start, end]`` intervals: the time at least one of
    them was running."""
    return sum(e - s for s, e in merged(intervals))


def level(
    storage: Node,
    readers: Sequence[Node],
    per_node: Sequence[Sequence[RawBulk]],
    errors: Sequence[str],
    ranks_in_step: bool,
) -> FaninLevel:
    """One level from each reader's cells (one cell per rank), measured in one round."""
    return level_of_rounds(storage, readers, [per_node], errors, ranks_in_step)


def level_of_rounds(
    storage: Node,
    readers: Sequence[Node],
    rounds: Sequence[Sequence[Sequence[RawBulk]]],
    errors: Sequence[str],
    ranks_in_step: bool,
) -> FaninLevel:
    """One level measured in one or more rounds (``rounds[r][i]``: reader i's cells in
    round r, one per rank), pooled: the chunks of every round, the ranks of every round on
    the coordinator's clock (the time between rounds is nobody's busy time)."""
    chunks: list[np.ndarray] = []
    answered: list[tuple[str, list[RawBulk]]] = []
    for i, node in enumerate(readers):
        mine = []
        for per_node in rounds:
            ok = [c for c in per_node[i] if len(c.completion_ns) and c.elapsed_ns > 0]
            if not ok:
                continue
            if ranks_in_step:
                chunks.append(in_step([c.completion_ns for c in ok]))
            else:
                chunks.extend(c.completion_ns for c in ok)
            mine.extend(ok)
        if mine:
            answered.append((node.name, mine))
    out = FaninLevel(
        readers=len(readers),
        chunk=chunk_stats(chunks),
        nodes=tuple(r.name for r in readers),
        shared_uplinks=shared_uplinks(storage, readers),
        errors=tuple(errors),
        rounds=len(rounds),
    )
    return dataclasses.replace(out, **_goodput(answered))


def _fetched(c: RawBulk) -> int:
    return c.chunk_bytes * len(c.completion_ns)


def chunk_spans_ns(c: RawBulk) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(starts, ends) of a rank's chunks on the record's clock. A fan-in rank fetches its
    chunks one after another (every fetch profile asks the next chunk when the last has
    arrived), so chunk i ends at the rank's start + the first i completions + i x its mean
    gap (the rank's time in no chunk, a few us a chunk, spread evenly)."""
    assert c.started_ns is not None
    done = np.asarray(c.completion_ns, dtype=np.float64)
    gap = max(0.0, (c.elapsed_ns - float(done.sum())) / len(done))
    ends = c.started_ns + np.cumsum(done + gap)
    return ends - done, ends


def window_bytes(c: RawBulk, windows: Sequence[tuple[int, int]]) -> float:
    """The bytes of ``c``'s chunks that arrived inside ``windows`` (a chunk across an edge
    counts for its share of its time inside)."""
    starts, ends = chunk_spans_ns(c)
    inside = np.zeros(len(starts))
    for w0, w1 in windows:
        inside += np.clip(np.minimum(ends, w1) - np.maximum(starts, w0), 0.0, None)
    share = inside / np.maximum(ends - starts, 1.0)
    return float(share.sum()) * c.chunk_bytes


def merged(intervals: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of ``[start, end]`` intervals as disjoint ones, in order."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def intersected(
    a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Where two sets of disjoint, ordered intervals overlap."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _goodput(answered: Sequence[tuple[str, Sequence[RawBulk]]]) -> dict[str, Any]:
    """The level's goodput fields from the ranks that answered (see the module doc)."""
    cells = [(name, c) for name, node_cells in answered for c in node_cells]
    if not cells:
        return {}
    total = sum(_fetched(c) for _, c in cells)
    timed = [(name, c, c.started_ns) for name, c in cells if c.started_ns is not None]
    if len(timed) < len(cells):
        # no clock for the ranks (an older agent): over the longest rank's time
        per = [
            sum(map(_fetched, node_cells)) * 8 / max(c.elapsed_ns for c in node_cells)
            for _, node_cells in answered
        ]
        longest = max(c.elapsed_ns for _, c in cells)
        return {
            "goodput_gbps_per_reader": float(np.mean(per)),
            "aggregate_gbps": total * 8 / longest,
        }
    ivs = [(name, s, s + c.elapsed_ns) for name, c, s in timed]
    t0 = min(s for _, s, _ in ivs)
    spans = tuple(
        RankSpan(name, (s - t0) / 1e9, (e - t0) / 1e9, _fetched(c))
        for (name, s, e), (_, c) in zip(ivs, cells, strict=True)
    )
    union = busy_ns([(s, e) for _, s, e in ivs])
    names = [name for name, _ in answered]
    own = {name: merged([(s, e) for n, s, e in ivs if n == name]) for name in names}
    readers_ns = sum(busy_ns(own[name]) for name in names)
    # while every reader was reading: where all the readers' busy times overlap
    everyone = own[names[0]]
    for name in names[1:]:
        everyone = intersected(everyone, own[name])
    all_ns = busy_ns(everyone)
    out: dict[str, Any] = {
        "level_gbps": total * 8 / union,
        "busy_s": union / 1e9,
        "readers_busy": readers_ns / union,
        "all_reading_s": all_ns / 1e9,
        "ranks": spans,
    }
    if all_ns >= MIN_ALL_READING * union:
        got = sum(window_bytes(c, everyone) for _, c in cells)
        aggregate = got * 8 / all_ns
        return out | {
            "aggregate_gbps": aggregate,
            "goodput_gbps_per_reader": aggregate / len(names),
        }
    return out | {
        "aggregate_gbps": total * 8 / union,
        "goodput_gbps_per_reader": total * 8 / readers_ns,
    }


def p99_interval(c: ChunkStats) -> tuple[float, float]:
    """The p99's 95% interval; for a results file that kept none: the p99 itself when
    trusted (1,000 chunks), else from the p50 (a p99 is never below it) to unbounded."""
    if c.p99_ci_us is not None:
        return c.p99_ci_us
    if "p99" not in c.untrusted:
        return (c.p99_us, c.p99_us)
    return (min(c.p50_us, c.p99_us), math.inf)


def doubt(lv: FaninLevel) -> str | None:
    """Why a level cannot count as within the factor whatever its p99: ranks that failed
    (their chunks are missing), or readers that did not read at once."""
    if lv.errors:
        return f"{len(lv.errors)} of its ranks failed"
    if (
        lv.all_reading_s is not None
        and lv.busy_s
        and lv.all_reading_s < MIN_ALL_READING * lv.busy_s
    ):
        share = lv.all_reading_s / lv.busy_s
        return f"its {lv.readers} readers were all reading for only {share:.0%} of it"
    return None


def base_doubt(base: FaninLevel, factor: float) -> str | None:
    """Why the first level cannot anchor the knee rule: ``doubt``, or its own chunk p99 is
    surely past BASE_TAIL (or the knee factor, if larger) x its p50: a tail at one reader
    already the size of a knee (a stall of the host or the path, retransmission timeouts).
    Every later level would read "within" factor x that tail, so none is called within it
    (CI's loaded lab: p50 4.4 ms, p99 104 ms, 95% CI 57 to 235 ms at 1 reader, and 2 and 4
    readers of an 800 Mbit/s port read "within" it, "safe up to 4" where the knee is 4).
    One reader's chunks in the lab read p99 1.0-1.5x their p50."""
    if (why := doubt(base)) is not None:
        return why
    if base.chunk is None:
        return None
    lo, _hi = p99_interval(base.chunk)
    tail = max(BASE_TAIL, factor)
    if lo > tail * base.chunk.p50_us:
        return (
            f"its chunk p99 ({format_duration_us(base.chunk.p99_us)}, 95% CI from "
            f"{format_duration_us(lo)}) is past {tail:g}x its p50 "
            f"({format_duration_us(base.chunk.p50_us)}): a tail the levels cannot be held "
            "against; measure again"
        )
    return None


def call_levels(levels: Sequence[FaninLevel], factor: float) -> tuple[FaninLevel, ...]:
    """Every level with the knee rule's call (module doc); fewer than two measured
    levels: none called."""
    measured = [lv for lv in levels if lv.chunk is not None]
    if len(measured) < 2:
        return tuple(dataclasses.replace(lv, call=None) for lv in levels)
    base = measured[0]
    assert base.chunk is not None
    b_lo, b_hi = p99_interval(base.chunk)
    anchor_doubt = base_doubt(base, factor)
    out = []
    for lv in levels:
        call = None
        if lv is base:
            call = Call.BASE
        elif lv.chunk is not None:
            lo, hi = p99_interval(lv.chunk)
            if lo > factor * b_hi:
                call = Call.BEYOND
            elif hi <= factor * b_lo and doubt(lv) is None and anchor_doubt is None:
                call = Call.WITHIN
            else:
                call = Call.UNDECIDED
        out.append(dataclasses.replace(lv, call=call))
    return tuple(out)


def more_decides(base: FaninLevel, lv: FaninLevel, factor: float) -> bool:
    """Whether more chunks of ``lv`` could call it: it is undecided against ``base``, not in
    doubt, and its p99 lies where a narrower interval around it would be within or
    beyond. (A p99 between factor x the base's bottom and top waits on the base's
    interval: more of this level cannot decide it.)"""
    if base.chunk is None or lv.chunk is None or doubt(lv) is not None:
        return False
    if call_levels([base, lv], factor)[1].call is not Call.UNDECIDED:
        return False
    b_lo, b_hi = p99_interval(base.chunk)
    if base_doubt(base, factor) is not None:  # never within a doubtful base: only beyond
        return lv.chunk.p99_us > factor * b_hi
    return lv.chunk.p99_us <= factor * b_lo or lv.chunk.p99_us > factor * b_hi


def knee(levels: Sequence[FaninLevel], factor: float) -> int | None:
    """Readers of the first level whose p99 is surely past factor x the first level's."""
    return next((lv.readers for lv in call_levels(levels, factor) if lv.call is Call.BEYOND), None)


def judge(
    storage: str,
    profile: str,
    chunk_bytes: int,
    factor: float,
    levels: Sequence[FaninLevel],
    siblings: Sequence[FaninResult] = (),
) -> FaninResult:
    """One storage node's verdict; ``siblings``: the other storage nodes' sweeps (judged
    alone), the contrast a knee at shared uplinks is checked against."""
    called = call_levels(levels, factor)
    measured = [lv for lv in called if lv.chunk is not None]
    if len(measured) < 2:
        return FaninResult(
            storage, profile, chunk_bytes, factor, called, None, None,
            "not judged: fewer than two levels measured",
        )  # fmt: skip
    base = measured[0]
    assert base.chunk is not None
    safe = base.readers
    for lv in measured[1:]:
        if lv.call is not Call.WITHIN:
            break
        safe = lv.readers
    at = next((lv for lv in measured if lv.call is Call.BEYOND), None)
    first_open = next((lv for lv in measured if lv.call is Call.UNDECIDED), None)
    k = at.readers if at is not None else None
    parts = []
    # "knee" is said in words before it is used: where a chunk's p99 rises past the factor
    if at is None and first_open is None:
        parts.append(
            f"a chunk's p99 completion stays within {factor:g}x that at {_n(base.readers)} "
            f"up to {_n(safe)}: no knee"
        )
    if first_open is not None and (at is None or first_open.readers < at.readers):
        parts.append(_undecided(first_open, base, factor))
    if at is not None:
        assert at.chunk is not None
        ratio = at.chunk.p99_us / base.chunk.p99_us
        parts.append(
            f"at {at.readers} readers a chunk's p99 completion rises past {factor:g}x that at "
            f"{_n(base.readers)}, the knee: {format_duration_us(at.chunk.p99_us)}, "
            f"{ratio:.1f}x the {format_duration_us(base.chunk.p99_us)}"
        )
    verdict = f"safe up to {_readers(safe)} ({'; '.join(parts)})"
    cleared: str | None = None
    implicated: tuple[str, ...] = ()
    if at is not None:
        cleared, implicated, words = _uplinks(storage, at, siblings)
        verdict += words
        if at.storage_tcp_retrans:
            verdict += (
                f"; {storage} retransmitted {at.storage_tcp_retrans:,} TCP "
                f"segment{'' if at.storage_tcp_retrans == 1 else 's'} at {k} readers: loss "
                "behind the tail"
            )
        if found := storage_findings(storage, at):
            verdict += f"; {storage}'s counters at {k} readers: {', '.join(found[:3])}"
    return FaninResult(
        storage, profile, chunk_bytes, factor, called, k, safe, verdict,
        uplinks_cleared_by=cleared, uplinks_implicated_by=implicated,
    )  # fmt: skip


def judge_all(results: Sequence[FaninResult]) -> tuple[FaninResult, ...]:
    """Every storage node's sweep judged again with the others as its contrast: a knee at
    shared rack uplinks is the node's own port when a sibling read by the same readers
    over the same uplinks shows none there."""
    alone = [judge(r.storage, r.profile, r.chunk_bytes, r.knee_factor, r.levels) for r in results]
    out = []
    for r, was in zip(alone, results, strict=True):
        others = [s for s in alone if s.storage != r.storage]
        again = judge(r.storage, r.profile, r.chunk_bytes, r.knee_factor, r.levels, others)
        out.append(dataclasses.replace(again, engine=was.engine))  # judged on its own
    return tuple(out)


def _uplinks(
    storage: str, at: FaninLevel, siblings: Sequence[FaninResult]
) -> tuple[str | None, tuple[str, ...], str]:
    """(the sibling that clears the shared uplinks, or None; those that show the knee
    there too; the verdict's words on them)."""
    if not at.shared_uplinks:
        return None, (), ""
    shared = ", ".join(at.shared_uplinks)
    same = [
        (s, lv)
        for s in siblings
        for lv in s.levels
        if lv.readers == at.readers
        and lv.nodes == at.nodes
        and set(at.shared_uplinks) <= set(lv.shared_uplinks)
        and lv.call in (Call.WITHIN, Call.BEYOND)
    ]
    clear = [s.storage for s, lv in same if lv.call is Call.WITHIN]
    if clear:
        return (
            clear[0],
            (),
            (
                f"; at {at.readers} readers rack uplinks are shared ({shared}), but {clear[0]} "
                f"was read by the same readers over the same uplinks with no knee: the knee is "
                f"{storage}'s own port"
            ),
        )
    also = [s.storage for s, lv in same if lv.call is Call.BEYOND]
    if also:
        return (
            None,
            tuple(also),
            (
                f"; at {at.readers} readers rack uplinks are shared ({shared}) and "
                f"{', '.join(also)} shows the knee too with the same readers: the uplinks (or "
                "the readers) are the likelier cause"
            ),
        )
    return (
        None,
        (),
        (
            f"; at {at.readers} readers rack uplinks are shared: {shared} (no other storage node "
            "was read by the same readers to tell them from the storage port)"
        ),
    )


def _undecided(lv: FaninLevel, base: FaninLevel, factor: float) -> str:
    """Why a level is preliminary, and what decides it."""
    assert lv.chunk is not None and base.chunk is not None
    if (why := doubt(lv)) is not None:
        return f"preliminary at {lv.readers}: {why}"
    if (why := base_doubt(base, factor)) is not None:
        return f"preliminary at {lv.readers}: at {_n(base.readers)} (the first level) {why}"
    lo, hi = p99_interval(lv.chunk)
    b_lo, b_hi = p99_interval(base.chunk)
    return (
        f"preliminary at {lv.readers}: chunk p99 {format_duration_us(lv.chunk.p99_us)} "
        f"(95% CI {_ci(lo, hi)}) is not surely within or past {factor:g}x the "
        f"{format_duration_us(base.chunk.p99_us)} at {_n(base.readers)} (CI {_ci(b_lo, b_hi)}): "
        "more --fanin-chunks decide it"
    )


def _n(k: int) -> str:
    return f"{k} reader{'' if k == 1 else 's'}"


def _ci(lo: float, hi: float) -> str:
    top = "unbounded" if math.isinf(hi) else format_duration_us(hi)
    return f"{format_duration_us(lo)} to {top}"


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
    # the relative TTFT change at the level's p50 (netqual.model.ttft); None: the
    # workload gives no kv_share
    ttft_change: float | None = None

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


def storage_rtt_us(results: Results, storage: str) -> tuple[float, float] | None:
    """The round trip of the paths to ``storage`` (median p50, median p99 over them), as
    the run measured them; None without any."""
    table = results.paths
    code = [i for i, n in enumerate(table.names) if n == storage or n.split("/")[0] == storage]
    mine = np.isin(table.src, code) | np.isin(table.dst, code)
    mine &= table.has_rtt
    if not mine.any():
        return None
    return float(np.median(table.rtt["p50"][mine])), float(np.median(table.rtt["p99"][mine]))


def project(
    result: FaninResult, w: Workload, rtt_us: tuple[float, float] | None = None
) -> tuple[Projection, ...]:
    """Per measured level; () when ``no_projection`` says why not. A chunk is fetched as the
    one TTFT model says (``netqual.model.ttft``): the level's chunk completion (its bytes
    at the level's shared goodput, and one round trip) plus round_trips_per_chunk - 1 more
    of the reader's own round trip ``rtt_us`` (p50, p99; None: none is known, and only the
    measured one counts). The bytes count once."""
    chunks = w.prompt_chunks
    if chunks is None or no_projection(result, w) is not None:
        return ()
    rtt50, rtt99 = rtt_us if rtt_us is not None else (0.0, 0.0)
    n = w.round_trips_per_chunk
    base = chunks * w.budget_us
    out = []
    for lv in result.levels:
        if lv.chunk is None:
            continue
        chunk50 = max(fetch_from_cell_us(lv.chunk.p50_us, rtt50, n), lv.chunk.p50_us - rtt50)
        chunk99 = max(fetch_from_cell_us(lv.chunk.p99_us, rtt99, n), lv.chunk.p99_us - rtt99)
        p50, p99 = chunks * chunk50, chunks * chunk99
        change = None
        if w.kv_share is not None:
            change = w.kv_share * (chunk50 / w.budget_us - 1)
        out.append(Projection(lv.readers, chunks, p50, p99, base, p50 - base, p99 - base, change))
    return tuple(out)


def pays_up_to(projections: Sequence[Projection]) -> int | None:
    """The most readers up to which every level's projection pays; None: not even 1."""
    best = None
    for p in projections:
        if not p.pays:
            break
        best = p.readers
    return best
