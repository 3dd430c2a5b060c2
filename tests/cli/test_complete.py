"""Completeness is part of every verdict: the gate's ``complete`` rule, runs that schedule
nothing, and the report of a run that did not measure every scheduled pair."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import ROOT, Run, run_in_process
from factories import make_results, write_results

from netqual.model.path import NotMeasured
from netqual.results import journal, summarize
from netqual.table.paths import PathTable
from netqual.table.run import Results

PROFILES = ROOT / "docs" / "gate-profiles"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def interrupted(measured: int, n_nodes: int = 8) -> Results:
    """An all-safe full mesh of ``n_nodes`` stopped after ``measured`` of its pairs."""
    full = make_results(n_nodes, all_safe=True)
    table = full.paths
    rows = [table.row(i) for i in range(measured)]
    planned = len(table)
    run = dataclasses.replace(
        full.run, complete=False, pairs_planned=planned, inventory="inventory.toml"
    )
    paths = PathTable.from_paths(rows, table.names)
    return dataclasses.replace(
        full, run=run, paths=paths, summary=summarize(paths, full.run.policy.metric)
    )


def junit_case(path: Path, name: str) -> ET.Element:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return next(c for c in suite.iter("testcase") if c.get("name") == name)


def test_interrupted_run_fails_the_gate_with_a_failing_junit_testcase(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    write_results(tmp_path / "results.json", interrupted(5))
    r = cli("gate", "results.json", "--junit", "gate.xml", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "complete     │ FAIL" in r.stdout
    assert "23 of 28 scheduled pairs were not measured (run interrupted)" in r.stdout
    assert "netqual run inventory.toml --out . --resume" in r.stdout
    assert "GATE FAILED" in r.stdout and "(complete)" in r.stdout
    case = junit_case(tmp_path / "gate.xml", "complete")
    failure = case.find("failure")
    assert failure is not None and "23 of 28" in failure.get("message", "")
    suite = ET.parse(tmp_path / "gate.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"


def test_pairs_whose_bulk_phase_never_ran_are_not_measured(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """Issue 36: a run stopped in its bulk phase (11 of 28 pairs with ping-pong only) said
    "INCOMPLETE (run interrupted, 28 of 28 pairs measured)" and passed `complete`."""
    res = interrupted(28)
    rows = [res.paths.row(i) for i in range(len(res.paths))]
    rows = rows[:17] + [journal.as_pending(p) for p in rows[17:]]
    paths = PathTable.from_paths(rows, res.paths.names)
    res = dataclasses.replace(res, paths=paths, summary=summarize(paths, res.run.policy.metric))
    write_results(tmp_path / "results.json", res)
    r = cli("gate", "results.json", "--junit", "gate.xml", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    said = " ".join(r.stdout.split())
    assert (
        "INCOMPLETE (run interrupted, 17 of 28 pairs measured, 11 more with ping-pong only)" in said
    ), said
    doc = json.loads(cli("gate", "results.json", "--json", cwd=tmp_path).stdout)
    (rule,) = [x for x in doc["rules"] if x["name"] == "complete"]
    assert rule["status"] == "fail" and rule["message"].startswith(
        "11 of 28 scheduled pairs were not measured (run interrupted, 11 with ping-pong only:"
        " their bulk phase never ran)"
    ), rule
    assert junit_case(tmp_path / "gate.xml", "complete").find("failure") is not None
    r = cli("report", "results.json", cwd=tmp_path)
    assert "11 of 28 pairs not measured: finish the run" in " ".join(r.stdout.split())


@pytest.mark.parametrize("profile", ["preflight.toml", "requalify.toml", "signoff.toml"])
def test_shipped_profiles_fail_an_interrupted_run(
    tmp_path: Path, cli: Callable[..., Run], profile: str
) -> None:
    write_results(tmp_path / "results.json", interrupted(5))
    write_results(tmp_path / "baseline.json", make_results(8, all_safe=True))
    r = cli(
        "gate", "results.json", "--profile", str(PROFILES / profile), "--baseline",
        "baseline.json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "complete" in r.stdout.split("GATE FAILED")[1]


def test_allow_incomplete_relaxes_the_rule_and_says_so(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    write_results(tmp_path / "results.json", interrupted(5))
    r = cli("gate", "results.json", "--allow-incomplete", "--junit", "g.xml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "complete     │ SKIP   │ relaxed by --allow-incomplete: 23 of 28" in r.stdout
    assert "warning: INCOMPLETE (run interrupted, 5 of 28 pairs measured)" in r.stdout
    skipped = junit_case(tmp_path / "g.xml", "complete").find("skipped")
    assert skipped is not None and "relaxed by --allow-incomplete" in skipped.get("message", "")


def test_a_profile_can_relax_it_explicitly(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_results(tmp_path / "results.json", interrupted(5))
    (tmp_path / "p.toml").write_text("[limits]\ncomplete = false\nmax_unsafe = 0\n")
    r = cli("gate", "results.json", "--profile", "p.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "relaxed by complete = false: 23 of 28" in r.stdout
    (tmp_path / "bad.toml").write_text('[limits]\ncomplete = "no"\nmax_unsafe = 0\n')
    bad = cli("gate", "results.json", "--profile", "bad.toml", cwd=tmp_path)
    assert bad.returncode == 2 and "limits.complete: expected true or false" in bad.stderr


def test_nothing_measured_fails_even_when_relaxed(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_results(tmp_path / "results.json", interrupted(0))
    r = cli("gate", "results.json", "--allow-incomplete", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no pair measured (0 of 28 scheduled)" in r.stdout


def test_a_run_that_scheduled_nothing_is_a_usage_error(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    res = interrupted(0)
    write_results(tmp_path / "results.json", dataclasses.replace(
        res, run=dataclasses.replace(res.run, complete=True, pairs_planned=0)
    ))  # fmt: skip
    r = cli("gate", "results.json", cwd=tmp_path)
    assert r.returncode == 2
    assert "the run scheduled 0 pairs" in r.stderr


def test_complete_run_passes_and_old_files_without_a_count_still_do(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    full = make_results(8, all_safe=True)
    counted = dataclasses.replace(full, run=dataclasses.replace(full.run, pairs_planned=28))
    write_results(tmp_path / "new.json", counted)
    write_results(tmp_path / "old.json", full)  # pairs_planned None: a file of an older version
    assert '"pairs_planned":28' in (tmp_path / "new.json").read_text()
    for name in ("new.json", "old.json"):
        r = cli("gate", name, cwd=tmp_path)
        assert r.returncode == 0, r.stdout
        assert "complete     │ PASS   │ every scheduled pair measured (28)" in r.stdout


def test_configuration_failures_are_findings_of_the_rule_not_paths(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    res = interrupted(21)  # gpu08's 7 pairs are the last 7 rows
    skipped = tuple(
        NotMeasured(f"gpu0{i}", "gpu08", "gpu08 failed the pre-flight check: token rejected")
        for i in range(1, 8)
    )
    res = dataclasses.replace(
        res, run=dataclasses.replace(res.run, complete=True), not_measured=skipped
    )
    write_results(tmp_path / "results.json", res)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["not_measured"][0] == {
        "src": "gpu01",
        "dst": "gpu08",
        "kind": "configuration",
        "reason": "gpu08 failed the pre-flight check: token rejected",
    }
    assert "complete" not in doc["run"]  # not interrupted: the key stays absent
    r = cli("gate", "results.json", cwd=tmp_path)
    assert r.returncode == 1
    as_json = cli("gate", "results.json", "--json", cwd=tmp_path)
    rule = json.loads(as_json.stdout)["rules"][0]
    assert rule["name"] == "complete" and rule["status"] == "fail"
    assert rule["message"].startswith(
        "7 of 28 scheduled pairs were not measured (7 by a configuration failure); "
        "fix the configuration (netqual check), then finish the run"
    )
    assert "gpu01 -> gpu08  not measured (configuration): gpu08 failed the pre-flight" in r.stdout
    assert "unsafe" not in r.stdout.split("complete: failing paths")[1]


def test_report_of_an_incomplete_run_is_not_green_and_advises_resume(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    write_results(tmp_path / "results.json", interrupted(5))
    r = cli("report", "results.json", "--html", "report.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[:3]
    assert first[0].startswith("INCOMPLETE (run interrupted, 5 of 28 pairs measured)")
    assert any("23 of 28 pairs not measured: finish the run" in line for line in first)
    assert any("--resume" in line for line in first)
    html = (tmp_path / "report.html").read_text()
    header = html.split("<header")[1].split("</header>")[0]
    assert "all-safe" not in header
    assert 'id="incomplete"' in header and "23 of 28 pairs not measured" in header
    assert "--resume" in header
    todo = html.split('id="recommendations"')[1].split("</section>")[0]
    assert "go live" not in todo
    first_rec = todo.split('<div class="rec ')[1]
    assert first_rec.startswith("unsafe") and "Incomplete run: 23 of 28 pairs" in first_rec
    assert "--resume" in first_rec


def test_complete_all_safe_report_stays_green(tmp_path: Path, cli: Callable[..., Run]) -> None:
    full = make_results(8, all_safe=True)
    counted = dataclasses.replace(full, run=dataclasses.replace(full.run, pairs_planned=28))
    write_results(tmp_path / "results.json", counted)
    cli("report", "results.json", "--html", "report.html", cwd=tmp_path)
    header = (tmp_path / "report.html").read_text().split("<header")[1].split("</header>")[0]
    assert "all-safe" in header and 'id="incomplete"' not in header
