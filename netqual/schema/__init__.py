"""JSON Schema of the results file (``results.schema.json``, shipped in the package).

``validate`` turns the most relevant schema error into a ``ResultsFileError`` naming the
field as a JSON path (``paths[3].rtt_us.p99``).

Cost: pure-Python validation takes one to two milliseconds per path (references inlined),
so a 512-node full mesh (130,816 paths) would take minutes. Above ``FULL_VALIDATION_PATHS``
paths every path is still checked for the schema's required keys, and an evenly spread sample of
``FULL_VALIDATION_PATHS`` paths (first and last included) gets the full schema; the typed
reader in ``netqual.results`` then checks every value it uses.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from netqual.errors import ResultsFileError

FULL_VALIDATION_PATHS = 300


@functools.cache
def results_schema() -> dict[str, Any]:
    text = (files("netqual.schema") / "results.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _inline_refs(node: Any, defs: Mapping[str, Any]) -> Any:
    """Replace local '#/$defs/x' references by their target: resolving them costs half the time."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = results_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator: jsonschema.protocols.Validator = cls(_inline_refs(schema, schema["$defs"]))
    return validator


def json_path(parts: Sequence[str | int]) -> str:
    """['paths', 3, 'rtt_us', 'p99'] -> 'paths[3].rtt_us.p99'."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _describe(err: ValidationError, index_map: Sequence[int] | None) -> tuple[str, str]:
    parts: list[str | int] = list(err.absolute_path)
    if (
        index_map is not None
        and len(parts) >= 2
        and parts[0] == "paths"
        and isinstance(parts[1], int)
    ):
        parts[1] = index_map[parts[1]]
    expected: Any = err.validator_value
    if err.validator == "required":
        missing = [
            k for k in expected if isinstance(err.instance, Mapping) and k not in err.instance
        ]
        key = missing[0] if missing else "?"
        return json_path([*parts, key]), "missing required key"
    if err.validator == "const":
        return json_path(parts), f"is {err.instance!r}, expected {err.validator_value!r}"
    if err.validator == "enum":
        allowed = ", ".join(repr(v) for v in expected)
        return json_path(parts), f"is {err.instance!r}, expected one of {allowed}"
    if err.validator == "type":
        return json_path(parts), f"expected {err.validator_value}, got {err.instance!r:.60}"
    return json_path(parts), err.message


def validate(data: Mapping[str, Any], source: str) -> None:
    """Raise ResultsFileError for the first (most relevant) schema violation."""
    version = data.get("schema_version")
    if version is None:
        raise ResultsFileError(source, "missing required key", field="schema_version")
    if version != "1":
        raise ResultsFileError(
            source,
            f"unsupported schema_version {version!r} (this netqual reads '1')",
            field="schema_version",
        )
    doc: Mapping[str, Any] = data
    index_map: list[int] | None = None
    paths = data.get("paths")
    if isinstance(paths, list) and len(paths) > FULL_VALIDATION_PATHS:
        _check_required(paths, source)
        step = len(paths) / (FULL_VALIDATION_PATHS - 1)
        index_map = sorted(
            {min(len(paths) - 1, round(i * step)) for i in range(FULL_VALIDATION_PATHS)}
        )
        doc = {**data, "paths": [paths[i] for i in index_map]}
    err = best_match(_validator().iter_errors(doc))
    if err is not None:
        field, problem = _describe(err, index_map)
        raise ResultsFileError(source, problem, field=field)


def _check_required(paths: list[Any], source: str) -> None:
    path_schema = results_schema()["$defs"]["path"]
    required = frozenset(path_schema["required"])
    verdicts = frozenset(path_schema["properties"]["verdict"]["enum"])
    for i, p in enumerate(paths):
        if not isinstance(p, dict):
            raise ResultsFileError(source, f"expected object, got {p!r:.60}", field=f"paths[{i}]")
        if not required <= p.keys():
            key = sorted(required - p.keys())[0]
            raise ResultsFileError(source, "missing required key", field=f"paths[{i}].{key}")
        if p["verdict"] not in verdicts:
            raise ResultsFileError(
                source, f"is {p['verdict']!r}, not a verdict", field=f"paths[{i}].verdict"
            )
