"""The fan-in sweep (``run --fanin``, docs/fanin.md): for each storage node, for each
level k, k compute nodes (each with the profile's ranks) fetch chunks from it at once.

Each rank is one ``probe`` request to its compute node's agent with a bulk-only plan
naming the fetch profile; a level's requests are sent together and the level ends when
the last one answers. The sweep runs after every pair has been measured, one storage node
and one level at a time, so it never overlaps the pair probes or itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from netqual.agent import counters
from netqual.agent.probe_request import SilentAgentError, request_probe
from netqual.agent.wire.protocol import Channel, connect
from netqual.analysis import fanin
from netqual.base.errors import NetqualError, UsageError
from netqual.model.fanin import FaninConfig, FaninLevel, FaninResult
from netqual.model.fetchprofile import profile
from netqual.model.node import Node, Role
from netqual.model.path import RawBulk
from netqual.model.plan import ProbePlan
from netqual.model.preflight import PreflightReport
from netqual.transports import TransportKind, TransportOptions


@dataclass(frozen=True)
class SweepContext:
    transport: TransportKind
    token: bytes | None
    options: TransportOptions
    knee_factor: float
    timeout_s: float  # per rank's request


def readers_order(nodes: Sequence[Node]) -> list[Node]:
    """Compute nodes, one rack after another in turn (r1, r2, r1, r2, ...): a level shares
    a rack uplink only once it has more readers than there are racks."""
    racks: dict[str, list[Node]] = {}
    for n in nodes:
        if n.role in (Role.COMPUTE, Role.ANY):
            racks.setdefault(n.rack or "", []).append(n)
    out: list[Node] = []
    queues = list(racks.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def plan_for(cfg: FaninConfig, timeout_s: float) -> ProbePlan:
    prof = profile(cfg.profile)
    return ProbePlan(
        iterations=1,
        warmup=0,
        chunks_bytes=(cfg.chunk_bytes,),
        depths=(prof.slices_in_flight,),
        bulk_bytes=0,
        min_reads=cfg.chunks,
        timeout_s=timeout_s,
        fetch_profile=cfg.profile,
    )


def level_count(nodes: Sequence[Node], cfg: FaninConfig) -> int:
    """Levels the sweep measures: per storage node, those with enough compute nodes."""
    readers = len(readers_order(nodes))
    storage = sum(n.role is Role.STORAGE for n in nodes)
    return storage * sum(k <= readers for k in cfg.levels)


def sessions_at(cfg: FaninConfig, transport: TransportKind, readers: int) -> int:
    """Sessions a storage agent serves at once at a level of ``readers``: one per rank's
    connection (a TCP profile's every connection is a session of its own; RDMA's QPs share
    their rank's session), plus the coordinator's for the storage counters."""
    prof = profile(cfg.profile)
    per_rank = prof.connections_for(cfg.chunk_bytes) if transport is TransportKind.TCP else 1
    return readers * prof.ranks * per_rank + 1


def check_sessions(
    nodes: Sequence[Node],
    cfg: FaninConfig,
    transport: TransportKind,
    report: PreflightReport,
    done: Collection[tuple[str, int]] = (),
) -> None:
    """Before anything is measured: a UsageError (exit 2) naming every storage node whose
    agent (as the pre-flight found it) would refuse ranks of a level for want of sessions,
    with what the level needs and the --max-sessions that serves the top level; a compute
    agent too small for its ranks likewise. Without it the refused ranks would surface as
    a level's errors after the whole run. ``done``: levels a resumed run has already."""
    served = {n.node: n.max_sessions for n in report.nodes}
    prof = profile(cfg.profile)
    order = readers_order(nodes)
    levels = [k for k in cfg.levels if k <= len(order)]
    problems = []
    for st in (n for n in nodes if n.role is Role.STORAGE):
        most = served.get(st.name)
        todo = [k for k in levels if (st.name, k) not in done]
        over = [k for k in todo if most is not None and sessions_at(cfg, transport, k) > most]
        if not over:
            continue
        first, top = over[0], todo[-1]
        per_rank = sessions_at(cfg, transport, 1) - 1
        why = f"{first} reader{'' if first == 1 else 's'} x {prof.ranks} ranks" + (
            f" x {per_rank // prof.ranks} connections" if per_rank > prof.ranks else ""
        )
        text = (
            f"{st.name}'s agent serves {most} sessions at once; level {first} needs "
            f"{sessions_at(cfg, transport, first)} ({why}, + 1 for its counters)"
        )
        if top != first:
            text += f" and level {top} {sessions_at(cfg, transport, top)}"
        text += f": start it with --max-sessions {sessions_at(cfg, transport, top)}"
        fits = [k for k in todo if k < first]
        if fits:
            text += f", or sweep up to {fits[-1]} reader{'' if fits[-1] == 1 else 's'}"
        problems.append(text)
    for r in order[: max(levels, default=0)]:
        if (most := served.get(r.name)) is not None and most < prof.ranks:
            problems.append(
                f"{r.name}'s agent serves {most} sessions at once, its {prof.ranks} ranks "
                f"need {prof.ranks}: start it with --max-sessions {prof.ranks}"
            )
    if problems:
        raise UsageError("--fanin", "; ".join(problems) + ". Nothing was measured")


def sweep(
    nodes: Sequence[Node],
    cfg: FaninConfig,
    ctx: SweepContext,
    on_level: Callable[[str, FaninLevel], None] | None = None,
    done: Mapping[tuple[str, int], FaninLevel] | None = None,
) -> tuple[FaninResult, ...]:
    """``on_level`` hears of each level measured now; ``done``: levels a resumed run has."""
    prof = profile(cfg.profile)
    order = readers_order(nodes)
    plan = plan_for(cfg, ctx.timeout_s)
    out = []
    for storage in (n for n in nodes if n.role is Role.STORAGE):
        levels = []
        for k in cfg.levels:
            if k > len(order):
                levels.append(FaninLevel(k, None, skipped=f"only {len(order)} compute nodes"))
                continue
            if (kept := (done or {}).get((storage.name, k))) is not None:
                levels.append(kept)
                continue
            base = next((b for b in levels if b.chunk is not None), None)
            lv = _level(storage, order[:k], prof.ranks, prof.ranks_in_step, plan, ctx, base)
            levels.append(lv)
            if on_level is not None:
                on_level(storage.name, lv)
        out.append(fanin.judge(storage.name, cfg.profile, cfg.chunk_bytes, ctx.knee_factor, levels))
    return fanin.judge_all(out)  # each with the others as its contrast at shared uplinks


# An undecided level (its p99's interval straddles the knee factor x the first level's) that
# more of its own chunks can decide (analysis.fanin.more_decides) is measured again, up to
# this many rounds in all, and the rounds pooled: more chunks narrow the interval where it
# matters, instead of a verdict that says "preliminary"
MAX_ROUNDS = 3


@dataclass
class _Rounds:
    per_node: list[list[list[RawBulk]]]  # [round][reader]: the cells of its ranks
    errors: list[str]
    retrans: list[int | None]  # per rank that answered, every round


def _level(
    storage: Node,
    readers: Sequence[Node],
    ranks: int,
    ranks_in_step: bool,
    plan: ProbePlan,
    ctx: SweepContext,
    base: FaninLevel | None = None,
) -> FaninLevel:
    """One level: a round of every reader's ranks at once; while the knee rule cannot call
    the level against ``base`` (the sweep's first measured level), another round, up to
    MAX_ROUNDS. The storage node's counter window spans all of them."""
    got = _Rounds([], [], [])
    window = StorageWindow(storage, ctx.token, ctx.timeout_s)
    try:
        while True:
            _round(storage, readers, ranks, plan, ctx, got)
            lv = fanin.level_of_rounds(storage, readers, got.per_node, got.errors, ranks_in_step)
            if base is None or len(got.per_node) >= MAX_ROUNDS or lv.errors:
                break
            if not fanin.more_decides(base, lv, ctx.knee_factor):
                break
    finally:
        moved = window.close()
    known = [r for r in got.retrans if r is not None]
    total = sum(known) if got.retrans and len(known) == len(got.retrans) else None
    return dataclasses.replace(lv, storage_tcp_retrans=total, storage_counters=moved)


def _round(
    storage: Node,
    readers: Sequence[Node],
    ranks: int,
    plan: ProbePlan,
    ctx: SweepContext,
    into: _Rounds,
) -> None:
    """Every reader's ranks fetch at once; their cells, failures and retransmissions are
    added to ``into``."""
    jobs = [r for r in readers for _ in range(ranks)]

    def one(reader: Node) -> RawBulk | str:
        try:
            out = request_probe(
                reader, storage, ctx.transport, plan, ctx.token, ctx.timeout_s + 15.0, ctx.options
            )
        except (NetqualError, SilentAgentError, OSError) as err:
            return f"{reader.name}: {err}"
        into.retrans.append(_storage_retrans(out.raw.details))
        cells = [b for b in out.raw.bulk if b.error is None]
        if not cells:
            why = next((b.error for b in out.raw.bulk if b.error), "no chunk fetched")
            return f"{reader.name}: {why}"
        return cells[0]

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        got = list(pool.map(one, jobs))
    per_node: list[list[RawBulk]] = [[] for _ in readers]
    for i, g in enumerate(got):
        if isinstance(g, str):
            into.errors.append(g)
        else:
            per_node[i // ranks].append(g)
    into.per_node.append(per_node)


class StorageWindow:
    """The storage node's host counters around one whole level, taken by its agent: a
    session of the coordinator's own, ``counters.begin`` before the level's requests and
    ``counters.end`` after the last answer (the ranks' probe windows overlap one another,
    so no rank's can say what the storage node's NIC did over the level). It costs the
    storage agent one session for the level. ``close`` gives None when the agent does not
    count (an older agent refuses the request) or does not answer within ``wait_s``.

    A snapshot takes milliseconds on a server, but it is outside the level's timing, so
    waiting is free: ``wait_s`` is the rank's request timeout, at least ``WAIT_S``. (5 s
    alone missed the window on a loaded host's emulated guest, where Python runs ~20x
    slower, and the level lost its counters.)

    The session sits silent while the level runs, and an agent ends a session silent for
    its ``idle_timeout_s`` (120 s by default; ``info`` says it): a level longer than that
    (many chunks, a slow port; 201 s in CI's emulated guest) lost its counters. So the
    window asks ``info`` every quarter of that from a thread of its own, which alone uses
    the channel until ``close``."""

    WAIT_S = 5.0
    IDLE_S = 120.0  # the agent's idle timeout where its ``info`` does not say

    def __init__(self, storage: Node, token: bytes | None, wait_s: float = WAIT_S) -> None:
        self.ch: Channel | None = None
        self.wait_s = max(self.WAIT_S, wait_s)
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None
        try:
            ch, _ = connect(
                storage.control_address, storage.port, token, storage.name, self.wait_s,
                expect_name=storage.identity,
            )  # fmt: skip
        except (NetqualError, OSError):
            return
        try:
            ch.set_timeout(self.wait_s)
            idle = _idle_timeout(ch.request("info", {}, reply="info"), self.IDLE_S)
            ch.request("counters.begin", {"tcp": False})  # no data path of its own
            self.ch = ch
        except (NetqualError, OSError, TimeoutError):
            ch.close()
            return
        self._keeper = threading.Thread(
            target=self._keep, args=(ch, idle / 4), name="fanin-window", daemon=True
        )
        self._keeper.start()

    def _keep(self, ch: Channel, every_s: float) -> None:
        """``info`` every ``every_s`` until ``close``: the agent sees a live peer."""
        while not self._stop.wait(every_s):
            try:
                ch.request("info", {}, reply="info")
            except (NetqualError, OSError, TimeoutError):
                return  # close finds the session gone and gives None

    def close(self) -> dict[str, Any] | None:
        """One side's window (``counters.checked_window``), or None; ends the session."""
        if self.ch is None:
            return None
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(self.wait_s)  # a request in flight answers or times out
            if self._keeper.is_alive():
                self.ch.close()
                return None
        with self.ch as ch:
            try:
                ch.set_timeout(self.wait_s)
                body = ch.request("counters.end", {}, reply="counters")
                moved = counters.checked_window(body, "counters", ch.peer)
            except (NetqualError, OSError, TimeoutError):
                return None
            with contextlib.suppress(NetqualError, OSError):
                ch.send("bye")
        return moved


def _idle_timeout(info: Mapping[str, Any], default: float) -> float:
    """The agent's ``limits.idle_timeout_s`` from its ``info``, within 1 s and 1 day."""
    limits = info.get("limits")
    value = limits.get("idle_timeout_s") if isinstance(limits, Mapping) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(min(max(value, 1.0), 86_400.0))
    return default


def _storage_retrans(details: Mapping[str, Any]) -> int | None:
    """``details.counters.dst.tcp_retrans`` of one rank's probe (the responder, the storage
    node, is the side that sends the chunks); None when the agents did not count."""
    counters = details.get("counters")
    dst = counters.get("dst") if isinstance(counters, Mapping) else None
    value = dst.get("tcp_retrans") if isinstance(dst, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
