"""Records -> the results file (docs/results.md, schema_version "1").

``results.json`` holds the whole run; ``results.jsonl`` (``journal``) the run's records as
they happen. Both use the path mapping below.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TextIO

from netqual.analysis.fleet import to_dict as fleet_to_dict
from netqual.analysis.interference import to_dict as interference_to_dict
from netqual.analysis.stats import BINS_PER_DECADE, bin_index
from netqual.codec.hostpath import hosts_to_dict
from netqual.codec.plan import plan_to_dict
from netqual.files.outfiles import write_atomic
from netqual.model.decision import Decision, Evidence, SubjectKind
from netqual.model.node import Nic, Node, node_nics
from netqual.model.path import PathResult, WorkloadResult
from netqual.model.policy import Policy
from netqual.model.stats import BulkStats, Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.results.engine_codec import cell_to_dict
from netqual.results.fanin_codec import to_list as fanin_to_list
from netqual.results.multirail_codec import to_list as multirail_to_list
from netqual.results.suspects_codec import localisation_to_dict, suspect_to_dict
from netqual.table.run import Results


def _t(value_us: float) -> float:
    """Microseconds to the nanosecond: the clock's resolution, so nothing measured is lost."""
    return round(value_us, 3)


def rtt_to_dict(r: RttStats) -> dict[str, Any]:
    d: dict[str, Any] = {
        "samples": r.samples,
        "min": _t(r.min_us),
        "p50": _t(r.p50_us),
        "p90": _t(r.p90_us),
        "p99": _t(r.p99_us),
        "p999": _t(r.p999_us),
        "max": _t(r.max_us),
        "mean": _t(r.mean_us),
        "stdev": _t(r.stdev_us),
        "untrusted": list(r.untrusted),
        "unstable": r.unstable,
    }
    intervals = {m.value: r.ci95.of(m) for m in Metric}
    if any(intervals.values()):
        # every percentile's interval; files of older versions had "ci95" {metric, low,
        # high} for the policy metric alone (still read, netqual.results.wirepath)
        d["ci95_by_metric"] = {
            name: [_t(ci[0]), _t(ci[1])] for name, ci in intervals.items() if ci is not None
        }
    if r.histogram_counts:
        d["histogram"] = {
            "bins_per_decade": BINS_PER_DECADE,
            "first_bin": bin_index(r.histogram_edges_us[0] * 1.0001),
            "counts": list(r.histogram_counts),
        }
    return d


def bulk_to_dict(b: BulkStats) -> dict[str, Any]:
    return {
        "chunk_bytes": b.chunk_bytes,
        "depth": b.depth,
        "reads": b.reads,
        "goodput_gbps": round(b.goodput_gbps, 6),
        "completion_us": {
            "p50": _t(b.completion_p50_us),
            "p99": _t(b.completion_p99_us),
            "max": _t(b.completion_max_us),
        },
        "error": b.error,
    }


def path_to_dict(p: PathResult) -> dict[str, Any]:
    return {
        "src": p.src,
        "dst": p.dst,
        "transport": p.transport,
        "hops": p.hops,
        "tier": p.tier.value,
        "rtt_us": rtt_to_dict(p.rtt) if p.rtt else None,
        "bulk": [bulk_to_dict(b) for b in p.bulk],
        "verdict": p.verdict.value,
        "reasons": list(p.reasons),
        "error": p.error,
        "started_at": p.started_at,
        "duration_s": p.duration_s,
        "details": dict(p.details),
        "src_nic": p.src_nic,
        "dst_nic": p.dst_nic,
        "rail": p.rail,
        **({"workload": workload_result_to_dict(p.workload)} if p.workload else {}),
        **(
            {
                "rtt_verdict": p.rtt_verdict.value,
                "evidence": [evidence_to_dict(e) for e in p.evidence],
            }
            if p.rtt_verdict is not None
            else {}
        ),
        **({"engine": [cell_to_dict(c) for c in p.engine]} if p.engine else {}),
    }


