"""What a run was (``run.kind``) is recorded, not guessed: written by every run and read
back as written; a file of an older version, which has none, is judged in one place
(``results.decode``) the way it always was."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from factories import make_results, write_results

from netqual.base.errors import InventoryError, ResultsFileError
from netqual.model.run import RunKind
from netqual.planning.inventory import load_inventory
from netqual.results import load


@pytest.mark.parametrize("kind", list(RunKind))
def test_the_kind_a_run_records_is_read_back(tmp_path: Path, kind: RunKind) -> None:
    res = make_results(3)
    res = dataclasses.replace(res, run=dataclasses.replace(res.run, kind=kind))
    path = write_results(tmp_path / "results.json", res)
    assert json.loads(path.read_text())["run"]["kind"] == kind.value
    assert load(path).run.kind is kind


@pytest.mark.parametrize(
    ("inventory", "retest_of", "kind"),
    [
        ("(demo loopback)", None, RunKind.DEMO),
        ("(demo lab: default)", None, RunKind.DEMO),
        ("inventory.toml", "/runs/run1", RunKind.RETEST),
        ("inventory.toml", None, RunKind.CLUSTER),
        (None, None, RunKind.CLUSTER),
    ],
)
def test_an_older_file_without_a_kind_is_judged_as_before(
    tmp_path: Path, inventory: str | None, retest_of: str | None, kind: RunKind
) -> None:
    path = write_results(tmp_path / "results.json", make_results(3))
    doc = json.loads(path.read_text())
    del doc["run"]["kind"]
    doc["run"]["inventory"] = inventory
    if retest_of is not None:
        doc["retest_of"] = retest_of
    path.write_text(json.dumps(doc))
    assert load(path).run.kind is kind


def test_an_unknown_kind_names_the_field(tmp_path: Path) -> None:
    path = write_results(tmp_path / "results.json", make_results(3))
    doc = json.loads(path.read_text())
    doc["run"]["kind"] = "benchmark"
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"run\.kind"):
        load(path)


def _inventory(tmp_path: Path, run: str) -> Path:
    path = tmp_path / "inventory.toml"
    nodes = "".join(f'[[node]]\nname = "n{i}"\naddress = "127.0.0.{i + 1}"\n' for i in range(2))
    path.write_text(f"[run]\n{run}\n{nodes}")
    return path


def test_an_inventory_says_cluster_or_lab_never_its_commands_kinds(tmp_path: Path) -> None:
    assert load_inventory(_inventory(tmp_path, "")).kind is RunKind.CLUSTER
    assert load_inventory(_inventory(tmp_path, 'kind = "lab"')).kind is RunKind.LAB
    with pytest.raises(InventoryError, match=r"run\.kind.*'demo' is its command's"):
        load_inventory(_inventory(tmp_path, 'kind = "demo"'))
