"""One path of the results file as typed records: the schema's path definition as msgspec
types and bounds (every value of every path is checked), decoded straight into what
``PathTable.from_paths`` reads (``WirePath``: attribute names as ``PathResult`` has them).
``decode_path`` / ``convert_path`` turn msgspec's errors into a ``ResultsFileError`` naming
the field as the JSON Schema's route does (docs/results.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar

import msgspec

from netqual.base.errors import ResultsFileError
from netqual.codec.details import problem as details_problem
from netqual.files.filedata import MAX_FLOAT, MAX_INT
from netqual.model.decision import Evidence, EvidenceKind, Subject, SubjectKind
from netqual.model.engine import EngineCell
from netqual.model.path import Tier
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.results.engine_codec import WireEngineCell

# Every number is bounded (netqual.files.filedata): 2**70 samples or a 1e308 time would overflow
# the int64/float64 columns and the arithmetic on them.
Us = Annotated[float, msgspec.Meta(ge=0, le=MAX_FLOAT)]
# What an agent measured: any number in range is read, and an impossible one (negative,
# zero, out of order) makes its path unsafe (netqual.analysis.plausible), never the file unreadable.
Measured = Annotated[float, msgspec.Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)]
Float = Annotated[float, msgspec.Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]


class _Ci95(msgspec.Struct, gc=False):
    """``ci95`` of files of older versions: the interval of the policy metric alone."""

    metric: Metric | None = None
    low: Float | None = None
    high: Float | None = None


Interval = tuple[Float, Float]


class _Ci95ByMetric(msgspec.Struct, gc=False):
    """``ci95_by_metric``: (low, high) per percentile, fields as ``Ci95`` names them."""

    p50: Interval | None = None
    p90: Interval | None = None
    p99: Interval | None = None
    p999: Interval | None = None

    @classmethod
    def of_legacy(cls, old: _Ci95 | None) -> _Ci95ByMetric:
        """An older file's one interval; none where it lacks a metric or a bound."""
        if old is None or old.metric is None or old.low is None or old.high is None:
            return _NO_CI95
        return cls(**{old.metric.value: (old.low, old.high)})


_NO_CI95 = _Ci95ByMetric()


class _Histogram(msgspec.Struct, gc=False):
    bins_per_decade: Annotated[int, msgspec.Meta(ge=1, le=1000)]
    first_bin: Annotated[int, msgspec.Meta(ge=-100_000, le=100_000)]
    counts: list[Count]


class _WireRtt(msgspec.Struct, kw_only=True, gc=False):
    """``rtt_us`` of a path; attribute names as ``RttStats`` has them."""

    samples: Count
    min_us: Measured = msgspec.field(name="min")
    p50_us: Measured = msgspec.field(name="p50")
    p90_us: Measured = msgspec.field(name="p90")
    p99_us: Measured = msgspec.field(name="p99")
    p999_us: Measured = msgspec.field(name="p999")
    max_us: Measured = msgspec.field(name="max")
    mean_us: Measured = msgspec.field(name="mean")
    stdev_us: Measured = msgspec.field(name="stdev")
    untrusted: list[str] = []
    ci95_by_metric: _Ci95ByMetric | None = None
    legacy_ci95: _Ci95 | None = msgspec.field(name="ci95", default=None)
    histogram: _Histogram | None = None

    @property
    def ci95(self) -> _Ci95ByMetric:
        got = self.ci95_by_metric
        return _Ci95ByMetric.of_legacy(self.legacy_ci95) if got is None else got

    @property
    def histogram_bins(self) -> tuple[float, float] | None:
        h = self.histogram
        return None if h is None or not h.counts else (h.first_bin, h.bins_per_decade)

    @property
    def histogram_counts(self) -> Sequence[int]:
        return () if self.histogram is None else self.histogram.counts


class _Completion(msgspec.Struct, gc=False):
    p50: Measured
    p99: Measured
    max: Measured | None = None


class _WireBulk(msgspec.Struct, kw_only=True, gc=False):
    chunk_bytes: Positive
    depth: Positive
    reads: Count
    goodput_gbps: Measured
    completion_us: _Completion
    error: str | None = None
    # PathTable.from_paths reads these straight from the nested record (C-speed attrgetter)
    column_attrs: ClassVar[Mapping[str, str]] = {
        "completion_p50_us": "completion_us.p50",
        "completion_p99_us": "completion_us.p99",
    }

    @property
    def completion_p50_us(self) -> float:
        return self.completion_us.p50

    @property
    def completion_p99_us(self) -> float:
        return self.completion_us.p99

    @property
    def completion_max_us(self) -> float:
        c = self.completion_us
        return c.p99 if c.max is None else c.max


class _Fetch(msgspec.Struct, gc=False):
    p50: Us | None
    p99: Us | None


class _WireWorkload(msgspec.Struct, kw_only=True, gc=False):
    fetch_us: _Fetch
    budget_us: Us
    speedup: Us | None
    verdict: Verdict
    reasons: list[str]
    interpolated: bool
    break_even_rtt_us: Us | None = None

    @property
    def fetch_p50_us(self) -> float | None:
        return self.fetch_us.p50

    @property
    def fetch_p99_us(self) -> float | None:
        return self.fetch_us.p99


