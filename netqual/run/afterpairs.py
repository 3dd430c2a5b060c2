"""The steps after every pair is measured: the engine cells, the fan-in sweep, the
multirail levels and the interference check, each after the one before, never beside the
pair probes. Each takes the run's session and records what it found in its results."""

from __future__ import annotations

import dataclasses

from netqual.analysis import interference
from netqual.base import interrupts
from netqual.model.fanin import EngineFaninLevel, FaninLevel
from netqual.model.node import Node
from netqual.model.path import PathResult
from netqual.model.plan import ProbePlan
from netqual.model.progress import Stage
from netqual.planning import sampling
from netqual.planning.phases import Phase
from netqual.results import journal
from netqual.run import engine_cells, fanin_engine
from netqual.run import fanin as fanin_run
from netqual.run import multirail as multirail_run
from netqual.run.pairprobe import as_path, measure_pair
from netqual.run.runstate import FANIN_ENGINE
from netqual.run.session import RunSession


def measure_engines(s: RunSession) -> None:
    """Each measured path's fetch engine cells (``run --engine``), one path at a time,
    never beside a probe: an engine start costs seconds of both hosts' CPU. Each path's
    cells are journalled as they end; a resumed run keeps those it holds. A path refused
    for its configuration (an engine a node lacks, a fallback from --engine-require) is
    not journalled: --resume tries it again."""
    cfg, rec, observer = s.config, s.journal, s.observer
    assert cfg.engine is not None
    by_name = {n.name: n for n in cfg.endpoints}
    table = rec.paths.table()
    todo = [
        i for i, key in enumerate(table.keys())
        if key not in rec.engine and table.error[i] is None
        and key[0] in by_name and key[1] in by_name
    ]  # fmt: skip
    observer.phase(Stage.ENGINE, 0, len(todo) + len(rec.engine), len(rec.engine))
    device = cfg.transport_options.rdma.device
    for i in todo:
        path = table.row(i)
        outcome = engine_cells.measure(
            by_name[path.src], by_name[path.dst], cfg.engine, cfg.token, path.bulk, device
        )
        if outcome.configuration is not None:
            rec.engine_refused[path.key] = outcome.configuration
        else:
            rec.engine_cells(path.key, outcome.cells)
        observer.item(None)


def measure_multirail(s: RunSession) -> None:
    """Node pairs read over 1..R rails at once; not journalled: a resumed run reads again."""
    cfg = s.config

    def bulk(a: Node, b: Node, plan: ProbePlan) -> PathResult:
        one = dataclasses.replace(cfg, plan=plan)
        return as_path(measure_pair(a, b, one, Phase.BULK), a, b, one)

    pairs = multirail_run.node_pairs(cfg.nodes, cfg.multirail)
    s.observer.phase(Stage.MULTIRAIL, 0, len(pairs))
    found = []
    for a, b in pairs:
        found.append(
            multirail_run.measure_pair(a, b, cfg.plan, bulk, cfg.fabric, cfg.multirail_share)
        )
        s.observer.item(None)
    s.results.multirail = tuple(found)


def sweep_fanin(s: RunSession) -> None:
    """The fan-in sweep, after every pair: it never runs beside the pair probes. Each level
    is journalled as it ends; a resumed run keeps the levels its journal holds. With
    ``--engine``, then the same levels through the fetch engine (``run.fanin_engine``),
    journalled likewise."""
    cfg, f, observer = s.config, s.journal.file, s.observer
    assert cfg.fanin is not None
    levels = fanin_run.level_count(cfg.nodes, cfg.fanin)
    held = s.prior.engine_levels(cfg.engine.name) if cfg.engine is not None else {}
    total = levels * (2 if cfg.engine is not None else 1)
    observer.phase(Stage.FANIN, 0, total, len(s.prior.fanin) + len(held))

    def done(storage: str, level: FaninLevel) -> None:
        with interrupts.atomic():
            journal.append_fanin(f, storage, level)
        observer.item(None)

    ctx = fanin_run.SweepContext(
        cfg.transport, cfg.token, cfg.transport_options, cfg.policy.fanin_knee_factor,
        cfg.plan.timeout_s,
    )  # fmt: skip
    s.results.fanin = fanin_run.sweep(cfg.nodes, cfg.fanin, ctx, done, s.prior.fanin)
    if cfg.engine is None:
        return
    name = cfg.engine.name

    def engine_done(storage: str, level: EngineFaninLevel) -> None:
        with interrupts.atomic():
            journal.append_fanin_engine(f, storage, name, level)
        observer.item(None)

    through = fanin_engine.EngineSweep(cfg.engine, cfg.token, cfg.transport_options.rdma.device)
    started = s.clock()
    try:
        s.results.fanin = fanin_engine.sweep(
            cfg.nodes, cfg.fanin, through, s.results.fanin, engine_done, held
        )
    finally:  # a phase of its own in the estimate (fanin_engine_s)
        s.spent.add_part(FANIN_ENGINE, s.clock() - started)


def check_interference(s: RunSession) -> None:
    """Re-measure a sample alone, one pair at a time, ping-pong only
    (netqual.analysis.interference).
    The sample and each alone measurement are journalled, so a resumed run keeps the
    sample and re-measures only what it had not."""
    cfg, prior, f = s.config, s.prior, s.journal.file
    paths = s.journal.paths.table()
    by_name = {n.name: n for n in cfg.endpoints}
    rows = paths.rows_of(prior.sample) if prior.sample is not None else [None]
    if prior.sample is not None and all(r is not None for r in rows):
        sample = [paths.row(r) for r in rows if r is not None]
        alone = dict(prior.alone)
    else:
        sample = sampling.choose_sample(
            paths, cfg.interference_fraction, cfg.interference_minimum, cfg.interference_seed
        )
        alone = {}
        journal.append_sample(f, [p.key for p in sample])
    s.observer.phase(Stage.INTERFERENCE, 0, len(sample), sum(p.key in alone for p in sample))
    for p in sample:
        if p.key not in alone:
            src, dst = by_name[p.src], by_name[p.dst]
            measured = as_path(measure_pair(src, dst, cfg, Phase.PINGPONG), src, dst, cfg)
            with interrupts.atomic():
                journal.append_alone(f, measured)
                alone[p.key] = measured
            s.observer.item(None)
    s.results.interference = interference.compare(
        [(p, alone[p.key]) for p in sample], cfg.interference_tolerance, cfg.parallel == 1
    )
