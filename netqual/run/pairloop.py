"""The measurement loop: every planned pair the journal does not hold, round by round,
with the agents that failed at the start refused and silent ones not asked again."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

from netqual.agent.wire.sessions import Sessions
from netqual.base.errors import NoAgentsError
from netqual.model.path import NotMeasured
from netqual.model.preflight import PreflightReport
from netqual.model.progress import RunObserver, Stage
from netqual.planning import rails as rails_mod
from netqual.planning import schedule
from netqual.planning.budget import BulkBudget
from netqual.planning.schedule import Pair
from netqual.results import journal
from netqual.run import phaserun
from netqual.run.agentcheck import at_start
from netqual.run.config import RunConfig
from netqual.run.pairprobe import CONFIGURATION, combine_phases, failed_path, measure_pair, now_iso
from netqual.run.runstate import RunJournal, Spent


def measure_pairs(
    cfg: RunConfig,
    pairing: schedule.Schedule,
    budget: BulkBudget,
    prior: journal.Journal,
    rec: RunJournal,
    observer: RunObserver,
    spent: Spent,
    resumed: bool,
    preflight: PreflightReport | None,
) -> None:
    """The agents the run may use (``agentcheck.at_start``), then every pair the journal
    does not hold finished. An agent refused at the start is a configuration problem: its
    pairs are not measured (configuration), never unsafe paths."""
    observer.phase(Stage.PREFLIGHT, 0, len(cfg.nodes))
    checked_at = time.monotonic()
    down, refused = at_start(cfg.nodes, cfg.token, preflight, resumed, spent.busy, spent.hosts)
    spent.preflight_s += time.monotonic() - checked_at
    for _ in cfg.nodes:  # every agent checked: the phase ends at agents N/N, not 0/N
        observer.item()
    if len(down) == len({n.node_name for n in cfg.nodes}):
        # Each problem already names its node ("gpu01 unreachable: ..."); don't repeat it.
        detail = "; ".join(v if v.startswith(k) else f"{k}: {v}" for k, v in down.items())
        raise NoAgentsError(
            f"every agent failed the pre-flight check, so nothing was measured ({detail}):"
            " fix them (netqual check INVENTORY shows each), then run again"
        )
    by_name = {n.name: n for n in cfg.endpoints}
    skip = prior.done.keys() | prior.pending.keys()

    # Nodes that took a probe and never answered: their later pairs are marked, not tried
    # (a full timeout each, every round).
    silent: dict[str, str] = {}

    def dead(a: str, b: str) -> str | None:
        a, b = _node_of(a), _node_of(b)
        gone = a if a in down else b if b in down else None
        if gone is None:
            return None
        if gone in silent:
            return f"not measured: agent on {gone} {down[gone]}"
        return f"agent on {gone} not answering: {down[gone]}"

    def live_rounds() -> Iterator[list[Pair]]:
        """Rounds as planned, less finished pairs; pairs with a dead agent fail here."""
        for all_pairs in pairing.rounds():
            pairs = [(a, b) for a, b in all_pairs if (a.name, b.name) not in skip]
            down.update(silent)  # a node silent in an earlier round stays out
            for a, b in pairs:
                ends = (a.node_name, b.node_name, a.name, b.name)
                gone = next((e for e in ends if e in refused), None)
                if gone is not None:
                    why = refused[gone]
                    rec.skipped.append(NotMeasured(a.name, b.name, why, CONFIGURATION))
                    observer.item(None)
                elif (reason := dead(a.name, b.name)) is not None:
                    failed = failed_path(a, b, cfg, reason, now_iso(), time.monotonic())
                    rec.finished(failed)
                    observer.item(failed)
            yield [
                (a, b)
                for a, b in pairs
                if dead(a.name, b.name) is None and not {a.name, b.name} & refused.keys()
            ]

    pending: list[Pair] = []
    for src, dst in list(prior.pending):
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
    sessions = Sessions(cfg.token)  # one open session per agent, reused (agent.wire.sessions)
    try:
        phaserun.execute(
            live_rounds(),
            phaserun.Totals(pairing.round_count, pairing.pair_count, len(prior.done), pending),
            cfg.schedule,
            budget,
            bulk=cfg.plan.bulk,
            parallel=cfg.parallel,
            work=phaserun.Work(
                measure=lambda a, b, phase: measure_pair(a, b, cfg, phase, silent, sessions),
                combine=lambda pp, bk: combine_phases(pp, bk, cfg),
                emit=rec.finished,
                emit_pingpong=rec.pingpong,
                observer=observer,
                pinged=rec.pending.__getitem__,
            ),
            tally=spent.tally,
        )
    finally:
        sessions.close()


def _node_of(name: str) -> str:
    """The node of a path end ("gpu01/eth1" -> "gpu01"): agents are up or down per node."""
    return rails_mod.split_endpoint(name)[0]
