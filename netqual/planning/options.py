"""Building a ProbePlan from defaults, an inventory [probe] table and command-line options."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from netqual.base.errors import InputError, UsageError
from netqual.base.units import parse_size
from netqual.files.tomlfile import Fields
from netqual.model.plan import PlanFieldError, ProbePlan

# ProbePlan field -> the option (and, without the dashes, the [probe] key) that sets it.
_OPTIONS = {
    "iterations": "--iterations",
    "warmup": "--warmup",
    "size_bytes": "--size",
    "chunks_bytes": "--chunk",
    "depths": "--depth",
    "bulk": "--no-bulk",
    "timeout_s": "--timeout",
    "bulk_bytes": "--bulk-bytes",
    "min_reads": "--chunk",
}
PLAN_KEYS = {
    "iterations", "warmup", "size", "chunk", "depth", "no-bulk", "no_bulk", "timeout",
    "bulk-bytes", "bulk_bytes",
}  # fmt: skip


def _sizes(values: Sequence[str | int], option: str) -> tuple[int, ...]:
    out = []
    for v in values:
        try:
            n = parse_size(v)
        except ValueError as err:
            raise UsageError(option, str(err)) from err
        if n <= 0:
            raise UsageError(option, f"must be positive, got {v!r}")
        out.append(n)
    return tuple(out)


def override(
    base: ProbePlan,
    *,
    iterations: int | None = None,
    warmup: int | None = None,
    size: str | int | None = None,
    chunks: Sequence[str | int] | None = None,
    depths: Sequence[int] | None = None,
    no_bulk: bool | None = None,
    timeout_s: float | None = None,
    bulk_bytes: str | int | None = None,
) -> ProbePlan:
    """Return base with the given options applied; raises UsageError on bad values."""
    changes: dict[str, Any] = {}
    if iterations is not None:
        changes["iterations"] = iterations
    if warmup is not None:
        changes["warmup"] = warmup
    if size is not None:
        (changes["size_bytes"],) = _sizes([size], "--size")
    if chunks:
        changes["chunks_bytes"] = _sizes(chunks, "--chunk")
    if depths:
        changes["depths"] = tuple(depths)
    if no_bulk:
        changes["bulk"] = False
    if timeout_s is not None:
        changes["timeout_s"] = timeout_s
    if bulk_bytes is not None:
        (changes["bulk_bytes"],) = _sizes([bulk_bytes], "--bulk-bytes")
    try:
        return dataclasses.replace(base, **changes)
    except PlanFieldError as err:
        raise UsageError(_OPTIONS[err.field], err.problem) from err


def from_table(
    base: ProbePlan,
    table: Mapping[str, Any],
    source: str,
    error: Callable[[str, str, str | None], InputError] = InputError,
) -> ProbePlan:
    """Apply an inventory ``[probe]`` table (same names as the options)."""
    Fields(source, table, "probe", error).check_keys(PLAN_KEYS)

    def as_list(key: str) -> list[Any] | None:
        v = table.get(key)
        return None if v is None else (v if isinstance(v, list) else [v])

    try:
        return override(
            base,
            iterations=table.get("iterations"),
            warmup=table.get("warmup"),
            size=table.get("size"),
            chunks=as_list("chunk"),
            depths=as_list("depth"),
            no_bulk=bool(table.get("no-bulk", table.get("no_bulk", False))),
            timeout_s=table.get("timeout"),
            bulk_bytes=table.get("bulk-bytes", table.get("bulk_bytes")),
        )
    except UsageError as err:
        raise error(source, err.problem, "probe." + (err.field or "").lstrip("-")) from err
    except TypeError as err:
        raise error(source, f"wrong type in [probe]: {err}", "probe") from err
