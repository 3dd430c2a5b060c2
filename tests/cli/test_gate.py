"""`netqual gate`: exit codes, rules, waivers, baseline, JUnit and JSON, golden output."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import ROOT, Run, check_golden, netqual, run_in_process
from factories import make_results, write_results
from gate_cases import PROFILE, baseline, current, write_case

from netqual.base.errors import ProfileError
from netqual.gate import Status, default_profile, evaluate, load_profile, parse_profile_text

TODAY = dt.date(2026, 11, 29)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def test_mixed_results_fail_and_name_rules_and_paths_end_to_end(tmp_path: Path) -> None:
    write_results(tmp_path / "r.json", make_results(4, slow_paths=[("gpu03", "stor01", 812.0)]))
    r = netqual("gate", "r.json", cwd=tmp_path)
    assert r.returncode == 1
    assert "max_unsafe   │ FAIL" in r.stdout
    assert "gpu03 -> stor01  unsafe, p99 812.0 us" in r.stdout
    # the decision names the same path as what blocks, with what to do
    assert "gpu03 -> stor01  RTT: p99 RTT 812.0 us > 500.0 us" in r.stdout
    assert "GATE FAILED: 2 of 5 rules failed (no_blocking, max_unsafe)" in r.stdout


def test_all_safe_passes_end_to_end(tmp_path: Path) -> None:
    write_results(tmp_path / "r.json", make_results(8, all_safe=True))
    r = netqual("gate", "r.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "GATE PASSED: all 5 rules hold" in r.stdout


def test_truncated_file_exits_2_end_to_end(tmp_path: Path) -> None:
    text = write_results(tmp_path / "r.json", make_results(4)).read_text()
    (tmp_path / "r.json").write_text(text[: len(text) * 2 // 3])
    r = netqual("gate", "r.json", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("error: r.json: not valid JSON")
    assert "truncated" in r.stderr


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"schema_version": "1", "tool": {"name": "netqual"', "truncated"),
        ('{"schema_version": "7"}', "schema_version: unsupported schema_version '7'"),
        (
            '{"schema_version": "1", "tool": {"name": "n", "version": "1"}}',
            "run: missing required key",
        ),
        ("", "not valid JSON"),
    ],
)
def test_bad_results_file_exits_2_with_message(
    tmp_path: Path, content: str, words: str, cli: Callable[..., Run]
) -> None:
    (tmp_path / "r.json").write_text(content)
    r = cli("gate", "r.json", cwd=tmp_path)
    assert r.returncode == 2
    assert words in r.stderr
    assert "r.json" in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_file_and_bad_usage_exit_2(tmp_path: Path, cli: Callable[..., Run]) -> None:
    r = cli("gate", "nope.json", cwd=tmp_path)
    assert r.returncode == 2
    assert "nope.json: cannot read" in r.stderr
    assert cli("gate", cwd=tmp_path).returncode == 2
    write_results(tmp_path / "r.json", make_results(4))
    bad = cli("gate", "r.json", "--today", "someday", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--today" in bad.stderr


def test_golden_terminal_and_junit(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_case(tmp_path)
    args = ("--profile", "profile.toml", "--baseline", "baseline.json", "--today", "2026-11-29")
    r = cli("gate", "results.json", *args, "--junit", "junit.xml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    check_golden("gate_signoff.txt", r.stdout)
    check_golden("gate_signoff.junit.xml", (tmp_path / "junit.xml").read_text())


def test_junit_is_valid_and_counts_match(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_case(tmp_path)
    r = cli(
        "gate", "results.json", "--profile", "profile.toml", "--today", "2026-11-29",
        "--junit", "j.xml",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("name") == "netqual gate: signoff-test"
    assert int(suite.get("tests", "-1")) == len(cases) == 13  # complete, then the profile's
    failed = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert int(suite.get("failures", "-1")) == len(failed) == 5
    assert int(suite.get("skipped", "-1")) == len(skipped) == 3  # baseline rules without --baseline
    assert {c.get("classname") for c in cases} == {"netqual.gate.signoff-test"}
    unsafe = next(c for c in cases if c.get("name") == "max_unsafe")
    failure = unsafe.find("failure")
    assert failure is not None
    assert "gpu03 -> stor01" in (failure.text or "")


def test_junit_reads_back_with_junitparser(tmp_path: Path, cli: Callable[..., Run]) -> None:
    junitparser = pytest.importorskip(
        "junitparser", reason="junitparser not installed (pip install junitparser)"
    )
    write_case(tmp_path)
    cli(
        "gate",
        "results.json",
        "--profile",
        "profile.toml",
        "--today",
        "2026-11-29",
        "--junit",
        "j.xml",
        cwd=tmp_path,
    )
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "j.xml"))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    assert suite.tests == 13
    assert suite.failures == 5
    results = {case.name: [type(x).__name__ for x in case.result] for case in suite}
    assert results["max_unsafe"] == ["Failure"]
    assert results["no_errors"] == []
    assert results["no_class_drop"] == ["Skipped"]


def test_json_output(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_case(tmp_path)
    r = cli(
        "gate", "results.json", "--profile", "profile.toml", "--baseline", "baseline.json",
        "--today", "2026-11-29", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["passed"] is False
    assert "max_unsafe" in doc["failed_rules"]
    by_name = {rule["name"]: rule for rule in doc["rules"]}
    assert by_name["max_unsafe"]["failing"] == [
        {"src": "gpu03", "dst": "stor01", "detail": "unsafe, p99 812.0 us"}
    ]
    waivers = {(w["src"], w["dst"]): w for w in doc["waivers"]}
    assert waivers[("gpu02", "gpu04")]["status"] == "active"
    assert waivers[("gpu01", "gpu03")]["status"] == "expired"


def test_expired_waiver_no_longer_applies() -> None:
    profile = parse_profile_text(PROFILE, "p.toml")
    before = evaluate(current(), profile, today=dt.date(2026, 10, 31))
    after = evaluate(current(), profile, today=TODAY)
    frac_before = next(o for o in before.outcomes if o.rule == "min_safe_fraction")
    frac_after = next(o for o in after.outcomes if o.rule == "min_safe_fraction")
    assert [f.label for f in frac_before.waived] == ["gpu01 -> gpu03", "gpu02 -> gpu04"]
    assert [f.label for f in frac_after.waived] == ["gpu02 -> gpu04"]
    assert "gpu01 -> gpu03" in [f.label for f in frac_after.failing]
    expired = {s.waiver.label: s.expired for s in after.waivers}
    assert expired == {"gpu02 -> gpu04": False, "gpu01 -> gpu03": True}


def test_waiver_is_valid_through_its_last_day() -> None:
    profile = parse_profile_text(PROFILE, "p.toml")
    on_last_day = evaluate(current(), profile, today=dt.date(2026, 11, 1))
    assert not on_last_day.waivers[1].expired


def test_scopes_only_see_their_paths() -> None:
    text = """
