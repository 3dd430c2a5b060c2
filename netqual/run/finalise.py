"""results.json from what a run holds, finished or interrupted (the last step of the table)."""

from __future__ import annotations

import dataclasses
import platform
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from netqual import __version__
from netqual.analysis import fleet, localise
from netqual.analysis.decision import decide
from netqual.files.rundir import RunDir
from netqual.model.fleet import ConfigSnapshot, FleetResult
from netqual.model.node import node_nics
from netqual.model.preflight import PreflightReport
from netqual.model.progress import Stage
from netqual.model.run import RunMeta
from netqual.planning import calibration, estimate, phases
from netqual.results import summarize, write_json
from netqual.run import resume as resume_mod
from netqual.run.config import RunConfig
from netqual.run.pairprobe import now_iso
from netqual.run.runstate import FANIN_ENGINE
from netqual.run.session import RunSession
from netqual.table.paths import PathTable
from netqual.table.run import Results

# run.schedule.actual: the key of each step's seconds (the pair steps' are the tally's)
ACTUAL_KEYS = {
    Stage.PREFLIGHT: "preflight_s",
    Stage.INTERFERENCE: "interference_s",
    Stage.FANIN: "fanin_s",
    Stage.ENGINE: "engine_s",
    Stage.MULTIRAIL: "multirail_s",
}


def clock_info() -> dict[str, object]:
    info = time.get_clock_info("perf_counter")
    return {
        "function": "time.perf_counter_ns",
        "implementation": info.implementation,
        "resolution_s": info.resolution,
        "monotonic": info.monotonic,
    }


def host_info() -> dict[str, object]:
    return {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
    }


def fleet_of(
    cfg: RunConfig, preflight: PreflightReport | None, fresh: Mapping[str, ConfigSnapshot]
) -> FleetResult | None:
    """The configuration check over the snapshots the pre-flight collected; a retest's
    over the re-tested run's with ``fresh`` (its re-tested nodes', asked at its start) in
    their place; none for a demo (it asks for none)."""
    roles = {n.node_name: n.role.value for n in cfg.nodes}
    nics = node_nics(cfg.nodes)
    if cfg.retest_base is not None:
        ordered = [fresh[k] for k in dict.fromkeys(n.node_name for n in cfg.nodes) if k in fresh]
        return fleet.retest(cfg.retest_base.fleet, ordered, roles, nics)
    if preflight is None:
        return None
    snaps = [n.snapshot for n in preflight.nodes if n.snapshot is not None]
    if not snaps:  # agents that do not answer "snapshot" (a simulation): no claim at all
        return None
    return fleet.evaluate(snaps, roles, cfg.fleet_policy, nics)


def finalise(s: RunSession) -> Results:
    """results.json from what the run holds, finished or interrupted (``state.stopped``:
    the step the interrupt stopped); an interrupted run's pairs with ping-pong only are in
    it as measured so far (``journal.as_pending``)."""
    cfg, rec, stopped, found = s.config, s.journal, s.state.stopped, s.results
    inter = found.interference
    sched = phases.layout(cfg.schedule, s.budget, cfg.plan.bulk)
    sched["parallel"] = cfg.parallel  # pairs at once per round; None: all disjoint pairs
    if found.busy:  # --resume: these agents still ran someone's probes when measuring began
        sched["busy_at_start"] = dict(found.busy)
    if stopped is not None:
        sched["interference"] = f"skipped (run interrupted during {stopped.value})"
        sched["interrupted_during"] = stopped.value
        sched["pairs_pingpong_only"] = len(rec.pending)
    elif cfg.interference_minimum == 0:
        sched["interference"] = "skipped (--interference-sample 0)"
    else:
        checked = inter is not None and inter.sample > 0
        sched["interference"] = "checked" if checked else "no measured paths to sample"
    table = rec.measured(s.names)
    timing = _estimate_and_actual(s, table)
    sched |= timing
    meta = RunMeta(
        started_at=s.started,
        finished_at=now_iso(),
        transport=cfg.transport.value,
        mode=cfg.mode,
        policy=cfg.policy,
        plan=cfg.plan,
        clock=clock_info(),
        host=host_info(),
        inventory=cfg.inventory,
        kind=cfg.kind,
        schedule=sched,
        complete=stopped is None,
        pairs_planned=s.pairing.pair_count,
        agents=found.agents,
    )
    results = Results(
        run=meta,
        nodes=cfg.endpoints,
        paths=table,
        summary=summarize(table, cfg.policy.metric),
        interference=inter if stopped is None else None,
        tool_version=__version__,
        workload=cfg.workload,
    )
    results = dataclasses.replace(results, retest_of=cfg.retest_of)
    found_suspects, localised = localise.localisation(results, cfg.retest_base)
    results = dataclasses.replace(
        results,
        suspects=found_suspects,
        localisation=localised,
        not_measured=rec.not_measured(),
        fanin=found.fanin,
        fleet=fleet_of(cfg, s.state.preflight, found.snapshots),
        hosts=tuple(
            found.hosts[k]
            for k in dict.fromkeys(n.node_name for n in cfg.nodes)
            if k in found.hosts
        ),
        multirail=found.multirail,
    )
    results = decide(results)
    write_json(RunDir(s.out).results_json, results)
    s.state.finished = results
    # run.json: what the run expected of each phase and what it took (after results.json:
    # a directory that refuses writes is reported for the results first)
    actual = timing["actual"]
    resume_mod.record_phases(
        s.out,
        {
            name: {"estimate_s": est["seconds"], "actual_s": actual.get(f"{name}_s")}
            for name, est in timing["estimate"].items()
            if isinstance(est, dict) and "seconds" in est
        },
    )
    return results


