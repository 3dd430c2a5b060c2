"""netqual.planning.options: the plan from the defaults, a [probe] table and the options;
``--bulk-bytes`` / ``bulk_bytes`` (bytes per bulk cell) here, the others in test_inventory."""

from __future__ import annotations

import pytest

from netqual.base.errors import InputError, UsageError
from netqual.base.units import KIB, MIB
from netqual.model.plan import ProbePlan
from netqual.planning.limits import limit_problem
from netqual.planning.options import from_table, override


def test_bulk_bytes_sets_the_reads_of_every_cell() -> None:
    plan = override(ProbePlan(), chunks=["64KiB", "1MiB"], bulk_bytes="8MiB")
    assert plan.bulk_bytes == 8 * MIB
    assert plan.reads_for(64 * KIB) == 128  # 8 MiB of 64 KiB chunks
    assert plan.reads_for(1 * MIB) == 32  # 8 would do: min_reads keeps the cell's 32
    assert ProbePlan().reads_for(64 * KIB) == 2048  # the default, 128 MiB, unchanged
    assert override(ProbePlan(), bulk_bytes=1_000_000).bulk_bytes == 1_000_000


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("0", "must be positive, got '0'"),
        (-1, "must not be negative"),
        ("lots", "not a size"),
        ("8M", "ambiguous"),
        (str(1 << 51), "<= 1125899906842624"),
    ],
)
def test_bad_bulk_bytes_names_the_option(value: str | int, words: str) -> None:
    with pytest.raises(UsageError) as info:
        override(ProbePlan(), bulk_bytes=value)
    assert info.value.field == "--bulk-bytes"
    assert words in info.value.problem


@pytest.mark.parametrize("key", ["bulk_bytes", "bulk-bytes"])
def test_probe_table_key_in_either_spelling(key: str) -> None:
    plan = from_table(ProbePlan(), {key: "16MiB", "chunk": "1MiB"}, "inv.toml")
    assert plan.bulk_bytes == 16 * MIB and plan.reads_for(1 * MIB) == 32
    assert from_table(ProbePlan(), {key: 4096}, "inv.toml").bulk_bytes == 4096


def test_probe_table_bad_bulk_bytes_names_the_key() -> None:
    with pytest.raises(InputError) as info:
        from_table(ProbePlan(), {"bulk_bytes": 0}, "inv.toml")
    assert info.value.field == "probe.bulk-bytes" and "must be positive" in str(info.value)


def test_a_cell_over_the_agents_limit_blames_the_option_that_made_it() -> None:
    # 100 GiB per cell is 1,638,400 reads of 64 KiB: over max_reads (1,048,576)
    found = limit_problem(override(ProbePlan(), bulk_bytes="100GiB"))
    assert found is not None and found[0] == "--bulk-bytes", found
    # a 64-byte chunk is over it at the default 128 MiB: the chunk is the cause
    found = limit_problem(override(ProbePlan(), chunks=["64"]))
    assert found is not None and found[0] == "--chunk", found
    assert limit_problem(override(ProbePlan(), bulk_bytes="8MiB")) is None