def evidence_to_dict(e: Evidence) -> dict[str, Any]:
    """One piece of evidence; ``subject_kind`` only where the subject is not the path."""
    return {
        "kind": e.kind.value,
        "class": None if e.verdict is None else e.verdict.value,
        "subject": e.subject.name,
        **({} if e.subject.kind is SubjectKind.PATH else {"subject_kind": e.subject.kind.value}),
        "detail": e.detail,
    }


def workload_result_to_dict(w: WorkloadResult) -> dict[str, Any]:
    def t(value_us: float | None) -> float | None:
        return None if value_us is None or not math.isfinite(value_us) else _t(value_us)

    return {
        "fetch_us": {"p50": t(w.fetch_p50_us), "p99": t(w.fetch_p99_us)},
        "budget_us": _t(w.budget_us),
        "speedup": None if w.speedup is None or not math.isfinite(w.speedup) else w.speedup,
        "verdict": w.verdict.value,
        "reasons": list(w.reasons),
        "interpolated": w.interpolated,
        "break_even_rtt_us": t(w.break_even_rtt_us),
    }


def node_to_dict(n: Node) -> dict[str, Any]:
    return {
        "name": n.name,
        "address": n.address,
        "port": n.port,
        "role": n.role.value,
        "rack": n.rack,
        "labels": dict(n.labels),
        **({"nics": [nic_to_dict(x) for x in n.nics]} if n.nics else {}),
        **({"agent": n.agent, "agent_address": n.agent_address} if n.agent is not None else {}),
        **({"nic": nic_to_dict(n.nic)} if n.nic is not None else {}),
    }


def nic_to_dict(nic: Nic) -> dict[str, Any]:
    return {"name": nic.name, "address": nic.address, "rail": nic.rail, "device": nic.device}


def policy_to_dict(p: Policy) -> dict[str, Any]:
    return {
        "metric": p.metric.value,
        "safe_max_us": p.safe_max_us,
        "unsafe_above_us": p.unsafe_above_us,
        "min_samples": p.min_samples,
        # written when not the default, so files and run identities of runs without a
        # fan-in sweep stay as they were
        **({"fanin_knee_factor": p.fanin_knee_factor} if p.fanin_knee_factor != 2.0 else {}),
        **({"max_loss_pct": p.max_loss_pct} if p.max_loss_pct != Policy().max_loss_pct else {}),
        **(
            {"max_engine_vs_probe": p.max_engine_vs_probe}
            if p.max_engine_vs_probe != Policy.max_engine_vs_probe
            else {}
        ),
    }


def _worst_entry(p: PathResult, metric: Metric) -> dict[str, Any]:
    return {
        "src": p.src,
        "dst": p.dst,
        "verdict": p.verdict.value,
        "metric": metric.value,
        "value_us": _t(p.rtt.value(metric)) if p.rtt else None,
        "reasons": list(p.reasons),
    }


_PATHS_MARK = "\x00paths\x00"  # stands for the paths while write_json streams them


