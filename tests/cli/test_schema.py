"""The results file is validated on load; every problem names the field (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results

from netqual.analysis.decision import decide
from netqual.base.errors import EXIT_USAGE, ResultsFileError
from netqual.files import schema
from netqual.model.policy import Policy, PolicyFieldError
from netqual.model.stats import Ci95
from netqual.results import load, results_to_dict


@pytest.fixture
def doc() -> dict[str, Any]:
    return results_to_dict(make_results(4, slow_nodes=["gpu03"]))


def _load_doc(tmp_path: Path, doc: dict[str, Any]) -> None:
    f = tmp_path / "results.json"
    f.write_text(json.dumps(doc))
    load(f)


def test_valid_file_round_trips(tmp_path: Path) -> None:
    # a run writes its decision (netqual.analysis.decision); loading decides again
    original = decide(make_results(6, slow_nodes=["gpu02"], error_paths=1))
    loaded = load(write_results(tmp_path / "r.json", original))
    # times are stored to the nanosecond: writing what was loaded changes nothing
    assert results_to_dict(loaded) == results_to_dict(original)
    assert loaded.nodes == original.nodes


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (
            lambda d: d.update(schema_version="2"),
            "schema_version",
            "unsupported schema_version '2'",
        ),
        (lambda d: d.pop("schema_version"), "schema_version", "missing required key"),
        (lambda d: d.pop("summary"), "summary", "missing required key"),
        (lambda d: d["run"].pop("transport"), "run.transport", "missing required key"),
        (lambda d: d["paths"][3].pop("verdict"), "paths[3].verdict", "missing required key"),
        (
            lambda d: d["paths"][2]["rtt_us"].update(p99="slow"),
            "paths[2].rtt_us.p99",
            "expected number",
        ),
        (lambda d: d["paths"][1].update(verdict="fine"), "paths[1].verdict", "expected one of"),
        (lambda d: d["nodes"][0].update(role="gpu"), "nodes[0].role", "'gpu'"),
        (
            lambda d: d["paths"][0]["bulk"][1].pop("completion_us"),
            "paths[0].bulk[1].completion_us",
            "missing required key",
        ),
        (lambda d: d["paths"][0].update(hops=-1), "paths[0].hops", "minimum"),
        (
            lambda d: d["run"]["policy"].update(safe_max_us=500.0, unsafe_above_us=200.0),
            "run.policy.unsafe_above_us",
            "must be >= safe_max_us (500), got 200",
        ),
        (
            lambda d: d["run"]["policy"].update(safe_max_us=0.0),
            "run.policy.safe_max_us",
            "positive finite",
        ),
    ],
)
def test_schema_errors_name_the_field(
    tmp_path: Path, doc: dict[str, Any], mutate: Any, field: str, words: str
) -> None:
    mutate(doc)
    with pytest.raises(ResultsFileError) as info:
        _load_doc(tmp_path, doc)
    assert info.value.field == field
    assert words in str(info.value)
    assert info.value.exit_code == EXIT_USAGE


def test_truncated_file_is_reported(tmp_path: Path) -> None:
    f = write_results(tmp_path / "r.json", make_results(4))
    text = f.read_text()
    f.write_text(text[: len(text) // 2])
    with pytest.raises(ResultsFileError, match=r"not valid JSON .*truncated\?"):
        load(f)


def test_every_path_is_checked_not_a_sample(tmp_path: Path) -> None:
    doc = results_to_dict(make_results(40))  # 780 paths
    last = len(doc["paths"]) - 1
    doc["paths"][last]["rtt_us"]["p50"] = "x"
    with pytest.raises(ResultsFileError) as info:
        _load_doc(tmp_path, doc)
    assert info.value.field == f"paths[{last}].rtt_us.p50"
    doc["paths"][last]["rtt_us"]["p50"] = 1.0
    doc["paths"][401]["bulk"][0]["depth"] = 0
    with pytest.raises(ResultsFileError) as info:
        _load_doc(tmp_path, doc)
    assert info.value.field == "paths[401].bulk[0].depth"
    assert "minimum of 1" in str(info.value)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda p: p.pop("verdict"),
        lambda p: p.update(verdict="fine"),
        lambda p: p.update(src=""),
        lambda p: p.update(hops=-1),
        lambda p: p.update(hops=1.5),
        lambda p: p.update(tier="next-door"),
        lambda p: p.update(reasons="slow"),
        lambda p: p["rtt_us"].update(samples=-1),
        lambda p: p["rtt_us"].update(p99=None),
        lambda p: p["rtt_us"].update(p99=True),
        lambda p: p["rtt_us"]["histogram"].update(bins_per_decade=0),
        lambda p: p["bulk"][0].update(chunk_bytes=0),
        lambda p: p["bulk"][0]["completion_us"].pop("p99"),
        lambda p: p["rtt_us"].update(ci95_by_metric={"p99": [1.0]}),
        lambda p: p["rtt_us"].update(ci95_by_metric={"p50": "wide"}),
    ],
)
def test_typed_decoder_and_json_schema_reject_the_same_paths(
    tmp_path: Path, doc: dict[str, Any], mutate: Any
) -> None:
    """Paths are checked by msgspec types (fast), the rest by the JSON Schema: both must
    hold the same definition of a path."""
    mutate(doc["paths"][0])
    with pytest.raises(ResultsFileError) as typed:
        _load_doc(tmp_path, doc)
    with pytest.raises(ResultsFileError) as by_schema:
        schema.validate(doc, "results.json")
    assert typed.value.field is not None and typed.value.field.startswith("paths[0].")
    assert by_schema.value.field is not None and by_schema.value.field.startswith("paths[0].")


def test_schema_ships_inside_the_package() -> None:
    assert schema.results_schema()["properties"]["schema_version"]["const"] == "1"


def test_the_shipped_schema_is_valid_against_its_meta_schema() -> None:
    """Checked here once: `load` no longer checks the (constant) schema in every process."""
    s = schema.results_schema()
    cls = jsonschema.validators.validator_for(s)
    assert s["$schema"] == cls.META_SCHEMA["$id"].rstrip("#")  # the draft it names
    cls.check_schema(s)
    broken = {**s, "properties": {**s["properties"], "tool": {"type": "no-such-type"}}}
    with pytest.raises(jsonschema.exceptions.SchemaError):
        cls.check_schema(broken)  # the check can fail


# The documented required keys (docs/results.md), the one copy in the tests: the schema
# must require at least these; every other test validates files with the schema itself.
REQUIRED = {
    "": {"schema_version", "tool", "run", "nodes", "paths", "summary"},
    "tool": {"name", "version"},
    "run": {"started_at", "finished_at", "transport", "mode", "policy"},
    "node": {"name", "address", "role", "rack", "labels"},
    "path": {"src", "dst", "transport", "hops", "rtt_us", "bulk", "verdict", "reasons", "error"},
    "rtt": {"samples", "min", "p50", "p90", "p99", "p999", "max", "mean", "stdev"},
    "bulk": {"chunk_bytes", "depth", "reads", "goodput_gbps", "completion_us"},
}


def _required(node: dict[str, Any]) -> set[str]:
    return set(node.get("required", ()))


def test_schema_requires_the_documented_keys() -> None:
    s = schema.results_schema()
    defs = s["$defs"]
    assert _required(s) >= REQUIRED[""]
    assert _required(s["properties"]["tool"]) >= REQUIRED["tool"]
    assert _required(s["properties"]["run"]) >= REQUIRED["run"]
    for name in ("node", "path", "rtt", "bulk"):
        assert _required(defs[name]) >= REQUIRED[name], name
    assert set(defs["path"]["properties"]["verdict"]["enum"]) == {
        "offload-safe",
        "marginal",
        "unsafe",
    }


def test_report_on_a_file_with_an_inverted_policy_exits_2_naming_the_field(
    tmp_path: Path, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    doc["run"]["policy"].update(safe_max_us=500.0, unsafe_above_us=200.0)
    (tmp_path / "results.json").write_text(json.dumps(doc))
    run = run_in_process(["report", "results.json"], tmp_path, monkeypatch, capsys)
    assert run.returncode == EXIT_USAGE
    assert "run.policy.unsafe_above_us" in run.stderr
    assert "must be >= safe_max_us (500), got 200" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"safe_max_us": 500.0, "unsafe_above_us": 200.0}, "unsafe_above_us"),
        ({"safe_max_us": -1.0}, "safe_max_us"),
        ({"unsafe_above_us": float("nan")}, "unsafe_above_us"),
        ({"min_samples": 0}, "min_samples"),
        ({"metric": "p95"}, "metric"),
    ],
)
def test_a_policy_validates_itself_wherever_it_is_built(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyFieldError) as info:
        Policy(**fields)
    assert info.value.field == field


def test_a_confidence_interval_of_an_unknown_metric_exits_2_naming_it(
    tmp_path: Path, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # the interval's metric is a Metric from the file on: no string compared later
    doc["paths"][0]["rtt_us"]["ci95"] = {"metric": "p95", "low": 1.0, "high": 2.0}
    (tmp_path / "results.json").write_text(json.dumps(doc))
    run = run_in_process(["report", "results.json"], tmp_path, monkeypatch, capsys)
    assert run.returncode == EXIT_USAGE
    assert "paths[0].rtt_us.ci95.metric: is 'p95', expected one of 'p50', 'p90'" in run.stderr


def test_a_file_of_an_older_version_keeps_its_one_interval(
    tmp_path: Path, doc: dict[str, Any]
) -> None:
    # before every percentile had one, "ci95" held the policy metric's interval alone
    doc["paths"][0]["rtt_us"]["ci95"] = {"metric": "p99", "low": 30.0, "high": 50.0}
    doc["paths"][1]["rtt_us"]["ci95"] = {"metric": "p99", "low": 30.0, "high": None}
    doc["paths"][2]["rtt_us"]["ci95"] = {"metric": "p50", "low": 1.0, "high": 2.0}
    doc["paths"][2]["rtt_us"]["ci95_by_metric"] = {"p50": [3.0, 4.0], "p99": [5.0, 6.0]}
    (tmp_path / "old.json").write_text(json.dumps(doc))
    loaded = load(tmp_path / "old.json")
    rows = loaded.paths.rows_of([(p["src"], p["dst"]) for p in doc["paths"][:4]])
    got = [loaded.paths.row(i).rtt.ci95 for i in rows if i is not None]  # type: ignore[union-attr]
    assert got == [
        Ci95(p99=(30.0, 50.0)),
        Ci95(),  # one bound is no interval
        Ci95(p50=(3.0, 4.0), p99=(5.0, 6.0)),  # this version's key wins
        Ci95(),
    ]
    # written again in this version's form only
    again = results_to_dict(loaded)["paths"]
    first = next(
        p for p in again if (p["src"], p["dst"]) == (doc["paths"][0]["src"], doc["paths"][0]["dst"])
    )
    assert first["rtt_us"]["ci95_by_metric"] == {"p99": [30.0, 50.0]}
    assert "ci95" not in first["rtt_us"]


@pytest.mark.parametrize(
    "interval",
    [
        {"ci95_by_metric": {"p90": [30.0, 20.0]}},
        {"ci95": {"metric": "p90", "low": 30.0, "high": 20.0}},  # an older file's form
    ],
)
def test_an_inverted_interval_exits_2_naming_the_path(
    tmp_path: Path, doc: dict[str, Any], interval: dict[str, Any]
) -> None:
    doc["paths"][3]["rtt_us"].update(interval)
    with pytest.raises(ResultsFileError) as info:
        _load_doc(tmp_path, doc)
    assert info.value.field == "paths[3].rtt_us"
    assert "the p90 95% interval is inverted: low 30 > high 20" in str(info.value)
    assert info.value.exit_code == EXIT_USAGE
