"""The gate judges the columns of a PathTable: scopes, waivers, the baseline join and the
findings it lists must say the same as the per-path definitions in docs/gates.md, however
the two runs order their nodes and paths, and a run with many failing paths still prints a
bounded terminal report."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import Run, run_in_process
from factories import make_results, write_results

from netqual.gate import GateReport, Profile, Scope, Status, evaluate, parse_profile_text
from netqual.gate.junit import MAX_LISTED_PATHS
from netqual.gate.regression import NoMissingPaths
from netqual.model.path import PathResult
from netqual.model.stats import Metric
from netqual.render.gate import MAX_PATHS_SHOWN
from netqual.table.paths import PathTable
from netqual.table.run import Results

TODAY = dt.date(2026, 11, 29)
WAIVER = """
[[waiver]]
src = "{src}"
dst = "{dst}"
until = 2026-12-31
reason = "cable"
owner = "netops"
"""


def _gate(results: Results, profile: str, baseline: Results | None = None) -> GateReport:
    return evaluate(results, parse_profile_text(profile, "p.toml"), today=TODAY, baseline=baseline)


def _rule(report: GateReport, name: str) -> tuple[Status, list[str], list[str]]:
    o = next(o for o in report.outcomes if o.rule == name)
    return (
        o.status,
        [f"{f.label}: {f.detail}" for f in o.failing],
        [f"{f.label}: {f.detail}" for f in o.waived],
    )


def _rebuilt(results: Results, paths: Iterable[PathResult], names: Iterable[str]) -> Results:
    """The run with other paths, its table coded in another node order."""
    return replace(results, paths=PathTable.from_paths(list(paths), tuple(names)))


def _flipped(p: PathResult) -> PathResult:
    return replace(p, src=p.dst, dst=p.src)


def test_a_waiver_excuses_its_path_measured_in_the_other_direction() -> None:
    res = make_results(6, slow_paths=[("gpu03", "stor01", 812.0)])
    report = _gate(res, "[limits]\nmax_unsafe = 0\n" + WAIVER.format(src="stor01", dst="gpu03"))
    status, failing, waived = _rule(report, "max_unsafe")
    assert status is Status.PASS
    assert failing == []
    assert waived == ["gpu03 -> stor01: unsafe, p99 812.0 us"]
    assert report.waivers[0].used_by == ("max_unsafe",)
    assert report.notes == ()  # it names a measured path: no warning


def test_a_node_scope_sees_every_path_touching_its_nodes_and_no_other() -> None:
    res = make_results(
        6, slow_paths=[("gpu01", "gpu05", 900.0), ("gpu01", "gpu02", 700.0)], error_paths=0
    )
    text = '[limits]\nmax_unsafe = 9\n[[scope]]\nname = "g5"\nnodes = ["gpu05"]\nmax_unsafe = 0\n'
    report = _gate(res, text)
    assert _rule(report, "g5: max_unsafe")[1] == ["gpu01 -> gpu05: unsafe, p99 900.0 us"]
    assert _rule(report, "max_unsafe")[0] is Status.PASS


def test_paths_without_rtt_fail_metric_and_sample_rules_with_their_error() -> None:
    res = make_results(6, all_safe=True)
    broken = [replace(p, rtt=None, bulk=(), error="timeout") if i == 4 else p
              for i, p in enumerate(res.paths)]  # fmt: skip
    res = _rebuilt(res, broken, res.paths.names)
    label = res.paths.row(4).src + " -> " + res.paths.row(4).dst
    report = _gate(res, "[limits]\nmax_metric_us = 500\nmin_samples = 100\nno_errors = true\n")
    assert res.paths.row(4).verdict.value == "offload-safe"  # stored, and wrong
    # the gate judges the values: a path that failed is unsafe whatever it was stored as
    assert _rule(report, "max_metric_us")[1] == [f"{label}: unsafe, error: timeout"]
    assert _rule(report, "min_samples")[1] == [f"{label}: 0 samples"]
    assert _rule(report, "no_errors")[1] == [f"{label}: error: timeout"]


def test_a_workload_rule_on_a_run_without_workload_fails_every_path_in_scope() -> None:
    res = make_results(4, all_safe=True)
    report = _gate(res, '[limits]\nmin_workload_verdict = "marginal"\n')
    status, failing, _ = _rule(report, "min_workload_verdict")
    assert status is Status.FAIL
    assert len(failing) == len(res.paths) == 6
    assert failing[0].endswith(": no workload verdict (run, report or gate with --workload)")


REGRESSION = """
[baseline]
max_p99_increase_pct = 25
min_delta_us = 5
no_class_drop = true
no_missing_paths = true
"""


def test_the_baseline_joins_by_name_in_either_direction_whatever_its_node_order() -> None:
    new = make_results(6, slow_paths=[("gpu03", "stor01", 812.0)])
    old = make_results(6, slow_paths=[("gpu03", "stor01", 260.0)])
    # the old run measured every path the other way round and lists its nodes backwards
    old = _rebuilt(old, map(_flipped, old.paths), reversed(old.paths.names))
    report = _gate(new, REGRESSION, baseline=old)
    assert _rule(report, "max_p99_increase_pct")[1] == [
        "gpu03 -> stor01: p99 260.0 -> 812.0 us (+212%)"
    ]
    assert _rule(report, "no_class_drop")[1] == ["gpu03 -> stor01: marginal -> unsafe"]
    assert _rule(report, "no_missing_paths")[0] is Status.PASS


def test_a_key_the_baseline_measured_twice_stands_for_its_last_measurement() -> None:
    new = make_results(6, slow_paths=[("gpu03", "stor01", 157.0)])
    first = make_results(6, slow_paths=[("gpu03", "stor01", 100.0)])
    retest = make_results(6, slow_paths=[("gpu03", "stor01", 150.0)])
    (row,) = retest.paths.rows_of([("gpu03", "stor01")])
    assert row is not None
    old = _rebuilt(first, [*first.paths, retest.paths.row(row)], first.paths.names)
    report = _gate(new, REGRESSION, baseline=old)
    assert _rule(report, "max_p99_increase_pct")[1] == []  # 150 -> 157: +5%
    assert _rule(report, "no_missing_paths")[0] is Status.PASS


def test_missing_baseline_paths_are_listed_in_baseline_order_and_can_be_waived() -> None:
    old = make_results(6, all_safe=True)
    gone = [("gpu04", "gpu05"), ("gpu01", "gpu02"), ("gpu02", "gpu03"), ("gpu01", "gpu04")]
    # the new run codes its nodes in another order: the listing follows the baseline's
    new = _rebuilt(old, [p for p in old.paths if p.key not in gone], reversed(old.paths.names))
    text = REGRESSION + WAIVER.format(src="gpu02", dst="gpu01")
    status, failing, waived = _rule(_gate(new, text, baseline=old), "no_missing_paths")
    assert status is Status.FAIL
    assert failing == [
        "gpu01 -> gpu04: in the baseline, not measured now",
        "gpu02 -> gpu03: in the baseline, not measured now",
        "gpu04 -> gpu05: in the baseline, not measured now",
    ]
    assert waived == ["gpu01 -> gpu02: in the baseline, not measured now"]


def test_a_scoped_missing_paths_rule_judges_the_baseline_paths_of_its_scope() -> None:
    old = make_results(6, all_safe=True)  # rack r02: gpu04, gpu05
    gone = [("gpu01", "gpu02"), ("gpu04", "gpu05"), ("gpu01", "gpu04")]
    new = _rebuilt(old, [p for p in old.paths if p.key not in gone], old.paths.names)
    rule = NoMissingPaths(Scope(name="r02", racks=frozenset({"r02"})))
    profile = Profile("p", "", "p.toml", Metric.P99, (rule,))
    report = evaluate(new, profile, today=TODAY, baseline=old)
    assert [f.label for f in report.outcomes[0].failing] == ["gpu01 -> gpu04", "gpu04 -> gpu05"]


def test_a_waiver_for_an_unmeasured_path_or_unknown_node_is_a_warning() -> None:
    res = make_results(6, all_safe=True)
    res = _rebuilt(res, [p for p in res.paths if p.key != ("gpu01", "gpu02")], res.paths.names)
    text = "[limits]\nmax_unsafe = 0\n"
    text += WAIVER.format(src="gpu02", dst="gpu01") + WAIVER.format(src="gpu09", dst="gpu01")
    text += WAIVER.format(src="gpu04", dst="gpu03")
    assert _gate(res, text).notes == (
        "waiver gpu02 -> gpu01 names a path this run did not measure: it excuses nothing",
        "waiver gpu09 -> gpu01 names 'gpu09', not a node of this run (a typo, or another "
        "inventory?): it excuses nothing",
    )


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def test_thousands_of_failing_paths_print_a_bounded_report(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    res = make_results(64, marginal_fraction=0.2, slow_nodes=["gpu01"], error_paths=3)
    write_results(tmp_path / "r.json", res)
    failing = {v.value: n for v, n in res.paths.counts().items()}
    assert failing["marginal"] > MAX_LISTED_PATHS
    r = cli("gate", "r.json", "--junit", "j.xml", cwd=tmp_path)
    assert r.returncode == 1
    listed = [line for line in r.stdout.splitlines() if line.startswith("  ") and " -> " in line]
    # no_blocking (what blocks names paths too), max_unsafe, max_marginal; 3 errors
    assert len(listed) == 3 * MAX_PATHS_SHOWN + 3
    more = failing["marginal"] - MAX_PATHS_SHOWN
    assert f"  ... and {more} more (see --json or --junit)" in r.stdout
    junit = ET.parse(tmp_path / "j.xml").getroot()
    marginal = next(c for c in junit.iter("testcase") if c.get("name") == "max_marginal")
    text = (marginal.findtext("failure") or "").splitlines()
    assert len(text) == MAX_LISTED_PATHS + 1
    assert text[-1] == f"... and {failing['marginal'] - MAX_LISTED_PATHS} more"
    doc = json.loads(cli("gate", "r.json", "--json", cwd=tmp_path).stdout)
    rules = {rule["name"]: rule for rule in doc["rules"]}
    assert len(rules["max_marginal"]["failing"]) == failing["marginal"]
    assert len(rules["max_unsafe"]["failing"]) == failing["unsafe"]
