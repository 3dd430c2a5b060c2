"""Suspects in results.json (``suspects``, docs/results.md) <-> ``netqual.model.suspects``.

The JSON form is the one the evidence had as a free dict: each record writes the same keys
in the same order, and a file written before the records reads back into them.
``suspect_from_dict`` checks every type and names the key it rejects, so a hostile or
damaged file stops with a clear error instead of a ``KeyError`` in a renderer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from netqual.base.choices import parse_choice
from netqual.model.stats import Metric
from netqual.model.suspects import (
    AsymmetryEvidence,
    CounterCause,
    Evidence,
    LinkEvidence,
    NicEvidence,
    NodeEvidence,
    OtherNic,
    PathEvidence,
    RackPairEvidence,
    RailEvidence,
    Suspect,
    SuspectKind,
)
from netqual.model.verdict import Verdict


def _path_dict(p: PathEvidence) -> dict[str, Any]:
    return {
        "src": p.src,
        "dst": p.dst,
        "verdict": p.verdict.value,
        "value_us": p.value_us,
        "error": p.error,
    }


def _counters_dict(c: CounterCause | None) -> dict[str, Any]:
    return {} if c is None else {"counters": dataclasses.asdict(c)}


def _spread_dict(e: NodeEvidence | NicEvidence) -> dict[str, Any]:
    return {
        "metric": e.metric.value,
        "bad_paths": e.bad_paths,
        "paths": e.paths,
        "median_us": e.median_us,
        "all_paths_median_us": e.all_paths_median_us,
        "worst": _path_dict(e.worst),
        **_counters_dict(e.counters),
    }


def _other_dict(o: OtherNic) -> dict[str, Any]:
    out: dict[str, Any] = {"nic": o.nic, "rail": o.rail}
    if o.paths is not None:
        out |= {"bad_paths": o.bad_paths, "paths": o.paths, "median_us": o.median_us}
    return out


def evidence_to_dict(e: Evidence) -> dict[str, Any]:
    """The evidence as results.json holds it (keys and order as before the types)."""
    if isinstance(e, NodeEvidence):
        return _spread_dict(e) | ({} if e.nics is None else {"nics": list(e.nics)})
    if isinstance(e, NicEvidence):
        others = [_other_dict(o) for o in e.other_nics]
        return _spread_dict(e) | {
            "node": e.node, "nic": e.nic, "rail": e.rail, "other_nics": others,
        }  # fmt: skip
    if isinstance(e, RackPairEvidence):
        return {
            "metric": e.metric.value,
            "racks": list(e.racks),
            "bad_paths": e.bad_paths,
            "paths": e.paths,
            "median_us": e.median_us,
            "all_paths_median_us": e.all_paths_median_us,
            "worst": _path_dict(e.worst),
        }
    if isinstance(e, LinkEvidence):
        return {
            "metric": e.metric.value,
            **_path_dict(e.path),
            "src_bad_elsewhere": e.src_bad_elsewhere,
            "src_paths_elsewhere": e.src_paths_elsewhere,
            "dst_bad_elsewhere": e.dst_bad_elsewhere,
            "dst_paths_elsewhere": e.dst_paths_elsewhere,
            **_counters_dict(e.counters),
        }
    if isinstance(e, AsymmetryEvidence):
        return {
            "metric": e.metric.value,
            "forward": _path_dict(e.forward),
            "reverse": _path_dict(e.reverse),
            "ratio": e.ratio,
        }
    return {
        "metric": e.metric.value,
        "rail": e.rail,
        "bad_nics": list(e.bad_nics),
        "nics": e.nics,
        "worst": _path_dict(e.worst),
    }


def suspect_to_dict(s: Suspect) -> dict[str, Any]:
    return {"kind": s.kind.value, "subject": s.subject, "evidence": evidence_to_dict(s.evidence)}


class _Reader:
    """Typed reads from one JSON object; a wrong value raises ValueError naming its key."""

    def __init__(self, d: object, where: str) -> None:
        if not isinstance(d, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(d).__name__}")
        self.d, self.where = d, where

    def _get(self, key: str) -> object:
        if key not in self.d:
            raise ValueError(f"{self.where}.{key}: missing")
        return self.d[key]

    def _bad(self, key: str, what: str) -> ValueError:
        return ValueError(f"{self.where}.{key}: expected {what}, got {self.d.get(key)!r:.80}")

    def text(self, key: str) -> str:
        v = self._get(key)
        if not isinstance(v, str):
            raise self._bad(key, "a string")
        return v

    def maybe_text(self, key: str) -> str | None:
        v = self.d.get(key)
        if v is not None and not isinstance(v, str):
            raise self._bad(key, "a string or null")
        return v

    def count(self, key: str) -> int:
        v = self._get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise self._bad(key, "a non-negative integer")
        return v

    def maybe_count(self, key: str) -> int | None:
        return None if self.d.get(key) is None else self.count(key)

    def maybe_us(self, key: str) -> float | None:
        v = self.d.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise self._bad(key, "a finite number or null")
        return float(v)

    def texts(self, key: str) -> tuple[str, ...]:
        v = self._get(key)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self._bad(key, "a list of strings")
        return tuple(v)

    def sub(self, key: str) -> _Reader:
        return _Reader(self._get(key), f"{self.where}.{key}")

    def metric(self) -> Metric:
        return parse_choice(Metric, self.text("metric"), f"{self.where}.metric")

    def path(self) -> PathEvidence:
        return PathEvidence(
            src=self.text("src"),
            dst=self.text("dst"),
            verdict=parse_choice(Verdict, self.text("verdict"), f"{self.where}.verdict"),
            value_us=self.maybe_us("value_us"),
            error=self.maybe_text("error"),
        )

    def counters(self) -> CounterCause | None:
        if self.d.get("counters") is None:
            return None
        c = self.sub("counters")
        return CounterCause(c.text("cause"), c.count("paths"), c.text("example"))


def _spread(r: _Reader) -> dict[str, Any]:
    return {
        "metric": r.metric(),
        "bad_paths": r.count("bad_paths"),
        "paths": r.count("paths"),
        "median_us": r.maybe_us("median_us"),
        "all_paths_median_us": r.maybe_us("all_paths_median_us"),
        "worst": r.sub("worst").path(),
        "counters": r.counters(),
    }


def _other_nic(r: _Reader) -> OtherNic:
    return OtherNic(
        nic=r.text("nic"),
        rail=r.count("rail"),
        bad_paths=r.maybe_count("bad_paths"),
        paths=r.maybe_count("paths"),
        median_us=r.maybe_us("median_us"),
    )


def evidence_from_dict(kind: SuspectKind, d: object) -> Evidence:
    r = _Reader(d, "evidence")
    if kind is SuspectKind.NODE:
        nics = r.texts("nics") if r.d.get("nics") is not None else None
        return NodeEvidence(**_spread(r), nics=nics)
    if kind is SuspectKind.NIC:
        others = r._get("other_nics")
        if not isinstance(others, list):
            raise r._bad("other_nics", "a list")
        return NicEvidence(
            **_spread(r),
            node=r.text("node"),
            nic=r.text("nic"),
            rail=r.count("rail"),
            other_nics=tuple(
                _other_nic(_Reader(o, f"evidence.other_nics[{i}]")) for i, o in enumerate(others)
            ),
        )
    if kind is SuspectKind.RACK_PAIR:
        racks = r.texts("racks")
        if len(racks) != 2:
            raise r._bad("racks", "two rack names")
        spread = _spread(r)
        del spread["counters"]
        return RackPairEvidence(racks=(racks[0], racks[1]), **spread)
    if kind is SuspectKind.LINK:
        return LinkEvidence(
            metric=r.metric(),
            path=r.path(),
            src_bad_elsewhere=r.count("src_bad_elsewhere"),
            src_paths_elsewhere=r.count("src_paths_elsewhere"),
            dst_bad_elsewhere=r.count("dst_bad_elsewhere"),
            dst_paths_elsewhere=r.count("dst_paths_elsewhere"),
            counters=r.counters(),
        )
    if kind is SuspectKind.ASYMMETRY:
        return AsymmetryEvidence(
            metric=r.metric(),
            forward=r.sub("forward").path(),
            reverse=r.sub("reverse").path(),
            ratio=r.maybe_us("ratio"),
        )
    return RailEvidence(
        metric=r.metric(),
        rail=r.count("rail"),
        bad_nics=r.texts("bad_nics"),
        nics=r.count("nics"),
        worst=r.sub("worst").path(),
    )


def suspect_from_dict(d: Mapping[str, Any]) -> Suspect:
    """Inverse of suspect_to_dict; raises ValueError/KeyError/TypeError on a bad entry."""
    if not isinstance(d["subject"], str):
        raise TypeError("a suspect needs a string subject")
    kind = SuspectKind(d["kind"])
    return Suspect(kind, d["subject"], evidence_from_dict(kind, d["evidence"]))
