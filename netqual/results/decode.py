"""The results file -> records: ``load`` (results.json, validated against the schema) and
``decode_path`` (one path of results.jsonl, read by ``journal``). Every problem names the
file and the field.

Paths are decoded by msgspec into typed wire records (``_WirePath``: the schema's path
definition as types and bounds, so every value of every path is checked) and straight into
the columns of a ``PathTable``; the rest of the document is small and goes through the JSON
Schema as before. A 1,024-node full mesh (523,776 paths, ~200 MB) loads in seconds without
half a million dict trees.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec

from netqual.analysis.fleet import from_dict as fleet_from_dict
from netqual.analysis.interference import from_dict as interference_from_dict
from netqual.analysis.matrix import fill_tiers
from netqual.analysis.plausible import mark_impossible
from netqual.choices import ChoiceError, parse_choice
from netqual.errors import ResultsFileError
from netqual.filedata import MAX_FLOAT, MAX_INT, checked
from netqual.hostpath_codec import from_dict as hosts_from_dict
from netqual.models import (
    DEFAULT_PORT,
    SCHEMA_VERSION,
    Metric,
    Mode,
    Nic,
    Node,
    NotMeasured,
    Policy,
    PolicyFieldError,
    Role,
    RunMeta,
    Tier,
    Verdict,
)
from netqual.pathtable import PathTable
from netqual.plan_codec import plan_from_dict
from netqual.results.fanin_codec import from_list as fanin_from_list
from netqual.results.multirail_codec import from_list as multirail_from_list
from netqual.results.summary import summarize
from netqual.results.suspects_codec import suspect_from_dict
from netqual.runresults import Results
from netqual.schema import validate
from netqual.suspects import Suspect
from netqual.workload.model import Workload

# Every number is bounded (netqual.filedata): 2**70 samples or a 1e308 time would overflow
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


class _WirePath(msgspec.Struct, kw_only=True, gc=False):
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

    @property
    def bulk(self) -> Sequence[_WireBulk]:
        return self.bulk_cells


def _nic(rd: _Reader, obj: Any, where: str) -> Nic:
    rail = rd.num(obj, "rail", where)
    if rail != int(rail) or rail < 0:
        raise rd.fail(f"{where}.rail", f"expected a rail number >= 0, got {rail:g}")
    device = obj.get("device")
    return Nic(
        name=rd.string(obj, "name", where),
        address=rd.string(obj, "address", where),
        rail=int(rail),
        device=None if device is None else rd.string(obj, "device", where),
    )


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


_PATH_DECODER = msgspec.json.Decoder(_WirePath)
_DEFAULT_POLICY = Policy()  # what a file written without a policy was judged by
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


def decode_path(raw: bytes | str, source: str, where: str) -> _WirePath:
    """One path from JSON text (a results.jsonl line, an element of results.json)."""
    try:
        return _PATH_DECODER.decode(raw)
    except msgspec.ValidationError as err:
        raise _path_error(err, source, where) from err
    except RecursionError as err:
        raise ResultsFileError(source, "nested too deeply", field=where) from err


def convert_path(obj: Any, source: str, where: str) -> _WirePath:
    """One path from parsed JSON (a dict)."""
    try:
        return msgspec.convert(obj, _WirePath)
    except msgspec.ValidationError as err:
        raise _path_error(err, source, where) from err
    except RecursionError as err:
        raise ResultsFileError(source, "nested too deeply", field=where) from err


def _agents(raw: Any, rd: _Reader) -> dict[str, dict[str, object]]:
    """run.agents: per node, the agent's version and clock offset the pre-flight saw."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise rd.fail("run.agents", "expected an object")
    out: dict[str, dict[str, object]] = {}
    for node, entry in raw.items():
        where = f"run.agents.{node}"
        if not isinstance(entry, dict):
            raise rd.fail(where, "expected an object")
        version = entry.get("version")
        if version is not None and not isinstance(version, str):
            raise rd.fail(f"{where}.version", f"expected a string, got {version!r}")
        out[node] = {
            "version": version,
            "clock_offset_s": rd.opt_num(entry, "clock_offset_s", where),
        }
    return out


