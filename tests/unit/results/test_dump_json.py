"""``dump_json`` streams the paths one by one yet writes exactly what ``json.dumps`` of the
whole document writes: results.json (compact) and the ``--json`` of run and report
(indent 1) come from this one writer."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results

from netqual.analysis.decision import decide
from netqual.model.stats import Metric
from netqual.results import dump_json, results_to_dict, summarize
from netqual.table.paths import PathTable


@pytest.mark.parametrize("indent", [None, 1, 2])
@pytest.mark.parametrize("n_paths", ["some", "none"])
def test_streamed_document_is_byte_for_byte_json_dumps(indent: int | None, n_paths: str) -> None:
    res = make_results(6, slow_nodes=["gpu03"], error_paths=1)
    if n_paths == "none":
        res = dataclasses.replace(res, paths=PathTable.empty(), summary=summarize((), Metric.P99))
    out = io.StringIO()
    dump_json(out, res, indent)
    style = {"indent": indent} if indent else {"separators": (",", ":")}
    assert out.getvalue() == json.dumps(results_to_dict(res), **style)


def test_report_json_prints_the_streamed_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    res = decide(make_results(5, slow_nodes=["gpu02"]))
    f = write_results(tmp_path / "results.json", res)
    done = run_in_process(["report", str(f), "--json"], tmp_path, monkeypatch, capsys)
    assert done.returncode == 0, done.stderr
    assert done.stdout == json.dumps(results_to_dict(res), indent=1) + "\n"
