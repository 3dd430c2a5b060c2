"""The results file -> records: ``load`` (results.json, validated against the schema) and
``load_jsonl_paths`` (results.jsonl). Every problem names the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from netqual.errors import ResultsFileError
from netqual.interference import from_dict as interference_from_dict
from netqual.localise import suspect_from_dict
from netqual.models import (
    BulkStats,
    Metric,
    Mode,
    Node,
    PathResult,
    Policy,
    Results,
    Role,
    RttStats,
    RunMeta,
    Tier,
    Verdict,
    WorkloadResult,
)
from netqual.plan_codec import plan_from_dict
from netqual.results.encode import SCHEMA_VERSION
from netqual.results.summary import summarize
from netqual.schema import validate
from netqual.workload.model import Workload


class _Reader:
    """Pulls typed fields out of parsed JSON, naming the field on any mistake."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> ResultsFileError:
        return ResultsFileError(self.source, problem, field=where)

    # Exact-type fast paths first: a 512-node file has ~7 million fields, and an
    # isinstance() against the Mapping ABC costs several times a type() comparison.
    def get(self, obj: Mapping[str, Any], key: str, where: str) -> Any:
        if type(obj) is dict and key in obj:
            return obj[key]
        if not isinstance(obj, Mapping):
            raise self.fail(where, "expected an object")
        if key not in obj:
            raise self.fail(f"{where}.{key}" if where else key, "missing required key")
        return obj[key]

    def num(self, obj: Mapping[str, Any], key: str, where: str) -> float:
        v = self.get(obj, key, where)
        if type(v) is float or type(v) is int:
            return float(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(f"{where}.{key}", f"expected a number, got {v!r}")
        return float(v)

    def opt_num(self, obj: Mapping[str, Any], key: str, where: str) -> float | None:
        return None if obj.get(key) is None else self.num(obj, key, where)

    def string(self, obj: Mapping[str, Any], key: str, where: str) -> str:
        v = self.get(obj, key, where)
        if not isinstance(v, str):
            raise self.fail(f"{where}.{key}", f"expected a string, got {v!r}")
        return v


def _histogram_edges(hist: Mapping[str, Any], rd: _Reader, where: str) -> tuple[float, ...]:
    counts = hist.get("counts") or []
    if not counts:
        return ()
    per_decade = rd.num(hist, "bins_per_decade", where)
    first = rd.num(hist, "first_bin", where)
    if per_decade <= 0:
        raise rd.fail(f"{where}.bins_per_decade", "must be positive")
    return tuple(10 ** ((first + k) / per_decade) for k in range(len(counts) + 1))


def rtt_from_dict(d: Mapping[str, Any], rd: _Reader, where: str) -> RttStats:
    ci = d.get("ci95") or {}
    hist = d.get("histogram") or {}
    return RttStats(
        samples=int(rd.num(d, "samples", where)),
        min_us=rd.num(d, "min", where),
        p50_us=rd.num(d, "p50", where),
        p90_us=rd.num(d, "p90", where),
        p99_us=rd.num(d, "p99", where),
        p999_us=rd.num(d, "p999", where),
        max_us=rd.num(d, "max", where),
        mean_us=rd.num(d, "mean", where),
        stdev_us=rd.num(d, "stdev", where),
        untrusted=tuple(str(x) for x in d.get("untrusted", ())),
        ci95_metric=ci.get("metric"),
        ci95_low_us=ci.get("low"),
        ci95_high_us=ci.get("high"),
        histogram_edges_us=_histogram_edges(hist, rd, f"{where}.histogram"),
        histogram_counts=tuple(int(x) for x in hist.get("counts", ())),
    )


def path_from_dict(d: Mapping[str, Any], rd: _Reader, where: str) -> PathResult:
    verdict_text = rd.string(d, "verdict", where)
    try:
        verdict = Verdict(verdict_text)
    except ValueError as err:
        raise rd.fail(f"{where}.verdict", f"unknown verdict {verdict_text!r}") from err
    rtt_raw = rd.get(d, "rtt_us", where)
    bulk = []
    for i, b in enumerate(rd.get(d, "bulk", where) or []):
        bw = f"{where}.bulk[{i}]"
        comp = rd.get(b, "completion_us", bw)
        bulk.append(
            BulkStats(
                chunk_bytes=int(rd.num(b, "chunk_bytes", bw)),
                depth=int(rd.num(b, "depth", bw)),
                reads=int(rd.num(b, "reads", bw)),
                goodput_gbps=rd.num(b, "goodput_gbps", bw),
                completion_p50_us=rd.num(comp, "p50", f"{bw}.completion_us"),
                completion_p99_us=rd.num(comp, "p99", f"{bw}.completion_us"),
                completion_max_us=rd.opt_num(comp, "max", f"{bw}.completion_us")
                or rd.num(comp, "p99", f"{bw}.completion_us"),
                error=b.get("error"),
            )
        )
    hops = rd.get(d, "hops", where)
    if hops is not None and (isinstance(hops, bool) or not isinstance(hops, int)):
        raise rd.fail(f"{where}.hops", f"expected an integer or null, got {hops!r}")
    reasons = rd.get(d, "reasons", where)
    if not isinstance(reasons, list):
        raise rd.fail(f"{where}.reasons", "expected a list of strings")
    try:
        tier = Tier(d.get("tier") or "unknown")
    except ValueError as err:
        raise rd.fail(f"{where}.tier", f"unknown tier {d.get('tier')!r}") from err
    return PathResult(
        src=rd.string(d, "src", where),
        dst=rd.string(d, "dst", where),
        transport=rd.string(d, "transport", where),
        verdict=verdict,
        reasons=tuple(str(r) for r in reasons),
        rtt=rtt_from_dict(rtt_raw, rd, f"{where}.rtt_us") if rtt_raw is not None else None,
        bulk=tuple(bulk),
        hops=hops,
        tier=tier,
        error=rd.get(d, "error", where),
        started_at=d.get("started_at"),
        duration_s=d.get("duration_s"),
        details=dict(d.get("details") or {}),
        workload=_workload_result(d.get("workload"), rd, f"{where}.workload"),
    )


def _workload_result(d: Any, rd: _Reader, where: str) -> WorkloadResult | None:
    if d is None:
        return None
    fetch = rd.get(d, "fetch_us", where)
    try:
        verdict = Verdict(rd.string(d, "verdict", where))
    except ValueError as err:
        raise rd.fail(f"{where}.verdict", str(err)) from err
    return WorkloadResult(
        verdict=verdict,
        reasons=tuple(str(r) for r in rd.get(d, "reasons", where)),
        budget_us=rd.num(d, "budget_us", where),
        fetch_p50_us=rd.opt_num(fetch, "p50", f"{where}.fetch_us"),
        fetch_p99_us=rd.opt_num(fetch, "p99", f"{where}.fetch_us"),
        speedup=rd.opt_num(d, "speedup", where),
        break_even_rtt_us=rd.opt_num(d, "break_even_rtt_us", where),
        interpolated=bool(rd.get(d, "interpolated", where)),
    )


def results_from_dict(d: Mapping[str, Any], source: str) -> Results:
    rd = _Reader(source)
    version = rd.get(d, "schema_version", "")
    if version != SCHEMA_VERSION:
        raise rd.fail(
            "schema_version", f"unsupported version {version!r} (expected {SCHEMA_VERSION!r})"
        )
    run = rd.get(d, "run", "")
    pol = rd.get(run, "policy", "run")
    try:
        policy = Policy(
            metric=Metric(pol.get("metric", "p99")),
            safe_max_us=float(pol.get("safe_max_us", 200.0)),
            unsafe_above_us=float(pol.get("unsafe_above_us", 500.0)),
            min_samples=int(pol.get("min_samples", 10_000)),
        )
        mode = Mode(rd.string(run, "mode", "run"))
    except (ValueError, TypeError) as err:
        raise rd.fail("run", str(err)) from err
    try:
        plan = plan_from_dict(run.get("plan") or {})
    except (TypeError, ValueError) as err:
        raise rd.fail("run.plan", str(err)) from err
    meta = RunMeta(
        started_at=rd.string(run, "started_at", "run"),
        finished_at=rd.string(run, "finished_at", "run"),
        transport=rd.string(run, "transport", "run"),
        mode=mode,
        policy=policy,
        plan=plan,
        clock=dict(run.get("clock") or {}),
        host=dict(run.get("host") or {}),
        inventory=run.get("inventory"),
        schedule=dict(run.get("schedule") or {}),
        complete=run.get("complete", True) is not False,
        pairs_planned=run.get("pairs_planned")
        if isinstance(run.get("pairs_planned"), int)
        else None,
    )
    nodes = []
    for i, n in enumerate(rd.get(d, "nodes", "")):
        w = f"nodes[{i}]"
        try:
            role = Role(n.get("role") or "any")
        except ValueError as err:
            raise rd.fail(f"{w}.role", f"unknown role {n.get('role')!r}") from err
        nodes.append(
            Node(
                name=rd.string(n, "name", w),
                address=rd.string(n, "address", w),
                port=int(n.get("port") or 18515),
                role=role,
                rack=rd.get(n, "rack", w),
                labels=dict(rd.get(n, "labels", w) or {}),
            )
        )
    paths = tuple(
        path_from_dict(p, rd, f"paths[{i}]") for i, p in enumerate(rd.get(d, "paths", ""))
    )
    rd.get(d, "summary", "")
    tool = rd.get(d, "tool", "")
    workload = None
    if d.get("workload") is not None:
        try:
            workload = Workload.from_json(d["workload"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise rd.fail("workload", f"malformed workload: {err!r}") from err
    suspects = []
    for i, entry in enumerate(d.get("suspects") or ()):
        try:
            suspects.append(suspect_from_dict(entry))
        except (KeyError, TypeError, ValueError) as err:
            raise rd.fail(f"suspects[{i}]", f"not a suspect: {err}") from err
    retest_of = d.get("retest_of")
    if retest_of is not None and not isinstance(retest_of, str):
        raise rd.fail("retest_of", f"expected a string, got {retest_of!r}")
    return Results(
        run=meta,
        nodes=tuple(nodes),
        paths=paths,
        summary=summarize(paths, policy.metric),
        interference=(
            interference_from_dict(d["interference"], source)
            if d.get("interference") is not None
            else None
        ),
        tool_name=str(tool.get("name", "netqual")),
        tool_version=str(tool.get("version", "0")),
        schema_version=version,
        workload=workload,
        suspects=tuple(suspects),
        retest_of=retest_of,
    )


def load(path: Path) -> Results:
    """Read and validate a results.json. Every problem is a ResultsFileError naming the field."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ResultsFileError(source, f"cannot read: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise ResultsFileError(source, "not UTF-8 text") from err
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        stripped = text.rstrip()
        truncated = err.pos >= len(stripped) - 1 or not stripped.endswith("}")
        hint = " (truncated? the file ends before the JSON does)" if truncated else ""
        raise ResultsFileError(
            source, f"not valid JSON at line {err.lineno} column {err.colno}: {err.msg}{hint}"
        ) from err
    if not isinstance(data, dict):
        raise ResultsFileError(source, "expected a JSON object at the top level")
    validate(data, source)
    return results_from_dict(data, source)


def load_jsonl_paths(path: Path) -> list[PathResult]:
    """Read results.jsonl; a torn last line (crash mid-write) is skipped, nothing else is."""
    rd = _Reader(str(path))
    out: list[PathResult] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            if i == len(lines) - 1:
                break
            raise rd.fail(f"line {i + 1}", f"not valid JSON: {err.msg}") from err
        out.append(path_from_dict(obj, rd, f"line {i + 1}"))
    return out
