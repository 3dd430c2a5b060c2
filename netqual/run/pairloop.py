"""The pair steps (ping-pong, bulk, probe): every planned pair the journal does not hold,
round by round, with the agents the pre-flight step refused left out and silent ones not
asked again. The first pair step that runs sets them up (``pair_run``); each step runs
one phase of ``phaserun.PairRun``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

from netqual.model.path import NotMeasured
from netqual.planning import rails as rails_mod
from netqual.planning.schedule import Pair
from netqual.run import phaserun
from netqual.run.pairprobe import CONFIGURATION, combine_phases, failed_path, measure_pair, now_iso
from netqual.run.session import RunSession


def pingpong(s: RunSession) -> None:
    """Every round's ping-pong (aligned: the bulk step follows; --no-bulk: the pair)."""
    pair_run(s).pingpong()


def bulk(s: RunSession) -> None:
    """The bulk waves of every pair the ping-pong step left due (aligned)."""
    pair_run(s).bulk_waves()


def probe(s: RunSession) -> None:
    """Ping-pong and bulk per round (per-round) or per pair (unaligned)."""
    pair_run(s).probe()


def pair_run(s: RunSession) -> phaserun.PairRun:
    """The pair steps' shared state, set up by the first of them."""
    if s.state.pairs is None:
        s.state.pairs = _start(s)
    return s.state.pairs


def _start(s: RunSession) -> phaserun.PairRun:
    """Rounds as planned less what the journal holds; a resumed run's pairs with their
    ping-pong only, due for their bulk phase unless an agent of theirs is out. An agent
    refused at the start is a configuration problem: its pairs are not measured
    (configuration), never unsafe paths."""
    cfg, rec, state = s.config, s.journal, s.state
    down, refused, silent = state.down, state.refused, state.silent
    by_name = {n.name: n for n in cfg.endpoints}
    skip = s.prior.done.keys() | s.prior.pending.keys()

    def dead(a: str, b: str) -> str | None:
        """Why a pair cannot be measured: an agent down at the start, or one that took a
        probe and never answered (its later pairs are marked, not tried: a full timeout
        each, every round)."""
        a, b = _node_of(a), _node_of(b)
        gone = a if a in down else b if b in down else None
        if gone is None:
            return None
        if gone in silent:
            return f"not measured: agent on {gone} {down[gone]}"
        return f"agent on {gone} not answering: {down[gone]}"

    def live_rounds() -> Iterator[list[Pair]]:
        """Rounds as planned, less finished pairs; pairs with a dead agent fail here."""
        for all_pairs in s.pairing.rounds():
            pairs = [(a, b) for a, b in all_pairs if (a.name, b.name) not in skip]
            down.update(silent)  # a node silent in an earlier round stays out
            for a, b in pairs:
                ends = (a.node_name, b.node_name, a.name, b.name)
                gone = next((e for e in ends if e in refused), None)
                if gone is not None:
                    why = refused[gone]
                    rec.skipped.append(NotMeasured(a.name, b.name, why, CONFIGURATION))
                    s.observer.item(None)
                elif (reason := dead(a.name, b.name)) is not None:
                    failed = failed_path(a, b, cfg, reason, now_iso(), time.monotonic())
                    rec.finished(failed)
                    s.observer.item(failed)
            yield [
                (a, b)
                for a, b in pairs
                if dead(a.name, b.name) is None and not {a.name, b.name} & refused.keys()
            ]

    pending: list[Pair] = []
    for src, dst in list(s.prior.pending):
        gone = next((e for e in (_node_of(src), _node_of(dst), src, dst) if e in refused), None)
        if gone is not None:  # left pending: a later --resume does it
            rec.pending.pop((src, dst))
            why = f"bulk phase: {refused[gone]}"
            rec.skipped.append(NotMeasured(src, dst, why, CONFIGURATION))
        elif (reason := dead(src, dst)) is None:
            pending.append((by_name[src], by_name[dst]))
        else:  # its bulk phase cannot run: finished as failed there
            p = rec.pending[(src, dst)]
            rec.finished(combine_phases(p, dataclasses.replace(p, error=reason), cfg))
    totals = phaserun.Totals(
        s.pairing.round_count, s.pairing.pair_count, len(s.prior.done), pending
    )
    return phaserun.PairRun(
        live_rounds(),
        totals,
        cfg.schedule,
        s.budget,
        bulk=cfg.plan.bulk,
        parallel=cfg.parallel,
        work=phaserun.Work(
            measure=lambda a, b, phase: measure_pair(a, b, cfg, phase, silent, s.agents),
            combine=lambda pp, bk: combine_phases(pp, bk, cfg),
            emit=rec.finished,
            emit_pingpong=rec.pingpong,
            observer=s.observer,
            pinged=rec.pending.__getitem__,
        ),
        tally=s.spent.tally,
    )


def _node_of(name: str) -> str:
    """The node of a path end ("gpu01/eth1" -> "gpu01"): agents are up or down per node."""
    return rails_mod.split_endpoint(name)[0]
