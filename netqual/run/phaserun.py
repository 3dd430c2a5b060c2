"""Running a run's probes in the phases ``netqual.planning.phases`` lays out: groups of
pairs measured at once, each result stamped with its phase window and recorded the moment
it exists, ping-pong before bulk (aligned), per round, or one request per pair
(unaligned); and what the phases took (``Tally``, ``run.schedule.actual``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from netqual.analysis import counter_evidence
from netqual.analysis.evidence.loss import pingpong_counters
from netqual.model.node import Node
from netqual.model.path import NotMeasured, PathResult
from netqual.model.progress import RunObserver, Stage
from netqual.planning import packing
from netqual.planning.budget import BulkBudget
from netqual.planning.packing import Coverage
from netqual.planning.phases import Phase, ScheduleConfig, Timing, bulk_waves, host_batches
from netqual.planning.schedule import Pair

# A pair's measurement: a path, or a pair not measured (configuration: no verdict).
Measured: TypeAlias = PathResult | NotMeasured
Measure = Callable[[Node, Node, Phase], Measured]
Combine = Callable[[PathResult, Measured], Measured]
Emit = Callable[[Measured], None]
EmitPath = Callable[[PathResult], None]
Each = Callable[[Pair, Measured], None]
Pinged = Callable[[tuple[str, str]], PathResult]


@dataclass(frozen=True)
class Work:
    """How execute measures, and where each result goes the moment it exists."""

    measure: Measure
    combine: Combine
    emit: Emit  # a finished pair (every phase), one that failed, or one not measured
    emit_pingpong: EmitPath  # ping-pong finished; the pair's bulk phase follows
    observer: RunObserver
    # The ping-pong record ``emit_pingpong`` kept for (src, dst), until the pair finishes.
    # The one place such records wait (the run journal's, as columns): a 1,024-node run
    # has half a million of them between the phases.
    pinged: Pinged


@dataclass(frozen=True)
class Totals:
    """The run's size, for progress: rounds planned, pairs planned and those a resumed run
    already has (finished, or with ping-pong only: ``pending``, whose bulk phase is due;
    their records are ``Work.pinged``'s)."""

    rounds: int
    pairs: int
    finished: int = 0
    pending: Sequence[Pair] = ()


@dataclass
class _Runner:
    """Runs groups of pairs concurrently and stamps each result with its phase window."""

    measure: Measure
    t0: float

    def group(
        self,
        pairs: Sequence[Pair],
        phase: Phase,
        each: Each,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Measure ``pairs`` at once; ``each`` gets every result as it finishes (in this
        thread), so it is on disk before its slower neighbours end."""

        def one(pair: Pair) -> Measured:
            start = time.monotonic() - self.t0
            path = self.measure(pair[0], pair[1], phase)
            if isinstance(path, NotMeasured):
                return path
            window = [round(start, 6), round(time.monotonic() - self.t0, 6)]
            return _stamp(path, {phase.value: window}, extra or {})

        if len(pairs) == 1:
            each(pairs[0], one(pairs[0]))
            return
        pool = ThreadPoolExecutor(max_workers=len(pairs))
        try:
            futures = {pool.submit(one, pair): pair for pair in pairs}
            for done in as_completed(futures):
                each(futures[done], done.result())
        except BaseException:
            # On an interrupt, probes still on the wire are abandoned, not waited for: what
            # finished is recorded, and the command exits without joining their threads.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)  # every probe is done: its threads end before the next group


def _shown(m: Measured) -> PathResult | None:
    """What progress shows of a measurement: a pair not measured has no verdict to count
    towards the running worst."""
    return m if isinstance(m, PathResult) else None


def _windows(path: PathResult) -> dict[str, Any]:
    raw = path.details.get("phase_windows_s")
    return dict(raw) if isinstance(raw, Mapping) else {}


def _stamp(path: PathResult, window: dict[str, Any], extra: dict[str, Any]) -> PathResult:
    details = dict(path.details)
    details["phase_windows_s"] = {**_windows(path), **window}
    details.update(extra)
    return replace(path, details=details)


def merged_details(pingpong: PathResult, bulk: PathResult) -> dict[str, Any]:
    """Details of a path measured in two requests: the ping-pong request's, plus both
    phase windows and the bulk wave's labels."""
    details = {**dict(bulk.details), **dict(pingpong.details)}
    details["phase_windows_s"] = {**_windows(bulk), **_windows(pingpong)}
    for label in ("bulk_wave_pairs", "incast_readers"):
        if label in bulk.details:
            details[label] = bulk.details[label]
    a, b = pingpong.details.get("counters"), bulk.details.get("counters")
    if isinstance(a, Mapping) and isinstance(b, Mapping):  # both phases' windows as one
        details["counters"] = counter_evidence.merge(a, b)
        # the ping-pong phase's loss apart: a bulk read's retransmissions are TCP's own
        # queue-finding, not a lossy link (netqual.analysis.evidence.loss)
        details["pingpong_counters"] = pingpong_counters(a)
        details["carried_by"] = counter_evidence.carried_by(
            details, pingpong.transport, pingpong.src_nic, pingpong.dst_nic
        )
    return details


@dataclass
class Tally:
    """What the phases of a run took (``run.schedule.actual``): seconds and counts."""

    pingpong_s: float = 0.0
    bulk_s: float = 0.0
    pingpong_rounds: int = 0
    bulk_waves: int = 0
    bulk_pairs: int = 0
    bulk_not_selected: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "pingpong_s": round(self.pingpong_s, 3),
            "bulk_s": round(self.bulk_s, 3),
            "pingpong_rounds": self.pingpong_rounds,
            "bulk_waves": self.bulk_waves,
            "bulk_pairs": self.bulk_pairs,
            "bulk_not_selected": self.bulk_not_selected,
        }


def pair_stages(timing: Timing, bulk: bool) -> tuple[Stage, ...]:
    """The pair steps a schedule runs, in order (the run's step table asks the same):
    ping-pong alone without bulk; aligned, every ping-pong and then the bulk waves;
    per-round and unaligned, one probe step (ping-pong and bulk per round, or per pair)."""
    if not bulk:
        return (Stage.PINGPONG,)
    if timing is Timing.ALIGNED:
        return (Stage.PINGPONG, Stage.BULK)
    return (Stage.PROBE,)


@dataclass
class PairRun:
    """The pair steps of one run: the rounds still to measure (a round is consumed only
    when it starts), one runner (every phase window counts from its start), where each
    result goes, what the phases took (``tally``, filled as phases end, so an interrupted
    run keeps what finished) and, between the aligned ping-pong and bulk steps, the pairs
    whose bulk phase is due. ``pingpong``, ``bulk_waves`` and ``probe`` are the steps."""

    rounds: Iterable[Sequence[Pair]]
    totals: Totals
    schedule: ScheduleConfig
    budget: BulkBudget
    bulk: bool
    parallel: int | None
    work: Work
    tally: Tally = field(default_factory=Tally)
    due: list[Pair] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.runner = _Runner(self.work.measure, time.monotonic())

    def pingpong(self) -> None:
        """Every round's ping-pong. Without bulk each is the whole pair; else (aligned)
        each is recorded as it finishes (``work.emit_pingpong``) and its pair is due for
        the bulk step, after the pairs a resumed run left with their ping-pong only."""
        if not self.bulk:
            self._whole(Phase.PINGPONG, Stage.PINGPONG)
            return
        totals = self.totals
        self.work.observer.phase(
            Stage.PINGPONG, totals.rounds, totals.pairs, totals.finished + len(totals.pending)
        )
        measured = _pingpong_phase(
            self.runner, self.rounds, self.parallel, self.work, self.tally, count=True
        )
        self.due = [*totals.pending, *measured]

    def bulk_waves(self) -> None:
        """The bulk phase of every pair due, in waves under the budget (aligned)."""
        _bulk_phase(
            self.runner, self.due, self.budget, self.schedule.bulk_pairs, self.work,
            self.tally, announce=True,
        )  # fmt: skip

    def probe(self) -> None:
        """Ping-pong and bulk together: one request per pair (unaligned), or each round's
        ping-pong then its bulk waves (per-round), after the bulk phase of the pairs a
        resumed run left with their ping-pong only."""
        if self.schedule.schedule is Timing.UNALIGNED:
            self._whole(Phase.PROBE, Stage.PROBE)
            return
        obs, totals, tally = self.work.observer, self.totals, self.tally
        coverage = self.schedule.bulk_pairs
        obs.phase(Stage.PROBE, totals.rounds, totals.pairs, totals.finished)
        if totals.pending:
            _bulk_phase(self.runner, list(totals.pending), self.budget, coverage, self.work, tally)
        for pairs in self.rounds:
            measured = _pingpong_phase(
                self.runner, [pairs], self.parallel, self.work, tally, count=False
            )
            _bulk_phase(self.runner, measured, self.budget, coverage, self.work, tally)
            obs.step()

    def _whole(self, phase: Phase, stage: Stage) -> None:
        """One request per pair: the whole pair, finished as it ends."""
        obs, work, tally = self.work.observer, self.work, self.tally
        obs.phase(stage, self.totals.rounds, self.totals.pairs, self.totals.finished)

        def finished(pair: Pair, path: Measured) -> None:
            work.emit(path)
            obs.item(_shown(path))

        t0 = time.monotonic()
        for pairs in self.rounds:
            tally.pingpong_rounds += 1
            for batch in host_batches(pairs, self.parallel):
                self.runner.group(batch, phase, finished)
            obs.step()
        tally.pingpong_s = time.monotonic() - t0

    def step(self, stage: Stage) -> None:
        """The pair step of ``stage`` (one of ``pair_stages``)."""
        steps = {Stage.PINGPONG: self.pingpong, Stage.BULK: self.bulk_waves}
        steps[Stage.PROBE] = self.probe
        steps[stage]()


def execute(
    rounds: Iterable[Sequence[Pair]],
    totals: Totals,
    cfg: ScheduleConfig,
    budget: BulkBudget,
    *,
    bulk: bool,
    parallel: int | None,
    work: Work,
    tally: Tally | None = None,
) -> Tally:
    """Every pair step of the configured schedule, in order (``pair_stages``): every pair
    of ``rounds`` measured, and the bulk phase of ``totals.pending``. Each ping-pong goes
    to ``work.emit_pingpong`` as it finishes, each finished pair to ``work.emit``.
    Returns the tally (``tally``, when given, filled)."""
    run = PairRun(rounds, totals, cfg, budget, bulk, parallel, work)
    run.tally = tally if tally is not None else run.tally
    for stage in pair_stages(cfg.schedule, bulk):
        run.step(stage)
    return run.tally


def _pingpong_phase(
    runner: _Runner,
    rounds: Iterable[Sequence[Pair]],
    parallel: int | None,
    work: Work,
    tally: Tally,
    count: bool,
) -> list[Pair]:
    """Ping-pong of every pair, each recorded as it finishes (``work.emit_pingpong``);
    failed pairs are finished at once (no bulk for them). Returns the pairs whose bulk
    phase is due. ``count``: a ping-pong is an item of the observer's phase (a failed one
    always is: that pair is finished)."""
    done: list[Pair] = []

    def finished(pair: Pair, path: Measured) -> None:
        ended = isinstance(path, NotMeasured) or path.error is not None
        if isinstance(path, PathResult) and path.error is None:
            work.emit_pingpong(path)
            done.append(pair)
        else:
            work.emit(path)
        if count or ended:
            work.observer.item(_shown(path))

    t0 = time.monotonic()
    try:
        for pairs in rounds:
            tally.pingpong_rounds += 1
            for batch in host_batches(pairs, parallel):
                runner.group(batch, Phase.PINGPONG, finished)
            if count:
                work.observer.step()
    finally:
        tally.pingpong_s += time.monotonic() - t0
    return done


def _bulk_phase(
    runner: _Runner,
    measured: Sequence[Pair],
    budget: BulkBudget,
    coverage: Coverage,
    work: Work,
    tally: Tally,
    announce: bool = False,
) -> None:
    """Bulk reads of the pairs ``coverage`` selects, in waves under the budget; the others
    are finished with their ping-pong alone. Each ping-pong record is fetched
    (``work.pinged``) when its pair finishes. ``announce``: this is a phase of its own."""
    t0 = time.monotonic()
    chosen = packing.select(measured, coverage)
    waves = bulk_waves([pair for pair, c in zip(measured, chosen, strict=True) if c], budget)
    if announce:
        work.observer.phase(Stage.BULK, len(waves), len(measured))

    def finished(pair: Pair, path: Measured) -> None:
        combined = work.combine(work.pinged((pair[0].name, pair[1].name)), path)
        work.emit(combined)
        work.observer.item(_shown(combined))

    try:
        for (a, b), bulk in zip(measured, chosen, strict=True):
            if bulk:
                continue
            # The ping-pong result is the whole path: judged without bulk, and says why.
            path = work.pinged((a.name, b.name))
            details = {**dict(path.details), "bulk_pairs": f"not selected ({coverage.label})"}
            path = replace(path, details=details)
            work.emit(path)
            work.observer.item(path)
            tally.bulk_not_selected += 1
        for wave in waves:
            # Labels: how many bulk pairs shared this wave; an incast wave says so explicitly.
            extra: dict[str, Any] = {"bulk_wave_pairs": len(wave)}
            if budget.incast is not None:
                extra["incast_readers"] = len(wave)
            tally.bulk_waves += 1
            tally.bulk_pairs += len(wave)
            runner.group(wave, Phase.BULK, finished, extra)
            if announce:
                work.observer.step()
    finally:
        tally.bulk_s += time.monotonic() - t0