def results_from_dict(
    d: Mapping[str, Any], source: str, wire_paths: Sequence[_WirePath] | None = None
) -> Results:
    """Results from parsed JSON; ``wire_paths``: the paths, already decoded (``load``),
    else ``d["paths"]`` is converted here."""
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
            metric=Metric(pol.get("metric", _DEFAULT_POLICY.metric.value)),
            safe_max_us=float(pol.get("safe_max_us", _DEFAULT_POLICY.safe_max_us)),
            unsafe_above_us=float(pol.get("unsafe_above_us", _DEFAULT_POLICY.unsafe_above_us)),
            min_samples=int(pol.get("min_samples", _DEFAULT_POLICY.min_samples)),
            fanin_knee_factor=float(
                pol.get("fanin_knee_factor", _DEFAULT_POLICY.fanin_knee_factor)
            ),
        )
    except PolicyFieldError as err:
        raise rd.fail(f"run.policy.{err.field}", err.problem) from err
    except (ValueError, TypeError, OverflowError) as err:
        raise rd.fail("run.policy", str(err)) from err
    try:
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
        agents=_agents(run.get("agents"), rd),
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
            role = parse_choice(Role, n.get("role") or Role.ANY.value, f"{w}.role")
        except ChoiceError as err:
            raise rd.fail(err.where, err.problem) from err
        nodes.append(
            Node(
                name=rd.string(n, "name", w),
                address=rd.string(n, "address", w),
                port=int(n.get("port") or DEFAULT_PORT),
                role=role,
                rack=rd.get(n, "rack", w),
                labels=dict(rd.get(n, "labels", w) or {}),
                nics=tuple(
                    _nic(rd, x, f"{w}.nics[{j}]") for j, x in enumerate(n.get("nics") or [])
                ),
                agent=None if n.get("agent") is None else rd.string(n, "agent", w),
                agent_address=None
                if n.get("agent_address") is None
                else rd.string(n, "agent_address", w),
                nic=None if n.get("nic") is None else _nic(rd, n["nic"], f"{w}.nic"),
            )
        )
    if wire_paths is None:
        items = rd.get(d, "paths", "")
        if not isinstance(items, list):
            raise rd.fail("paths", "expected a list")
        wire_paths = [convert_path(p, source, f"paths[{i}]") for i, p in enumerate(items)]
    # A file without per-path tiers (older, or written by another tool) is judged by its
    # node list's racks and sites, never as one tier that blames every node for distance.
    table = fill_tiers(PathTable.from_paths(wire_paths, [n.name for n in nodes]), nodes)
    paths = mark_impossible(table)
    del wire_paths
    rd.get(d, "summary", "")
    tool = rd.get(d, "tool", "")
    workload = None
    if d.get("workload") is not None:
        try:
            workload = Workload.from_json(d["workload"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise rd.fail("workload", f"malformed workload: {err!r}") from err
    stored = d.get("suspects")
    suspects: list[Suspect] = []
    for i, entry in enumerate(stored or ()):
        try:
            suspects.append(suspect_from_dict(entry))
        except (KeyError, TypeError, ValueError) as err:
            raise rd.fail(f"suspects[{i}]", f"not a suspect: {err}") from err
    retest_of = d.get("retest_of")
    if retest_of is not None and not isinstance(retest_of, str):
        raise rd.fail("retest_of", f"expected a string, got {retest_of!r}")
    not_measured = []
    for i, entry in enumerate(d.get("not_measured") or ()):
        w = f"not_measured[{i}]"
        not_measured.append(
            NotMeasured(
                src=rd.string(entry, "src", w),
                dst=rd.string(entry, "dst", w),
                reason=rd.string(entry, "reason", w),
                kind=str(entry.get("kind") or "configuration"),
            )
        )
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
        suspects=None if stored is None else tuple(suspects),
        retest_of=retest_of,
        not_measured=tuple(not_measured),
        fanin=fanin_from_list(d["fanin"], source) if d.get("fanin") is not None else (),
        fleet=fleet_from_dict(d["fleet"], source) if d.get("fleet") is not None else None,
        hosts=tuple(hosts_from_dict(node, doc) for node, doc in (d.get("hosts") or {}).items()),
        multirail=multirail_from_list(d["multirail"], source) if d.get("multirail") else (),
    )


class _Document(msgspec.Struct):
    """The top level of results.json: paths kept as raw JSON (decoded one by one, typed),
    everything else as plain values for the JSON Schema. UNSET: the key is absent."""

    schema_version: Any = msgspec.UNSET
    tool: Any = msgspec.UNSET
    run: Any = msgspec.UNSET
    nodes: Any = msgspec.UNSET
    paths: list[msgspec.Raw] | msgspec.UnsetType = msgspec.UNSET
    summary: Any = msgspec.UNSET
    interference: Any = msgspec.UNSET
    workload: Any = msgspec.UNSET
    suspects: Any = msgspec.UNSET
    retest_of: Any = msgspec.UNSET
    not_measured: Any = msgspec.UNSET
    fanin: Any = msgspec.UNSET
    fleet: Any = msgspec.UNSET
    hosts: Any = msgspec.UNSET
    multirail: Any = msgspec.UNSET


def _json_error(source: str, text: str) -> ResultsFileError:
    """The stdlib parser's line and column for a file msgspec rejected as JSON."""
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        stripped = text.rstrip()
        truncated = err.pos >= len(stripped) - 1 or not stripped.endswith("}")
        hint = " (truncated? the file ends before the JSON does)" if truncated else ""
        return ResultsFileError(
            source, f"not valid JSON at line {err.lineno} column {err.colno}: {err.msg}{hint}"
        )
    return ResultsFileError(source, "not valid JSON")


def load(path: Path) -> Results:
    """Read and validate a results.json. Every problem is a ResultsFileError naming the field."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ResultsFileError(source, f"cannot read: {err.strerror or err}") from err
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResultsFileError(source, "not UTF-8 text") from err
    try:
        doc = msgspec.json.decode(raw, type=_Document)
    except msgspec.ValidationError as err:
        # not an object at the top level, or "paths" not a list
        if not raw.lstrip().startswith(b"{"):
            raise ResultsFileError(source, "expected a JSON object at the top level") from err
        raise ResultsFileError(source, "expected a list", field="paths") from err
    except msgspec.DecodeError as err:
        raise _json_error(source, raw.decode("utf-8")) from err
    except RecursionError as err:
        raise ResultsFileError(source, "nested too deeply") from err
    data = {
        f: getattr(doc, f)
        for f in doc.__struct_fields__
        if f != "paths" and getattr(doc, f) is not msgspec.UNSET
    }
    raws = [] if doc.paths is msgspec.UNSET else doc.paths
    checked(data, source, ResultsFileError)  # depth and number bounds of all but the paths
    # The schema checks everything but the paths (here an empty list); the typed decoder
    # checks every path against the schema's path definition.
    validate(data if doc.paths is msgspec.UNSET else {**data, "paths": []}, source)
    del doc
    # Half a million small records, none of them in a reference cycle: the cyclic garbage
    # collector would only rescan them again and again (it doubles the decode time).
    with _no_gc():
        try:
            wire = list(map(_PATH_DECODER.decode, raws))
        except (msgspec.ValidationError, RecursionError):
            for i, r in enumerate(raws):  # name the first bad path
                decode_path(r, source, f"paths[{i}]")
            raise
        del raws, raw
        return results_from_dict(data, source, wire)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