[limits]
max_unsafe = 100
[[scope]]
name = "rack r01"
racks = ["r01"]
max_unsafe = 0
[[scope]]
name = "compute"
roles = ["compute"]
tiers = ["cross-rack"]
max_unsafe = 0
"""
    # r01 = gpu01, gpu02, gpu03, stor01; r02 = gpu04, gpu05
    res = make_results(6, slow_paths=[("gpu04", "gpu05", 900.0)])
    report = evaluate(res, parse_profile_text(text, "p.toml"), today=TODAY)
    status = {o.rule: o.status for o in report.outcomes}
    assert status == {
        "complete": Status.PASS,
        "max_unsafe": Status.PASS,
        "rack r01: max_unsafe": Status.PASS,
        "compute: max_unsafe": Status.PASS,
    }
    res = make_results(6, slow_paths=[("gpu01", "gpu05", 900.0)])
    report = evaluate(res, parse_profile_text(text, "p.toml"), today=TODAY)
    failed = {o.rule: [f.label for f in o.failing] for o in report.failed}
    assert failed == {
        "rack r01: max_unsafe": ["gpu01 -> gpu05"],
        "compute: max_unsafe": ["gpu01 -> gpu05"],
    }


def _regressions(floor_us: float) -> list[tuple[str, Status, str, list[str]]]:
    """The outcomes of a 10% p99 rule with a ``floor_us`` floor, current() on baseline():
    p99 there rose by 8.9 us (gpu02 -> stor01, +30%), 224 us (gpu01 -> gpu03), 230 us
    (gpu02 -> gpu04) and 777 us (gpu03 -> stor01): every one more than 10%."""
    text = f"[baseline]\nmax_p99_increase_pct = 10\nmin_delta_us = {floor_us}\n"
    report = evaluate(
        current(), parse_profile_text(text, "p.toml"), today=TODAY, baseline=baseline()
    )
    return [(o.rule, o.status, o.message, [f.label for f in o.failing]) for o in report.outcomes]


def test_baseline_regression_floor_ignores_tiny_changes() -> None:
    assert _regressions(1000) == [
        ("complete", Status.PASS, "every scheduled pair measured (15)", []),
        ("max_p99_increase_pct", Status.PASS, "0 paths with p99 up more than 10%", []),
    ]


@pytest.mark.parametrize(
    ("floor_us", "failing"),
    [
        (0, ["gpu01 -> gpu03", "gpu02 -> stor01", "gpu02 -> gpu04", "gpu03 -> stor01"]),
        (10, ["gpu01 -> gpu03", "gpu02 -> gpu04", "gpu03 -> stor01"]),
        (300, ["gpu03 -> stor01"]),
        (800, []),
    ],
)
def test_baseline_regression_floor_is_the_least_rise_that_counts(
    floor_us: float, failing: list[str]
) -> None:
    """The companion of the test above: the floor, not the percentage, is what excused
    those paths; each floor lets through exactly the rises below it."""
    (complete, rule) = _regressions(floor_us)
    assert complete == ("complete", Status.PASS, "every scheduled pair measured (15)", [])
    paths = "path" if len(failing) == 1 else "paths"
    status = Status.FAIL if failing else Status.PASS
    assert rule == (
        "max_p99_increase_pct",
        status,
        f"{len(failing)} {paths} with p99 up more than 10%",
        failing,
    )


def test_required_baseline_missing_is_usage_error(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_results(tmp_path / "r.json", make_results(4, all_safe=True))
    (tmp_path / "p.toml").write_text(
        "[limits]\nmax_unsafe = 0\n[baseline]\nrequired = true\nno_class_drop = true\n"
    )
    r = cli("gate", "r.json", "--profile", "p.toml", cwd=tmp_path)
    assert r.returncode == 2
    assert "--baseline" in r.stderr


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("[limits]\nmax_unsafe = -1\n", "limits.max_unsafe", "non-negative integer"),
        ("[limits]\nmax_unsafe = 0\nmax_unsave = 1\n", "limits.max_unsave", "unknown key"),
        ("[limits]\nmin_safe_fraction = 1.5\n", "limits.min_safe_fraction", "<= 1"),
        ("[profile]\nmetric = 'p95'\n[limits]\nmax_unsafe = 0\n", "profile.metric", "p95"),
        ("[[scope]]\nname = 's'\nroles = ['gpu']\nmax_unsafe = 0\n", "scope[0].roles",
         "compute, storage"),
        ("[[scope]]\nname = 's'\nmax_unsafe = 0\n", "scope[0]", "at least one of"),
        ("[limits]\nmax_unsafe = 0\n[[waiver]]\nsrc = 'a'\ndst = 'b'\nreason = 'r'\nowner = 'o'\n",
         "waiver[0].until", "missing required field"),
        ("[limits]\nmax_unsafe = 0\n[[waiver]]\nsrc = 'a'\ndst = 'b'\nuntil = 'soon'\n"
         "reason = 'r'\nowner = 'o'\n",
         "waiver[0].until", "not a date"),
        ("", "limits", "no rules"),
        ("[limits\n", "line 1", "TOML syntax error"),
    ],
)  # fmt: skip
def test_profile_errors_name_file_and_field(text: str, field: str | None, words: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile_text(text, "prof.toml")
    assert info.value.field == field
    assert words in str(info.value)
    assert str(info.value).startswith("prof.toml")


def test_bad_profile_exits_2(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_results(tmp_path / "r.json", make_results(4))
    (tmp_path / "p.toml").write_text("[limits]\nmax_unsafe = 'none'\n")
    r = cli("gate", "r.json", "--profile", "p.toml", cwd=tmp_path)
    assert r.returncode == 2
    assert "p.toml: limits.max_unsafe: expected a non-negative integer" in r.stderr


@pytest.mark.parametrize("name", ["preflight", "requalify", "signoff"])
def test_documented_example_profiles_load(name: str) -> None:
    profile = load_profile(ROOT / "docs" / "gate-profiles" / f"{name}.toml")
    assert profile.name == name
    assert profile.rules


def test_default_profile_is_every_path_safe() -> None:
    p = default_profile()
    assert [r.name for r in p.rules] == [
        "complete",
        "no_blocking",
        "max_unsafe",
        "max_marginal",
        "no_errors",
    ]
