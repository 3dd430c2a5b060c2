"""results.jsonl's record kinds come from one registry (results.journal.RECORDS): the
writers write them, the reader reads them by it, an unknown kind is an error naming the
line, and docs/results.md's table lists exactly the registered kinds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from factories import make_results

from netqual.base.errors import ResultsFileError
from netqual.results import journal
from netqual.results.journal import PATH, RECORDS

DOCS = Path(__file__).parents[3] / "docs" / "results.md"


def test_docs_list_every_record_kind_and_no_other() -> None:
    section = DOCS.read_text().split("## results.jsonl", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    rows = rows[1:]  # the header
    named = [m[1] for line in rows if (m := re.search(r'"record": "([a-z-]+)"', line))]
    assert len(rows) == len(RECORDS)
    assert sorted(named) == sorted(k for k in RECORDS if k != PATH)
    assert rows[0].startswith("| a path object")


def test_every_kind_written_is_read_back_by_the_registry(tmp_path: Path) -> None:
    res = make_results(3)
    paths = list(res.paths)
    path = tmp_path / "results.jsonl"
    with path.open("w") as f:
        journal.append_pingpong(f, paths[0])
        journal.append_path(f, paths[1])
        journal.append_sample(f, [paths[0].key])
        journal.append_alone(f, paths[0])
    got = journal.read(path)
    assert list(got.done) == [paths[1].key] and list(got.pending) == [paths[0].key]
    assert got.sample == (paths[0].key,) and list(got.alone) == [paths[0].key]


def test_an_unknown_kind_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"record": "benchmark", "x": 1}\n{"record": "alone", "path": {}}\n')
    with pytest.raises(ResultsFileError, match=r"line 1\.record: unknown record kind 'benchmark'"):
        journal.read(path)
