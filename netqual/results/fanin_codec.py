"""Results key ``fanin`` (docs/results.md, docs/fanin.md): records <-> JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

from netqual.analysis import fanin_engine
from netqual.analysis.fanin import judge_all
from netqual.base.errors import ResultsFileError
from netqual.model.engine import EngineName
from netqual.model.fanin import (
    Call,
    ChunkStats,
    EngineFanin,
    EngineFaninLevel,
    FaninLevel,
    FaninResult,
    RankSpan,
)


def to_list(results: tuple[FaninResult, ...]) -> list[dict[str, Any]]:
    return [
        {
            "storage": r.storage,
            "profile": r.profile,
            "chunk_bytes": r.chunk_bytes,
            "knee_factor": r.knee_factor,
            "levels": [level_to_dict(lv) for lv in r.levels],
            "knee": r.knee,
            "safe_up_to": r.safe_up_to,
            "undecided": list(r.undecided),
            "uplinks_cleared_by": r.uplinks_cleared_by,
            "uplinks_implicated_by": list(r.uplinks_implicated_by),
            "verdict": r.verdict,
            **({} if r.engine is None else {"engine": engine_to_dict(r.engine)}),
        }
        for r in results
    ]


def level_to_dict(lv: FaninLevel) -> dict[str, Any]:
    c = lv.chunk
    out: dict[str, Any] = {
        "readers": lv.readers,
        "chunk_us": None
        if c is None
        else {
            "p50": c.p50_us,
            "p99": c.p99_us,
            "p999": c.p999_us,
            "samples": c.samples,
            "untrusted": list(c.untrusted),
            **({} if c.p99_ci_us is None else {"p99_ci": list(c.p99_ci_us)}),
        },
        "goodput_gbps_per_reader": lv.goodput_gbps_per_reader,
        "aggregate_gbps": lv.aggregate_gbps,
        "nodes": list(lv.nodes),
        "shared_uplinks": list(lv.shared_uplinks),
        "errors": list(lv.errors),
        "busy_s": lv.busy_s,
        "level_gbps": lv.level_gbps,
        "all_reading_s": lv.all_reading_s,
        "readers_busy": lv.readers_busy,
        "ranks": [
            {"node": r.node, "start_s": r.start_s, "end_s": r.end_s, "bytes": r.fetched_bytes}
            for r in lv.ranks
        ],
        "call": None if lv.call is None else lv.call.value,
        "rounds": lv.rounds,
    }
    if lv.skipped is not None:
        out["skipped"] = lv.skipped
    if lv.storage_tcp_retrans is not None:
        out["storage_tcp_retrans"] = lv.storage_tcp_retrans
    if lv.storage_counters is not None:
        out["storage_counters"] = dict(lv.storage_counters)
    return out


def from_list(data: Any, source: str) -> tuple[FaninResult, ...]:
    """Inverse of to_list, judged again by the current rule (``analysis.fanin.judge_all``:
    a file written before the p99's confidence interval was kept is judged on trusted p99s
    only); anything malformed is a ResultsFileError naming the entry."""
    if not isinstance(data, list):
        raise ResultsFileError(source, "expected a list", field="fanin")
    out = []
    for i, d in enumerate(data):
        try:
            levels = tuple(fanin_level(lv) for lv in d["levels"])
            knee, safe = d.get("knee"), d.get("safe_up_to")
            out.append(
                FaninResult(
                    storage=str(d["storage"]),
                    profile=str(d.get("profile", "plain")),
                    chunk_bytes=int(d["chunk_bytes"]),
                    knee_factor=float(d["knee_factor"]),
                    levels=levels,
                    knee=None if knee is None else int(knee),
                    safe_up_to=None if safe is None else int(safe),
                    verdict=str(d["verdict"]),
                    engine=_engine(d.get("engine")),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ResultsFileError(source, f"malformed: {err!r}", field=f"fanin[{i}]") from err
    return tuple(_judged_engine(r) for r in judge_all(out))


def _judged_engine(r: FaninResult) -> FaninResult:
    """The engine's levels judged again by the current rule, beside the probe's."""
    if r.engine is None:
        return r
    e = r.engine
    return dataclasses.replace(r, engine=fanin_engine.judge(e.engine, e.version, r, e.levels))


def _opt(d: Any, key: str) -> float | None:
    v = d.get(key)
    return None if v is None else float(v)


def fanin_level(d: Any) -> FaninLevel:
    """One level from its JSON; KeyError/TypeError/ValueError when malformed."""
    c = d.get("chunk_us")
    chunk = (
        None
        if c is None
        else ChunkStats(
            int(c["samples"]),
            float(c["p50"]),
            float(c["p99"]),
            float(c["p999"]),
            tuple(str(u) for u in c.get("untrusted", ())),
            _ci(c.get("p99_ci")),
        )
    )
    return FaninLevel(
        readers=int(d["readers"]),
        chunk=chunk,
        goodput_gbps_per_reader=_opt(d, "goodput_gbps_per_reader"),
        aggregate_gbps=_opt(d, "aggregate_gbps"),
        nodes=tuple(str(n) for n in d.get("nodes", ())),
        shared_uplinks=tuple(str(s) for s in d.get("shared_uplinks", ())),
        errors=tuple(str(e) for e in d.get("errors", ())),
        skipped=None if d.get("skipped") is None else str(d["skipped"]),
        storage_tcp_retrans=None
        if d.get("storage_tcp_retrans") is None
        else int(d["storage_tcp_retrans"]),
        storage_counters=_window(d.get("storage_counters")),
        busy_s=_opt(d, "busy_s"),
        level_gbps=_opt(d, "level_gbps"),
        all_reading_s=_opt(d, "all_reading_s"),
        readers_busy=_opt(d, "readers_busy"),
        ranks=tuple(
            RankSpan(str(r["node"]), float(r["start_s"]), float(r["end_s"]), int(r["bytes"]))
            for r in d.get("ranks", ())
        ),
        call=None if d.get("call") is None else Call(d["call"]),
        rounds=int(d.get("rounds", 1)),
    )


def _ci(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    lo, hi = value
    return float(lo), float(hi)


def _window(value: Any) -> dict[str, Any] | None:
    """A level's ``storage_counters``: kept as read (its readers, counter_evidence, read
    every value defensively); anything but an object is malformed."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"storage_counters must be an object, got {type(value).__name__}")
    return value


