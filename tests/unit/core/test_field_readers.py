"""One base for every typed reader of a mapping (``base.fields.FieldReader``): an input
file's table, a peer's message, a results file's objects, a suspect's evidence, an RDMA
peer's connection details. Each keeps its own words; the naming of a field, a missing key,
a nested object and an enum member's wording are the base's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from netqual.agent.wire.messages import Fields as WireFields
from netqual.base.errors import BadRequestError, PolicyError, ResultsFileError
from netqual.base.fields import FieldReader, is_integer, is_number
from netqual.files.tomlfile import Fields as TomlFields
from netqual.model.run import SCHEMA_VERSION, RunKind
from netqual.model.stats import Metric
from netqual.model.suspects import SuspectKind
from netqual.results import decode, results_from_dict, suspects_codec
from netqual.transports.rdma import conninfo


def test_every_typed_reader_is_a_field_reader() -> None:
    readers = (TomlFields, WireFields, decode._Reader, suspects_codec._Reader, conninfo._Reader)
    assert all(issubclass(r, FieldReader) for r in readers)


@pytest.mark.parametrize(
    ("read", "error", "text"),
    [
        (
            lambda: TomlFields("f.toml", {}, "node[2]", PolicyError).text("port"),
            PolicyError,
            "f.toml: node[2].port: missing required field",
        ),
        (
            lambda: WireFields({}, "probe", "10.0.0.1:1").integer("port", 0, 9),
            BadRequestError,
            "probe.port: missing",
        ),
        (
            lambda: results_from_dict({"schema_version": SCHEMA_VERSION}, "r.json"),
            ResultsFileError,
            "r.json: run: missing required key",
        ),
        (
            lambda: results_from_dict({"schema_version": SCHEMA_VERSION, "run": []}, "r.json"),
            ResultsFileError,
            "r.json: run: expected an object",
        ),
        (
            lambda: suspects_codec.evidence_from_dict(SuspectKind.NODE, {}),
            ValueError,
            "evidence.metric: missing",
        ),
        (
            lambda: conninfo.ConnInfo.from_json({}, "peer"),
            conninfo.ConnInfoError,
            "peer: bad rdma connection info: field 'qpn': missing",
        ),
    ],
)
def test_a_missing_key_is_named_in_each_readers_words(
    read: Callable[[], Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as caught:
        read()
    assert text in str(caught.value)


def test_an_enum_member_reads_alike_in_a_file_a_results_object_and_a_suspect() -> None:
    toml = TomlFields("f.toml", {"metric": "p95"}, "profile", PolicyError)
    with pytest.raises(PolicyError, match=r"profile\.metric: unknown metric 'p95' \(p50, "):
        toml.choice(Metric, "metric", Metric.P99)
    with pytest.raises(ValueError, match=r"^evidence\.metric: unknown metric 'p95' \(p50, "):
        suspects_codec.evidence_from_dict(SuspectKind.NODE, {"metric": "p95"})
    rd = decode._Reader("r.json", {"run": {"kind": "bake"}}).at("run")
    with pytest.raises(ResultsFileError, match=r"r\.json: run\.kind: unknown runkind 'bake'"):
        rd.member(RunKind, rd.string("kind"), "kind")


def test_a_bool_is_neither_an_integer_nor_a_number() -> None:
    assert [is_integer(v) for v in (1, True, 1.0, "1")] == [True, False, False, False]
    assert [is_number(v) for v in (1, 1.5, False, None)] == [True, True, False, False]