def results_to_dict(r: Results, *, paths: bool = True) -> dict[str, Any]:
    """The whole document; ``paths=False`` puts a marker where the paths go."""
    metric = r.run.policy.metric
    worst = [i for i in r.paths.rows_of(r.summary.worst) if i is not None]
    doc: dict[str, Any] = {
        "schema_version": r.schema_version,
        "tool": {"name": r.tool_name, "version": r.tool_version},
        "run": {
            "started_at": r.run.started_at,
            "finished_at": r.run.finished_at,
            "transport": r.run.transport,
            "mode": r.run.mode.value,
            "policy": policy_to_dict(r.run.policy),
            **({"plan": plan_to_dict(r.run.plan)} if r.run.plan_recorded else {}),
            "clock": dict(r.run.clock),
            "host": dict(r.run.host),
            "inventory": r.run.inventory,
            "kind": r.run.kind.value,
            # Derived (plan.iterations < policy.min_samples); written for readers of the file.
            "preliminary": r.preliminary,
            **({} if r.run.complete else {"complete": False}),
            **({} if r.run.pairs_planned is None else {"pairs_planned": r.run.pairs_planned}),
            **({"agents": {k: dict(v) for k, v in r.run.agents.items()}} if r.run.agents else {}),
        },
        "nodes": [node_to_dict(n) for n in r.nodes],
        "paths": [path_to_dict(p) for p in r.paths] if paths else _PATHS_MARK,
        "summary": {
            "counts": {v.value: r.summary.counts.get(v, 0) for v in Verdict},
            "total": len(r.paths),
            "worst": [_worst_entry(r.paths.row(i), metric) for i in worst],
        },
        **({"workload": r.workload.to_json()} if r.workload else {}),
    }
    if r.suspects:
        doc["suspects"] = [suspect_to_dict(s) for s in r.suspects]
    if r.localisation is not None:
        doc["localisation"] = localisation_to_dict(r.localisation)
    if r.retest_of is not None:
        doc["retest_of"] = r.retest_of
    if r.not_measured:
        doc["not_measured"] = [
            {"src": m.src, "dst": m.dst, "kind": m.kind, "reason": m.reason} for m in r.not_measured
        ]
    # Optional keys: written when they apply, so older files stay as they were.
    if r.run.schedule:
        doc["run"]["schedule"] = dict(r.run.schedule)
    if r.interference is not None:
        doc["interference"] = interference_to_dict(r.interference)
    if r.fanin:
        doc["fanin"] = fanin_to_list(r.fanin)
    if r.fleet is not None:
        doc["fleet"] = fleet_to_dict(r.fleet)
    if r.hosts:
        # a run with rails lists endpoints: each node's NICs are its endpoints' NICs
        doc["hosts"] = hosts_to_dict(r.hosts, node_nics(r.nodes))
    if r.multirail:
        doc["multirail"] = multirail_to_list(r.multirail)
    if r.decision is not None:
        doc["decision"] = decision_to_dict(r.decision)
    return doc


def decision_to_dict(d: Decision) -> dict[str, Any]:
    """The run's answer (docs/results.md "decision"); blocking is ranked, worst first."""
    return {
        "answer": d.answer.value,
        "governs": d.governs,
        "blocking": [
            {
                "subject": b.subject.name,
                "subject_kind": b.subject.kind.value,
                "kind": b.kind.value,
                "class": None if b.verdict is None else b.verdict.value,
                "detail": b.detail,
                "action": b.action,
                "paths": b.paths,
            }
            for b in d.blocking
        ],
        "counts": {v.value: d.counts.get(v, 0) for v in Verdict},
        "evidence": [evidence_to_dict(e) for e in d.evidence],
        "cautions": list(d.cautions),
        "conditions": list(d.conditions),
    }


_COMPACT: dict[str, Any] = {"separators": (",", ":")}


def _split_at_paths(text: str, indent: int | None) -> tuple[str, str]:
    """The document's text before and after the paths marker, with the list's brackets (as
    json.dumps writes them at the paths' depth, two levels in)."""
    head, tail = text.split(json.dumps(_PATHS_MARK), 1)
    if indent is None:
        return head + "[", "]" + tail
    return head + "[\n" + " " * 2 * indent, "\n" + " " * indent + "]" + tail


def dump_json(f: TextIO, results: Results, indent: int | None = None) -> None:
    """The results document, written to ``f`` as ``json.dumps(results_to_dict(results),
    indent=indent)`` writes it (compact when None), with the paths streamed one by one:
    a 1,024-node full mesh has 523,776 of them, whose dicts together would take gigabytes.
    The one writer of results.json and of every ``--json`` that prints a run."""
    style: dict[str, Any] = _COMPACT if indent is None else {"indent": indent}
    head, tail = json.dumps(results_to_dict(results, paths=False), **style), ""
    if not len(results.paths):
        f.write(head.replace(json.dumps(_PATHS_MARK), "[]", 1))
        return
    head, tail = _split_at_paths(head, indent)
    f.write(head)
    between = "," if indent is None else ",\n" + " " * 2 * indent
    for i, p in enumerate(results.paths):
        f.write(between if i else "")
        text = json.dumps(path_to_dict(p), **style)
        f.write(text if indent is None else text.replace("\n", "\n" + " " * 2 * indent))
    f.write(tail)


def write_json(path: Path, results: Results) -> None:
    """Write atomically: a reader never sees half a results.json."""

    def write(f: TextIO) -> None:
        dump_json(f, results)
        f.write("\n")

    write_atomic(path, write, sync=True)
