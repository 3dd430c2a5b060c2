"""results.json ``multirail`` (docs/results.md) <-> ``MultiRail`` records."""

from __future__ import annotations

from typing import Any

import msgspec

from netqual.base.errors import ResultsFileError
from netqual.model.multirail import MultiRail, RailLevel


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def to_list(found: tuple[MultiRail, ...]) -> list[dict[str, Any]]:
    return [
        {
            "src": m.src,
            "dst": m.dst,
            "rails": list(m.rails),
            "chunk_bytes": m.chunk_bytes,
            "depth": m.depth,
            "line_gbps": m.line_gbps,
            "min_share": m.min_share,
            "levels": [
                {
                    "rails": lv.rails,
                    "per_rail_gbps": [round(g, 6) for g in lv.per_rail_gbps],
                    "aggregate_gbps": None
                    if lv.aggregate_gbps is None
                    else round(lv.aggregate_gbps, 6),
                    "gain_gbps": None if lv.gain_gbps is None else round(lv.gain_gbps, 6),
                    "error": lv.error,
                }
                for lv in m.levels
            ],
            "verdict": m.verdict,
            "short": m.short,
        }
        for m in found
    ]


class _Level(msgspec.Struct, forbid_unknown_fields=False):
    rails: int
    per_rail_gbps: list[float]
    aggregate_gbps: float | None
    gain_gbps: float | None
    error: str | None = None


class _Pair(msgspec.Struct, forbid_unknown_fields=False):
    src: str
    dst: str
    rails: list[int]
    chunk_bytes: int
    depth: int
    line_gbps: float
    min_share: float
    levels: list[_Level]
    verdict: str
    short: bool


def from_list(raw: Any, source: str) -> tuple[MultiRail, ...]:
    try:
        pairs = msgspec.convert(raw, list[_Pair])
    except msgspec.ValidationError as err:
        raise ResultsFileError(source, str(err), field="multirail") from None
    return tuple(
        MultiRail(
            p.src,
            p.dst,
            tuple(p.rails),
            p.chunk_bytes,
            p.depth,
            p.line_gbps,
            p.min_share,
            tuple(
                RailLevel(
                    lv.rails, tuple(lv.per_rail_gbps), lv.aggregate_gbps, lv.gain_gbps, lv.error
                )
                for lv in p.levels
            ),
            p.verdict,
            p.short,
        )
        for p in pairs
    )
