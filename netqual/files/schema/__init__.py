"""JSON Schema of the results file (``results.schema.json``, shipped in the package).

``validate`` turns the most relevant schema error into a ``ResultsFileError`` naming the
field as a JSON path (``paths[3].rtt_us.p99``).

Cost: pure-Python validation takes one to two milliseconds per path, so ``load`` validates
everything but the paths here and checks every path with the typed decoder
(``netqual.results.wirepath``, the schema's path definition as msgspec types); a test keeps
the two definitions rejecting the same paths.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from netqual.base.errors import ResultsFileError
from netqual.model.run import SCHEMA_VERSION


@functools.cache
def results_schema() -> dict[str, Any]:
    text = (files("netqual.files.schema") / "results.schema.json").read_text(encoding="utf-8")
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
    # The schema ships with the package: tests/cli/test_schema.py checks it against its
    # meta-schema once, rather than every process that reads a results file (~95 ms each).
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


def _describe(err: ValidationError) -> tuple[str, str]:
    parts: list[str | int] = list(err.absolute_path)
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
    if version != SCHEMA_VERSION:
        raise ResultsFileError(
            source,
            f"unsupported schema_version {version!r} (this netqual reads {SCHEMA_VERSION!r})",
            field="schema_version",
        )
    err = best_match(_validator().iter_errors(data))
    if err is not None:
        field, problem = _describe(err)
        raise ResultsFileError(source, problem, field=field)