def engine_to_dict(e: EngineFanin) -> dict[str, Any]:
    """``fanin[].engine``: the levels through the fetch engine (docs/results.md)."""
    return {
        "name": e.engine.value,
        "version": e.version,
        "levels": [engine_level_to_dict(lv) for lv in e.levels],
        "knee": e.knee,
        "safe_up_to": e.safe_up_to,
        "verdict": e.verdict,
    }


def engine_level_to_dict(lv: EngineFaninLevel) -> dict[str, Any]:
    """A level's keys (``level_to_dict``) and the engine's own."""
    return level_to_dict(lv.level) | {
        "transports": list(lv.transports),
        "carried_by": list(lv.carried_by),
        "storage_carried_by": lv.storage_carried_by,
        "fallback": lv.fallback,
        "ready_s": lv.ready_s,
        "vs_probe": lv.vs_probe,
        "configuration": lv.configuration,
    }


def engine_level(d: Any) -> EngineFaninLevel:
    """One engine level from its JSON; KeyError/TypeError/ValueError when malformed."""
    return EngineFaninLevel(
        level=fanin_level(d),
        transports=tuple(str(t) for t in d.get("transports", ())),
        carried_by=tuple(str(t) for t in d.get("carried_by", ())),
        storage_carried_by=_opt_str(d, "storage_carried_by"),
        fallback=_opt_str(d, "fallback"),
        ready_s=_opt(d, "ready_s"),
        vs_probe=_opt(d, "vs_probe"),
        configuration=_opt_str(d, "configuration"),
    )


def _engine(d: Any) -> EngineFanin | None:
    if d is None:
        return None
    version = d.get("version")
    return EngineFanin(
        engine=EngineName(d["name"]),
        version=None if version is None else str(version),
        levels=tuple(engine_level(lv) for lv in d["levels"]),
        knee=None,
        safe_up_to=None,
        verdict=str(d.get("verdict", "")),
    )


def _opt_str(d: Any, key: str) -> str | None:
    v = d.get(key)
    return None if v is None else str(v)