class _WireEvidence(msgspec.Struct, kw_only=True, gc=False):
    """One ``evidence`` entry of a path (the decision's, docs/results.md)."""

    kind: EvidenceKind
    verdict: Verdict | None = msgspec.field(name="class")
    subject: str
    subject_kind: SubjectKind = SubjectKind.PATH
    detail: str

    def record(self) -> Evidence:
        return Evidence(
            self.kind, self.verdict, Subject(self.subject_kind, self.subject), self.detail
        )


class WirePath(msgspec.Struct, kw_only=True, gc=False):
    """One path object (docs/results.md); attribute names as ``PathResult`` has them."""

    src: Annotated[str, msgspec.Meta(min_length=1)]
    dst: Annotated[str, msgspec.Meta(min_length=1)]
    transport: str
    hops: Count | None
    rtt: _WireRtt | None = msgspec.field(name="rtt_us")
    bulk_cells: list[_WireBulk] = msgspec.field(name="bulk")
    verdict: Verdict
    reasons: list[str]
    error: str | None
    tier: Tier | None = None
    started_at: str | None = None
    duration_s: Float | None = None
    details: dict[str, Any] | None = None
    workload: _WireWorkload | None = None
    src_nic: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    dst_nic: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    rail: Annotated[int, msgspec.Meta(ge=0, le=1 << 20)] | None = None
    rtt_verdict: Verdict | None = None
    evidence_entries: list[_WireEvidence] = msgspec.field(name="evidence", default_factory=list)
    engine_cells: list[WireEngineCell] = msgspec.field(name="engine", default=[])

    def __post_init__(self) -> None:
        # each registered key's type (model.details); the rest is kept as read
        if self.details and (wrong := details_problem(self.details)) is not None:
            at, msg = wrong  # msgspec reports it as the path's own error: put the field back
            raise ValueError(f"{msg} - at `$.details{at}`")

    @property
    def bulk(self) -> Sequence[_WireBulk]:
        return self.bulk_cells

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        return tuple(e.record() for e in self.evidence_entries)

    @property
    def engine(self) -> tuple[EngineCell, ...]:
        return tuple(c.cell() for c in self.engine_cells)


PATH_DECODER = msgspec.json.Decoder(WirePath)
_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<at>[^`]*)`)?$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<key>[^`]+)`$")


def _path_error(err: msgspec.ValidationError, source: str, where: str) -> ResultsFileError:
    """msgspec's "Expected `int`, got `str` - at `$.rtt_us.samples`" as the field it names."""
    m = _AT.match(str(err))
    msg, at = (m["msg"], m["at"] or "") if m else (str(err), "")
    field = where + at
    missing = _MISSING.match(msg)
    if missing:
        return ResultsFileError(source, "missing required key", field=f"{field}.{missing['key']}")
    return ResultsFileError(source, _schema_words(msg, field), field=field)


# msgspec's type names -> the JSON Schema's, so both routes speak alike
_JSON_TYPES = {
    "float": "number",
    "int": "integer",
    "str": "string",
    "bool": "boolean",
    "object": "object",
    "array": "array",
    "null": "null",
}
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`$")
_BOUND = re.compile(r"^Expected `(?P<want>\w+)` (?P<op>>=|<=) (?P<limit>\S+)$")
_LENGTH = re.compile(r"^Expected `str` of length >= (?P<limit>\d+)$")
_ENUM = re.compile(r"^Invalid enum value (?P<value>.+)$")


def _schema_words(msg: str, field: str) -> str:
    def kind(name: str) -> str:
        return " or ".join(_JSON_TYPES.get(t.strip(), t.strip()) for t in name.split("|"))

    if m := _EXPECTED.match(msg):
        return f"expected {kind(m['want'])}, got {kind(m['got'])}"
    if m := _BOUND.match(msg):
        which = "minimum" if m["op"] == ">=" else "maximum"
        return f"expected {kind(m['want'])}, at the {which} of {m['limit']}"
    if m := _LENGTH.match(msg):
        return f"expected a string of at least {m['limit']} character(s)"
    if m := _ENUM.match(msg):
        enum: type[Verdict] | type[Tier] | type[Metric] = (
            Tier if field.endswith("tier") else Metric if field.endswith("metric") else Verdict
        )
        allowed = ", ".join(repr(v.value) for v in enum)
        return f"is {m['value']}, expected one of {allowed}"
    return msg[:1].lower() + msg[1:]


def decode_path(raw: bytes | str, source: str, where: str) -> WirePath:
    """One path from JSON text (a results.jsonl line, an element of results.json)."""
    try:
        return PATH_DECODER.decode(raw)
    except msgspec.ValidationError as err:
        raise _path_error(err, source, where) from err
    except RecursionError as err:
        raise ResultsFileError(source, "nested too deeply", field=where) from err


def convert_path(obj: Any, source: str, where: str) -> WirePath:
    """One path from parsed JSON (a dict)."""
    try:
        return msgspec.convert(obj, WirePath)
    except msgspec.ValidationError as err:
        raise _path_error(err, source, where) from err
    except RecursionError as err:
        raise ResultsFileError(source, "nested too deeply", field=where) from err