def _estimate_and_actual(s: RunSession, table: PathTable) -> dict[str, Any]:
    """``run.schedule`` estimate (the dry run's, calibrated by ``--calibrate-from`` when
    given), actual and calibration (this run's phases priced at its own rates, what a later
    ``--calibrate-from`` divides its actual times by)."""
    cfg, pairing, spent, stopped = s.config, s.pairing, s.spent, s.state.stopped
    # the dry run's model, with this host's cores when every agent is on loopback
    transport = cfg.transport.value
    model = estimate.DurationModel(shared_cores=estimate.local_cores(pairing.nodes))
    estimated, *_ = estimate.estimate_phases(
        pairing, transport, cfg.plan, cfg.parallel, cfg.schedule, cfg.fabric,
        cfg.interference_fraction, cfg.interference_minimum, model,
    )  # fmt: skip
    if cfg.fanin is not None:
        fanin = estimate.fanin_phase(cfg.nodes, cfg.fanin, transport, cfg.fabric, model)
        estimated = (*estimated, fanin)
    after, steps = estimate.step_phases(
        pairing, cfg.nodes, transport, cfg.plan, cfg.fabric, model, cfg.engine, cfg.fanin,
        cfg.multirail,
    )  # fmt: skip
    estimated = estimate.in_run_order((*estimated, *after))

    def shape(sample: int) -> calibration.Shape:
        return estimate.shape_of(
            pairing, transport, cfg.plan, cfg.parallel, cfg.schedule, cfg.fabric, model, sample,
            steps,
        )  # fmt: skip

    shown = estimated
    if cfg.calibration is not None and cfg.calibration.runs:
        shown = estimate.calibrated_phases(
            estimated, shape(estimate.sample_of(estimated)), cfg.calibration
        )

    def seconds(stage: Stage) -> dict[str, float]:
        return {ACTUAL_KEYS[stage]: round(spent.of(stage), 3)}

    # the fan-in's levels through the engine are a phase of their own (fanin_engine_s)
    fanin_engine_s = spent.parts.get(FANIN_ENGINE, 0.0)
    fanin_actual = {
        "fanin_s": round(max(0.0, spent.of(Stage.FANIN) - fanin_engine_s), 3),
        **({"fanin_engine_s": round(fanin_engine_s, 3)} if cfg.engine is not None else {}),
    }
    actual = {
        **seconds(Stage.PREFLIGHT),
        **spent.tally.to_dict(),
        **seconds(Stage.INTERFERENCE),
        **(fanin_actual if cfg.fanin is not None else {}),
        **(seconds(Stage.ENGINE) if cfg.engine is not None else {}),
        **(seconds(Stage.MULTIRAIL) if cfg.multirail > 0 else {}),
    }
    out: dict[str, Any] = {
        "estimate": {
            **estimate.phases_to_dict(shown),
            "model": model.to_dict(transport),
            "calibrated_by": list(cfg.calibration.sources) if cfg.calibration else [],
        },
        "actual": actual,
    }
    if stopped is not None or s.resumed:
        out["calibration"] = "interrupted" if stopped is not None else "resumed"
    else:
        sample = s.results.interference.sample if s.results.interference is not None else 0
        rates = calibration.Rates.of(table, cfg.plan, s.results.multirail)
        out["calibration"] = estimate.work_record(estimated, shape(sample), rates)
    return out
