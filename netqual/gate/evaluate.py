"""Judge a results file against a profile: the gate's one entry point for the CLI."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shlex
from pathlib import Path

import numpy as np

from netqual.analysis.comparable import Difference, note
from netqual.analysis.decision import decide, undecided
from netqual.analysis.narrative import incomplete_note, is_demo, preliminary_note, waiver_problems
from netqual.analysis.plausible import rejudge
from netqual.base.errors import UsageError
from netqual.gate.complete import Complete
from netqual.gate.model import GateContext, GateReport, Outcome, Scope, Status, WaiverState
from netqual.gate.profile import Profile
from netqual.gate.registry import judges_paths
from netqual.gate.rules import MinWorkloadVerdict, Rule
from netqual.model.verdict import Verdict
from netqual.table.paths import IntArray
from netqual.table.run import Results


def evaluate(
    results: Results,
    profile: Profile,
    *,
    today: dt.date,
    baseline: Results | None = None,
    results_source: str = "results",
    baseline_source: str | None = None,
    allow_incomplete: bool = False,
    incomparable: tuple[Difference, ...] = (),
) -> GateReport:
    """``allow_incomplete``: the ``complete`` rule reports unmeasured pairs without failing.
    ``incomparable``: what the baseline does not share with the run, compared anyway
    (``netqual.analysis.comparable``: the command refused it otherwise); a note says so."""
    if profile.baseline_required and baseline is None:
        raise UsageError("--baseline", f"profile {profile.name!r} requires a baseline results file")
    active = tuple(w for w in profile.waivers if not w.expired(today))
    nodes = {n.name: n for n in results.nodes}
    if baseline is not None:
        nodes = {n.name: n for n in baseline.nodes} | nodes
    # A stored verdict is a claim; the gate judges the values (an edited "offload-safe" with
    # a 1 s p99 fails), keeping the worse of the two, then decides the run again from all
    # its evidence (netqual.analysis.decision).
    results = decide(
        dataclasses.replace(results, paths=rejudge(undecided(results.paths), results.run.policy))
    )
    paths = results.paths
    ctx = GateContext(
        nodes=nodes,
        metric=profile.metric,
        waivers=active,
        baseline=baseline.paths if baseline is not None else None,
        interference=results.interference,
        pairs_planned=results.run.pairs_planned,
        unmeasured=results.unmeasured,
        interrupted=not results.run.complete,
        pingpong_only=results.pingpong_only,
        not_measured=results.not_measured,
        resume_command=resume_command(results, results_source),
        fleet=results.fleet,
        hosts=results.hosts,
        fanin=results.fanin,
        decision=results.decision,
    )
    scoped: dict[Scope, IntArray] = {}  # a profile has a few scopes and many rules
    outcomes: list[Outcome] = []
    rules = [
        dataclasses.replace(r, relaxed_by="--allow-incomplete")
        if allow_incomplete and isinstance(r, Complete) and r.relaxed_by is None
        else r
        for r in profile.rules
    ]
    rules += implied_rules(results, rules)
    for rule in rules:
        if rule.scope not in scoped:
            scoped[rule.scope] = np.flatnonzero(rule.scope.mask(paths, nodes))
        rows = scoped[rule.scope]
        if not len(rows) and judges_paths(rule):
            # nothing in scope to judge: said, never a silent pass
            why = "no path in scope" if len(paths) else "no path was measured"
            outcomes.append(Outcome(rule.name, Status.SKIP, f"{why}: nothing to judge"))
            continue
        outcomes.append(rule.check(paths, rows, ctx))
    # Which rules each waiver excused a path in: one pass over the waived findings, then
    # a lookup per waiver (a million waivers stay linear).
    used: dict[frozenset[str], list[str]] = {}
    for o in outcomes:
        for key in dict.fromkeys(frozenset((f.src, f.dst)) for f in o.waived):
            used.setdefault(key, []).append(o.rule)
    states = tuple(
        WaiverState(
            waiver=w,
            expired=w.expired(today),
            used_by=tuple(used.get(frozenset((w.src, w.dst)), ())),
        )
        for w in profile.waivers
    )
    return GateReport(
        profile=profile.name,
        source=profile.source,
        results_source=results_source,
        baseline_source=baseline_source,
        today=today,
        outcomes=tuple(outcomes),
        waivers=states,
        n_paths=len(results.paths),
        notes=(*_notes(results, profile), *([note(incomparable)] if incomparable else [])),
    )


IMPLIED_WORKLOAD = "workload (--workload)"


def implied_rules(results: Results, rules: list[Rule]) -> list[Rule]:
    """A workload always applies (``gate --workload``, a milestone's ``workload``, a run
    judged by one): a profile without ``min_workload_verdict`` gets it at ``marginal``
    (every path's fetch pays at least 1x), named for where it came from."""
    if results.workload is None or any(isinstance(r, MinWorkloadVerdict) for r in rules):
        return []
    return [MinWorkloadVerdict(Scope(name=IMPLIED_WORKLOAD), Verdict.MARGINAL, implied=True)]


def resume_command(results: Results, source: str) -> str:
    """The command that finishes this run: its inventory, its directory, --resume."""
    path = Path(source)
    run_dir = path.parent if path.suffix in (".json", ".jsonl") else path
    out = f"--out {shlex.quote(str(run_dir))} --resume"
    if is_demo(results):  # its agents are new each time: it starts again
        return f"netqual demo --out {shlex.quote(str(run_dir))}"
    if results.retest_of:  # a re-test resumes as a re-test of the same run
        return f"netqual retest {shlex.quote(results.retest_of)} {out}"
    inventory = results.run.inventory or "INVENTORY"
    return f"netqual run {shlex.quote(inventory)} {out}"


def _notes(results: Results, profile: Profile) -> tuple[str, ...]:
    """Warnings every output of the gate carries (terminal, JSON, JUnit)."""
    notes: list[str] = []
    for w, problem in zip(profile.waivers, waiver_problems(results, profile.waivers), strict=True):
        if problem:
            notes.append(f"waiver {w.label} {problem}: it excuses nothing")
    if results.incomplete:
        notes.append(f"{incomplete_note(results)}: unmeasured pairs are not judged")
    if results.preliminary:
        notes.append(f"{preliminary_note(results)}: no verdict of this run is final")
    return tuple(notes)
