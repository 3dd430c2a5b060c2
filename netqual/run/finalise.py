"""results.json from what a run holds, finished, interrupted or stopped before it began."""

from __future__ import annotations

import dataclasses
import platform
import socket
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from netqual import __version__
from netqual.analysis import fleet, localise
from netqual.analysis.decision import decide
from netqual.files.outfiles import make_out_dir, open_append
from netqual.files.rundir import RunDir
from netqual.model.fleet import FleetResult
from netqual.model.preflight import PreflightReport
from netqual.model.progress import Stage
from netqual.model.run import Interference, RunMeta
from netqual.planning import calibration, estimate, phases, schedule
from netqual.planning.budget import BulkBudget
from netqual.results import journal, summarize, write_json
from netqual.run import resume as resume_mod
from netqual.run.config import RunConfig, pair_schedule, run_identity
from netqual.run.pairprobe import now_iso
from netqual.run.runstate import RunJournal, Spent
from netqual.table.paths import PathTable
from netqual.table.run import Results


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


def fleet_of(cfg: RunConfig, preflight: PreflightReport | None) -> FleetResult | None:
    """The configuration check over the snapshots the pre-flight collected (none without
    a pre-flight: retest and demo ask their agents here, not in a pre-flight)."""
    if preflight is None:
        return None
    snaps = [n.snapshot for n in preflight.nodes if n.snapshot is not None]
    if not snaps:  # agents that do not answer "snapshot" (a simulation): no claim at all
        return None
    roles = {n.name: n.role.value for n in cfg.nodes}
    return fleet.evaluate(snaps, roles, cfg.fleet_policy, {n.name: n.nics for n in cfg.nodes})


def finalise_interrupted(
    cfg: RunConfig, out_dir: Path, resume: resume_mod.Resume | None, stage: Stage
) -> Results:
    """A run stopped before the coordinator started (in the command's pre-flight check):
    results.json and the identity for what exists (a resumed run's pairs, or none)."""
    prior = resume.journal if resume else journal.Journal()
    started = (resume.started_at if resume else "") or now_iso()
    make_out_dir(out_dir)
    resume_mod.write_identity(out_dir, run_identity(cfg), started, cfg.kind)
    if not (out_dir / resume_mod.JSONL).exists():
        with open_append(out_dir / resume_mod.JSONL, new=True):
            pass
    budget = phases.resolve(cfg.schedule, cfg.plan, cfg.endpoints, cfg.fabric)
    spent = Spent(preflight_s=cfg.preflight_s)
    rec = RunJournal.of(prior, [n.name for n in cfg.endpoints])
    return finalise(cfg, out_dir, pair_schedule(cfg), started, budget, rec, None, stage, spent)


def finalise(
    cfg: RunConfig,
    out_dir: Path,
    pairing: schedule.Schedule,
    started: str,
    budget: BulkBudget,
    rec: RunJournal,
    inter: Interference | None,
    stopped: Stage | None,
    spent: Spent,
    fleet_found: FleetResult | None = None,
) -> Results:
    """results.json from what the run holds; an interrupted run's pairs with ping-pong only
    are in it as measured so far (``journal.as_pending``)."""
    sched = phases.layout(cfg.schedule, budget, cfg.plan.bulk)
    sched["parallel"] = cfg.parallel  # pairs at once per round; None: all disjoint pairs
    if spent.busy:  # --resume: these agents still ran someone's probes when measuring began
        sched["busy_at_start"] = dict(spent.busy)
    if stopped is not None:
        sched["interference"] = f"skipped (run interrupted during {stopped.value})"
        sched["interrupted_during"] = stopped.value
        sched["pairs_pingpong_only"] = len(rec.pending)
    elif cfg.interference_minimum == 0:
        sched["interference"] = "skipped (--interference-sample 0)"
    else:
        checked = inter is not None and inter.sample > 0
        sched["interference"] = "checked" if checked else "no measured paths to sample"
    table = rec.measured([n.name for n in cfg.endpoints])
    timing = _estimate_and_actual(cfg, pairing, spent, table, inter, stopped)
    sched |= timing
    meta = RunMeta(
        started_at=started,
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
        pairs_planned=pairing.pair_count,
        agents=spent.agents,
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
    found, localised = localise.localisation(results, cfg.retest_base)
    results = dataclasses.replace(
        results,
        suspects=found,
        localisation=localised,
        not_measured=rec.not_measured(),
        fanin=spent.fanin,
        fleet=fleet_found,
        hosts=tuple(
            spent.hosts[k]
            for k in dict.fromkeys(n.node_name for n in cfg.nodes)
            if k in spent.hosts
        ),
        multirail=spent.multirail,
    )
    results = decide(results)
    write_json(RunDir(out_dir).results_json, results)
    # run.json: what the run expected of each phase and what it took (after results.json:
    # a directory that refuses writes is reported for the results first)
    actual = timing["actual"]
    resume_mod.record_phases(
        out_dir,
        {
            name: {"estimate_s": est["seconds"], "actual_s": actual.get(f"{name}_s")}
            for name, est in timing["estimate"].items()
            if isinstance(est, dict) and "seconds" in est
        },
    )
    return results


def _estimate_and_actual(
    cfg: RunConfig,
    pairing: schedule.Schedule,
    spent: Spent,
    table: PathTable,
    inter: Interference | None,
    stopped: Stage | None,
) -> dict[str, Any]:
    """``run.schedule`` estimate (the dry run's, calibrated by ``--calibrate-from`` when
    given), actual and calibration (this run's phases priced at its own rates, what a later
    ``--calibrate-from`` divides its actual times by)."""
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

    def shape(sample: int) -> calibration.Shape:
        return estimate.shape_of(
            pairing, transport, cfg.plan, cfg.parallel, cfg.schedule, cfg.fabric, model, sample
        )

    shown = estimated
    if cfg.calibration is not None and cfg.calibration.runs:
        shown = estimate.calibrated_phases(
            estimated, shape(estimate.sample_of(estimated)), cfg.calibration
        )
    actual = {
        "preflight_s": round(spent.preflight_s, 3),
        **spent.tally.to_dict(),
        "interference_s": round(spent.interference_s, 3),
        **({"fanin_s": round(spent.fanin_s, 3)} if cfg.fanin is not None else {}),
        **({"engine_s": round(spent.engine_s, 3)} if cfg.engine is not None else {}),
        **({"multirail_s": round(spent.multirail_s, 3)} if cfg.multirail > 0 else {}),
    }
    out: dict[str, Any] = {
        "estimate": {
            **estimate.phases_to_dict(shown),
            "model": model.to_dict(transport),
            "calibrated_by": list(cfg.calibration.sources) if cfg.calibration else [],
        },
        "actual": actual,
    }
    if stopped is not None or spent.resumed:
        out["calibration"] = "interrupted" if stopped is not None else "resumed"
    else:
        sample = inter.sample if inter is not None else 0
        rates = calibration.Rates.of(table, cfg.plan)
        out["calibration"] = {"work_s": estimate.work_record(estimated, shape(sample), rates)}
    return out
