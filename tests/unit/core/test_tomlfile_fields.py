"""The one TOML field reader (``tomlfile.Fields``): each typed read names file and dotted
field, and the same mistake reads the same in every kind of input file."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netqual.analysis.policy import load_policy
from netqual.base.errors import InputError, PolicyError
from netqual.campaign.config import load_campaign
from netqual.files.tomlfile import Fields
from netqual.gate.profile import load_profile
from netqual.lab.topology import load as load_topology
from netqual.model.node import Role
from netqual.model.stats import Metric
from netqual.planning.inventory import load_inventory
from netqual.workload.load import load_workload


def fields(table: dict[str, Any], prefix: str = "t") -> Fields:
    return Fields("f.toml", table, prefix, PolicyError)


@pytest.mark.parametrize(
    ("read", "table", "field", "words"),
    [
        (lambda f: f.sub("x", {"a"}), {"x": 1}, "t.x", "expected a table"),
        (lambda f: f.sub("x", {"a"}), {"x": {"b": 1}}, "t.x.b", "unknown key (allowed: a)"),
        (lambda f: f.sub("x", missing="missing [x] table"), {}, "t.x", "missing [x] table"),
        (lambda f: f.tables("x"), {"x": {"a": 1}}, "t.x", "expected an array of tables ([[x]])"),
        (lambda f: f.tables("x"), {"x": [{}, 3]}, "t.x[1]", "expected a table"),
        (lambda f: f.tables("x", {"a"}), {"x": [{"b": 1}]}, "t.x[0].b", "unknown key"),
        (lambda f: f.text("x"), {}, "t.x", "missing required field"),
        (lambda f: f.text("x"), {"x": " "}, "t.x", "expected a non-empty string, got ' '"),
        (lambda f: f.strings("x"), {"x": ["a", 1]}, "t.x", "expected a list of strings"),
        (lambda f: f.choice(Metric, "x", Metric.P99), {"x": "p95"}, "t.x", "unknown metric 'p95'"),
        (lambda f: f.choices(Role, "x"), {"x": ["gpu"]}, "t.x", "unknown role 'gpu'"),
        (lambda f: f.flag("x"), {"x": 1}, "t.x", "expected true or false, got 1"),
        (lambda f: f.integer("x", 0), {"x": 1.5}, "t.x", "expected an integer, got 1.5"),
        (lambda f: f.integer("x", 0, high=3), {"x": 4}, "t.x", "must be <= 3, got 4"),
        (lambda f: f.count("x"), {"x": -1}, "t.x", "expected a non-negative integer, got -1"),
        (lambda f: f.number("x", 1.0), {"x": True}, "t.x", "expected a number, got True"),
        (lambda f: f.number("x", 1.0), {"x": 0}, "t.x", "must be a positive number, got 0"),
        (lambda f: f.maybe_number("x", low=2), {"x": 1}, "t.x", "must be >= 2, got 1"),
        (lambda f: f.date("x", required=True), {}, "t.x", "missing required field"),
        (lambda f: f.date("x"), {"x": "soon"}, "t.x", "not a date: 'soon' (use 2026-12-31)"),
        (lambda f: f.date("x"), {"x": dt.datetime(2026, 1, 1)}, "t.x", "expected a date like"),
        (lambda f: f.table_of_strings("x"), {"x": {"a": 1}}, "t.x", "a table of string values"),
        (lambda f: f.sub("x").fail("", "bad"), {"x": {}}, "t.x", "bad"),
    ],
)
def test_every_read_names_file_and_dotted_field(
    read: Callable[[Fields], Any], table: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(PolicyError) as info:
        raised = read(fields(table))
        if isinstance(raised, InputError):  # fail() returns the error for the caller to raise
            raise raised
    assert info.value.field == field
    assert str(info.value).startswith(f"f.toml: {field}: ")
    assert words in str(info.value)


def test_reads_give_typed_values_and_defaults() -> None:
    f = fields(
        {
            "s": " a ",
            "m": "p50",
            "r": ["storage"],
            "d": "2026-12-31",
            "t": [{"n": 1}],
            "sub": {"k": 2},
        }
    )
    assert f.text("s") == "a" and f.text("absent", "dflt") == "dflt"
    assert f.choice(Metric, "m", Metric.P99) is Metric.P50
    assert f.choice(Metric, "absent", Metric.P99) is Metric.P99
    assert f.choices(Role, "r") == frozenset({Role.STORAGE})
    assert f.date("d") == dt.date(2026, 12, 31) and f.date("absent") is None
    assert f.maybe_number("absent") is None
    assert [t.prefix for t in f.tables("t")] == ["t.t[0]"]
    assert f.sub("sub", {"k"}).integer("k", 0) == 2
    assert f.flag("absent", True) is True and f.count("absent") == 0


INVENTORY_HEAD = '[[node]]\nname = "a"\naddress = "127.0.0.1"\n'
SMALL_LAB = """
[lab]
name = "small"
[[host]]
name = "a"
rack = "r1"
[[router]]
name = "leaf"
[[link]]
a = "a"
b = "leaf"
"""


@pytest.mark.parametrize(
    ("name", "text", "load", "field"),
    [
        ("inventory.toml", INVENTORY_HEAD + 'port = "x"\n', load_inventory, "node[0].port"),
        ("policy.toml", '[policy]\nmin_samples = "x"\n', load_policy, "policy.min_samples"),
        ("workload.toml", '[workload]\nlayers = "x"\n', None, "workload.layers"),
        ("profile.toml", '[limits]\nmax_unsafe = "x"\n', load_profile, "limits.max_unsafe"),
        ("lab.toml", SMALL_LAB.replace('"small"', '"small"\nmtu = "x"'), load_topology, "lab.mtu"),
        ("campaign.toml", '[campaign]\nweeks = "x"\n', None, "campaign.weeks"),
    ],
)
def test_each_input_file_names_file_and_field_through_the_one_reader(
    tmp_path: Path, name: str, text: str, load: Callable[[Path], object] | None, field: str
) -> None:
    """A wrong type in any input file: exit 2 (usage), the file's path and the dotted field
    first, then the one wording ``Fields`` gives that type."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        if name == "workload.toml":
            load_workload(path)
        elif name == "campaign.toml":
            load_campaign(tmp_path)
        else:
            assert load is not None
            load(path)
    assert info.value.field == field
    assert str(info.value).startswith(f"{path}: {field}: ")
    assert "got 'x'" in str(info.value)
    assert info.value.exit_code == 2
