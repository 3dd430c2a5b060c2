"""Fleet findings stay linear in the fleet (issue 38): each outlier named every node of
the majority ("mtu 1400 (majority 9000 on h1, h2, ...)") in results.json, so 10% of
10,000 nodes off made 81 MB of outliers (870 KB at 1,000 nodes: x94 for x10 nodes). An
outlier now keeps the majority's count and at most a few names, and one deviation is one
line (terminal) or one row (report) naming a few of its nodes, at any fleet size: what
results.json, `check --fleet` (--json), `report`, `report --html` and `gate` show."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results
from rich.console import Console

from netqual.analysis import fleet
from netqual.model.fleet import MAJORITY_NAMED, ConfigSnapshot, FleetResult
from netqual.render.fleet import print_fleet

EVERY = 10  # one node in ten has mtu 1400, the rest 9000


def _fleet(n: int) -> tuple[list[str], FleetResult]:
    """A measured run of 4 nodes whose fleet check saw ``n`` nodes (the 4 among them)."""
    names = [x.name for x in make_results(4, samples=2000, all_safe=True).nodes]
    names += [f"n{i:05d}" for i in range(n - 4)]
    snaps = [
        ConfigSnapshot(name, (("kernel", "6.8"), ("mtu", "1400" if i % EVERY == 2 else "9000")))
        for i, name in enumerate(names)
    ]
    return names, fleet.evaluate(snaps)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = {}
    for n in (1_000, 10_000):
        _names, found = _fleet(n)
        results = dataclasses.replace(make_results(4, samples=2000, all_safe=True), fleet=found)
        out[n] = write_results(tmp_path_factory.mktemp(f"fleet{n}") / "results.json", results)
    return out


def _majorities(text: str) -> list[str]:
    """Each "majority ..." said on one line (a table cell may wrap one: left out)."""
    return re.findall(r"majority 9000 on [^)│\n]*\)", text)


def test_results_json_grows_linearly_and_names_a_few_of_the_majority(
    runs: dict[int, Path],
) -> None:
    size = {n: p.stat().st_size for n, p in runs.items()}
    # 10x the nodes (and the outliers): about 10x the bytes (x94 when every outlier listed
    # the whole majority), and under 100 bytes of outliers per node
    assert size[10_000] < 12 * size[1_000], size
    doc = json.loads(runs[10_000].read_text())
    outliers = doc["fleet"]["outliers"]
    assert len(outliers) == 1_000
    assert len(json.dumps(outliers)) < 300 * len(outliers)
    first = outliers[0]
    assert first["majority"] == "9000" and len(first["majority_nodes"]) == MAJORITY_NAMED
    assert first["majority_count"] == 9_000 and first["compared"] == 10_000


def test_check_fleet_text_and_json_are_one_line_per_deviation_at_any_size() -> None:
    said = {}
    for n in (1_000, 10_000):
        _names, found = _fleet(n)
        buf = io.StringIO()
        print_fleet(Console(file=buf, width=100, color_system=None), found, [])
        said[n] = buf.getvalue()
        outliers = [x.strip() for x in said[n].splitlines() if "outlier" in x]
        assert outliers == [
            f"outlier gpu03, n00008, n00018, n00028, n00038, n00048 and {n // EVERY - 6:,} "
            f"more: mtu 1400 (majority 9000 on {n - n // EVERY:,} of {n:,} nodes, e.g. gpu01, "
            "gpu02)"
        ]
        check_json = json.dumps(fleet.to_dict(found)["outliers"])  # check --fleet --json
        assert len(check_json) < 300 * len(found.outliers)
    assert len(said[10_000]) < len(said[1_000]) + 200, said


def test_report_gate_and_html_name_a_few_nodes_of_each_deviation(
    runs: dict[int, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sizes: dict[str, dict[int, int]] = {"report": {}, "gate": {}, "html": {}}
    for n, path in runs.items():
        report = run_in_process(["report", str(path)], tmp_path, monkeypatch, capsys)
        assert report.returncode == 0, report.stderr
        gate = run_in_process(["gate", str(path)], tmp_path, monkeypatch, capsys)
        assert gate.returncode == 1, gate.stdout + gate.stderr
        page = tmp_path / f"r{n}.html"
        html = run_in_process(
            ["report", str(path), "--html", str(page)], tmp_path, monkeypatch, capsys
        )
        assert html.returncode == 0, html.stderr
        text = page.read_text()
        for shown in (report.stdout, gate.stdout, text):
            majorities = _majorities(shown)
            assert majorities, shown[:2000]
            want = f"majority 9000 on {n - n // EVERY:,} of {n:,} nodes, e.g. gpu01, gpu02)"
            assert set(majorities) == {want}
            assert not re.search(r"majority 9000 on (\w+, ){4}", shown)  # never a list
        # the report's configuration table: one row for the one deviation, a few names
        table = text.split('id="fleet-outliers"', 1)[1].split("</table>", 1)[0]
        assert table.count("<tr") == 2, table  # the header and the deviation
        assert f"gpu03, n00008, n00018, n00028, n00038, n00048 and {n // EVERY - 6:,} more" in table
        sizes["report"][n] = len(report.stdout)
        sizes["gate"][n] = len(gate.stdout)
        sizes["html"][n] = len(text)
    for what, by_n in sizes.items():  # bounded: the outliers are counted, not listed
        assert by_n[10_000] < 1.5 * by_n[1_000], (what, by_n)


def test_an_older_file_listing_the_whole_majority_reads_as_a_count(tmp_path: Path) -> None:
    names, found = _fleet(40)
    doc = fleet.to_dict(found)
    holders = [nm for nm in names if doc["snapshot"][nm]["mtu"] == "9000"]
    for item in doc["outliers"]:
        del item["majority_count"], item["compared"]
        item["majority_nodes"] = holders  # as netqual wrote it before the count
    back = fleet.from_dict(doc, "old.json")
    first = back.outliers[0]
    assert first.holders == 36 and len(first.majority_nodes) == MAJORITY_NAMED
    assert first.against == "majority 9000 on 36 nodes, e.g. gpu01, gpu02"
    # a hostile count is refused, naming the field
    doc["outliers"][0]["majority_count"] = -1
    with pytest.raises(Exception, match=r"fleet.outliers\[0\].majority_count: must be a count"):
        fleet.from_dict(doc, "bad.json")
