"""Suspects in results.json (``suspects``, docs/results.md) <-> ``netqual.model.suspects``,
and the run-wide ``localisation`` (repeatability, distance tiers, a re-test's base).

The JSON form is the one the evidence had as a free dict: each record writes the same keys
in the same order, and a file written before the records reads back into them. What came
later is written only when it is there: ``contrast`` (the suspect against its peers),
``threshold`` of an asymmetry, ``of`` beside a counter cause, and ``cause`` for the causes
that are not the counters' (mtu, delay, bandwidth). The typed subject is read from the
evidence (a link's two ends, a NIC's node and name, the racks, the rail), never parsed
back from the ``subject`` text; a node's subject is its name as written.
``suspect_from_dict`` checks every type and names the key it rejects, so a hostile or
damaged file stops with a clear error instead of a ``KeyError`` in a renderer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from netqual.base.fields import FieldReader, is_integer, is_number
from netqual.model.path import Tier
from netqual.model.stats import Metric
from netqual.model.suspects import (
    SUBJECT_OF,
    AsymmetryEvidence,
    Cause,
    CauseKind,
    Contrast,
    DistanceEvidence,
    Evidence,
    LinkEvidence,
    LinkSubject,
    Localisation,
    Measure,
    NicEvidence,
    NicSubject,
    NodeEvidence,
    NodeSubject,
    OtherNic,
    PairSubject,
    PathEvidence,
    RackPairEvidence,
    RackPairSubject,
    RailEvidence,
    RailSubject,
    Repeatability,
    RepeatMeasure,
    RepeatSource,
    Subject,
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


def _cause_dict(c: Cause | None) -> dict[str, Any]:
    """A counter cause where it always was (``counters``), the others as ``cause``."""
    if c is None:
        return {}
    of = {} if c.of is None else {"of": c.of}
    if c.kind.from_counters:
        return {"counters": {"cause": c.kind.value, "paths": c.paths, "example": c.example, **of}}
    return {"cause": {"kind": c.kind.value, "paths": c.paths, "example": c.example, **of}}


def _contrast_dict(c: Contrast | None) -> dict[str, Any]:
    if c is None:
        return {}
    return {
        "contrast": {
            "tier": c.tier.value,
            "measure": c.measure.value,
            "unit": c.measure.unit,
            "level": c.level,
            "peers_level": c.peers_level,
            "peers": c.peers,
            "ratio": c.ratio,
            "threshold": c.threshold,
            "source": c.source.value,
        }
    }


def _spread_dict(e: NodeEvidence | NicEvidence) -> dict[str, Any]:
    return {
        "metric": e.metric.value,
        "bad_paths": e.bad_paths,
        "paths": e.paths,
        "median_us": e.median_us,
        "all_paths_median_us": e.all_paths_median_us,
        "worst": _path_dict(e.worst),
        **_cause_dict(e.cause),
    }


def _other_dict(o: OtherNic) -> dict[str, Any]:
    out: dict[str, Any] = {"nic": o.nic, "rail": o.rail}
    if o.paths is not None:
        out |= {"bad_paths": o.bad_paths, "paths": o.paths, "median_us": o.median_us}
    return out


def evidence_to_dict(e: Evidence) -> dict[str, Any]:
    """The evidence as results.json holds it (keys and order as before the types)."""
    if isinstance(e, NodeEvidence):
        nics = {} if e.nics is None else {"nics": list(e.nics)}
        return _spread_dict(e) | nics | _contrast_dict(e.contrast)
    if isinstance(e, NicEvidence):
        others = [_other_dict(o) for o in e.other_nics]
        return _spread_dict(e) | {
            "node": e.node, "nic": e.nic, "rail": e.rail, "other_nics": others,
        } | _contrast_dict(e.contrast)  # fmt: skip
    if isinstance(e, RackPairEvidence):
        return {
            "metric": e.metric.value,
            "racks": list(e.racks),
            "bad_paths": e.bad_paths,
            "paths": e.paths,
            "median_us": e.median_us,
            "all_paths_median_us": e.all_paths_median_us,
            "worst": _path_dict(e.worst),
            **_contrast_dict(e.contrast),
        }
    if isinstance(e, LinkEvidence):
        return {
            "metric": e.metric.value,
            **_path_dict(e.path),
            "src_bad_elsewhere": e.src_bad_elsewhere,
            "src_paths_elsewhere": e.src_paths_elsewhere,
            "dst_bad_elsewhere": e.dst_bad_elsewhere,
            "dst_paths_elsewhere": e.dst_paths_elsewhere,
            **_cause_dict(e.cause),
            **_contrast_dict(e.contrast),
        }
    if isinstance(e, AsymmetryEvidence):
        return {
            "metric": e.metric.value,
            "forward": _path_dict(e.forward),
            "reverse": _path_dict(e.reverse),
            "ratio": e.ratio,
            **({} if e.threshold is None else {"threshold": e.threshold}),
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


class _Reader(FieldReader[ValueError]):
    """Typed reads from one JSON object; a wrong value raises ValueError naming its key
    (``results.decode`` says which suspect or the localisation it was)."""

    def __init__(self, d: object, where: str) -> None:
        if not isinstance(d, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(d).__name__}")
        super().__init__(d, where)

    def error(self, field: str, problem: str) -> ValueError:
        return ValueError(f"{field}: {problem}")

    def _bad(self, key: str, what: str) -> ValueError:
        return self.fail(key, f"expected {what}, got {self.data.get(key)!r:.80}")

    def text(self, key: str) -> str:
        v = self.value(key)
        if not isinstance(v, str):
            raise self._bad(key, "a string")
        return v

    def maybe_text(self, key: str) -> str | None:
        v = self.data.get(key)
        if v is not None and not isinstance(v, str):
            raise self._bad(key, "a string or null")
        return v

    def count(self, key: str) -> int:
        v = self.value(key)
        if not is_integer(v) or v < 0:
            raise self._bad(key, "a non-negative integer")
        return v

    def maybe_count(self, key: str) -> int | None:
        return None if self.data.get(key) is None else self.count(key)

    def maybe_us(self, key: str) -> float | None:
        v = self.data.get(key)
        if v is None:
            return None
        if not is_number(v) or not math.isfinite(v):
            raise self._bad(key, "a finite number or null")
        return float(v)

    def texts(self, key: str) -> tuple[str, ...]:
        v = self.value(key)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self._bad(key, "a list of strings")
        return tuple(v)

    def sub(self, key: str) -> _Reader:
        return _Reader(self.value(key), self.field(key))

    def metric(self) -> Metric:
        return self.member(Metric, self.text("metric"), "metric")

    def path(self) -> PathEvidence:
        return PathEvidence(
            src=self.text("src"),
            dst=self.text("dst"),
            verdict=self.member(Verdict, self.text("verdict"), "verdict"),
            value_us=self.maybe_us("value_us"),
            error=self.maybe_text("error"),
        )

    def ratio(self, key: str) -> float:
        v = self.value(key)
        if not is_number(v) or not v >= 1 or v == math.inf:
            raise self._bad(key, "a finite ratio >= 1")
        return float(v)

    def cause(self) -> Cause | None:
        """``counters`` (the counters' cause, as files always held it) or ``cause``."""
        if self.data.get("counters") is not None:
            c = self.sub("counters")
            kind = c.member(CauseKind, c.text("cause"), "cause")
        elif self.data.get("cause") is not None:
            c = self.sub("cause")
            kind = c.member(CauseKind, c.text("kind"), "kind")
        else:
            return None
        return Cause(kind, c.count("paths"), c.text("example"), c.maybe_count("of"))

    def contrast(self) -> Contrast | None:
        if self.data.get("contrast") is None:
            return None
        c = self.sub("contrast")
        return Contrast(
            tier=c.member(Tier, c.text("tier"), "tier"),
            level=c.maybe_us("level"),
            peers_level=c.maybe_us("peers_level"),
            peers=c.count("peers"),
            threshold=c.ratio("threshold"),
            source=c.member(RepeatSource, c.text("source"), "source"),
            measure=c.member(Measure, c.text("measure"), "measure"),
        )


def _spread(r: _Reader) -> dict[str, Any]:
    return {
        "metric": r.metric(),
        "bad_paths": r.count("bad_paths"),
        "paths": r.count("paths"),
        "median_us": r.maybe_us("median_us"),
        "all_paths_median_us": r.maybe_us("all_paths_median_us"),
        "worst": r.sub("worst").path(),
        "cause": r.cause(),
        "contrast": r.contrast(),
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
        nics = r.texts("nics") if r.data.get("nics") is not None else None
        return NodeEvidence(**_spread(r), nics=nics)
    if kind is SuspectKind.NIC:
        others = r.value("other_nics")
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
        del spread["cause"]
        del spread["contrast"]
        return RackPairEvidence(racks=(racks[0], racks[1]), **spread, contrast=r.contrast())
    if kind is SuspectKind.LINK:
        return LinkEvidence(
            metric=r.metric(),
            path=r.path(),
            src_bad_elsewhere=r.count("src_bad_elsewhere"),
            src_paths_elsewhere=r.count("src_paths_elsewhere"),
            dst_bad_elsewhere=r.count("dst_bad_elsewhere"),
            dst_paths_elsewhere=r.count("dst_paths_elsewhere"),
            cause=r.cause(),
            contrast=r.contrast(),
        )
    if kind is SuspectKind.ASYMMETRY:
        return AsymmetryEvidence(
            metric=r.metric(),
            forward=r.sub("forward").path(),
            reverse=r.sub("reverse").path(),
            ratio=r.maybe_us("ratio"),
            threshold=None if r.data.get("threshold") is None else r.ratio("threshold"),
        )
    return RailEvidence(
        metric=r.metric(),
        rail=r.count("rail"),
        bad_nics=r.texts("bad_nics"),
        nics=r.count("nics"),
        worst=r.sub("worst").path(),
    )


def subject_of(kind: SuspectKind, text: str, e: Evidence) -> Subject:
    """The typed subject from the evidence, which holds what the subject names."""
    if isinstance(e, LinkEvidence):
        return LinkSubject(e.path.src, e.path.dst)
    if isinstance(e, AsymmetryEvidence):
        return PairSubject(e.forward.src, e.forward.dst)
    if isinstance(e, RackPairEvidence):
        return RackPairSubject(*e.racks)
    if isinstance(e, NicEvidence):
        return NicSubject(e.node, e.nic)
    if isinstance(e, RailEvidence):
        return RailSubject(e.rail)
    return NodeSubject(text)


def suspect_from_dict(d: Mapping[str, Any]) -> Suspect:
    """Inverse of suspect_to_dict; raises ValueError/KeyError/TypeError on a bad entry."""
    if not isinstance(d["subject"], str):
        raise TypeError("a suspect needs a string subject")
    kind = SuspectKind(d["kind"])
    evidence = evidence_from_dict(kind, d["evidence"])
    about = subject_of(kind, d["subject"], evidence)
    assert isinstance(about, SUBJECT_OF[kind])
    return Suspect(kind, about, evidence)


# -- localisation ----------------------------------------------------------------------


def localisation_to_dict(loc: Localisation) -> dict[str, Any]:
    rep = loc.repeatability
    return {
        "repeatability": {
            "ratio": rep.ratio,
            "source": rep.decisive.source.value,
            "measures": [
                {"source": m.source.value, "ratio": m.ratio, "paths": m.paths} for m in rep.measures
            ],
        },
        "distance": [
            {
                "metric": d.metric.value,
                "tier": d.tier.value,
                "bad_paths": d.bad_paths,
                "paths": d.paths,
                "unsafe": d.unsafe,
                "low_us": d.low_us,
                "high_us": d.high_us,
                "hops": list(d.hops),
                "near_safe": d.near_safe,
                "near_paths": d.near_paths,
            }
            for d in loc.distance
        ],
        "paths": loc.paths,
        "retested": loc.retested,
        "base": loc.base,
    }


def localisation_from_dict(d: object) -> Localisation:
    """Inverse of localisation_to_dict; a bad value raises ValueError naming its key."""
    r = _Reader(d, "localisation")
    rep = r.sub("repeatability")
    raw = rep.value("measures")
    if not isinstance(raw, list) or not raw:
        raise rep._bad("measures", "a non-empty list")
    measures = []
    for i, m in enumerate(raw):
        mr = _Reader(m, f"{rep.where}.measures[{i}]")
        source = mr.member(RepeatSource, mr.text("source"), "source")
        measures.append(RepeatMeasure(source, mr.ratio("ratio"), mr.count("paths")))
    far = r.value("distance")
    if not isinstance(far, list):
        raise r._bad("distance", "a list")
    distance = []
    for i, item in enumerate(far):
        dr = _Reader(item, f"localisation.distance[{i}]")
        hops = dr.value("hops")
        if not isinstance(hops, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) for h in hops
        ):
            raise dr._bad("hops", "a list of integers")
        unsafe = dr.value("unsafe")
        if not isinstance(unsafe, bool):
            raise dr._bad("unsafe", "true or false")
        distance.append(
            DistanceEvidence(
                metric=dr.metric(),
                tier=dr.member(Tier, dr.text("tier"), "tier"),
                bad_paths=dr.count("bad_paths"),
                paths=dr.count("paths"),
                unsafe=unsafe,
                low_us=dr.maybe_us("low_us"),
                high_us=dr.maybe_us("high_us"),
                hops=tuple(hops),
                near_safe=dr.count("near_safe"),
                near_paths=dr.count("near_paths"),
            )
        )
    return Localisation(
        repeatability=Repeatability(tuple(measures)),
        distance=tuple(distance),
        paths=r.count("paths"),
        retested=r.count("retested"),
        base=r.maybe_text("base"),
    )
