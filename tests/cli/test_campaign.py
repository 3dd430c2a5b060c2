"""`netqual campaign`: init, add (idempotent, refusals, retests), report, milestone gate,
and the store's schema version. Runs are synthetic results files (tests/support/factories.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import Run, run_in_process
from factories import make_results, write_results

from netqual.analysis import localise
from netqual.campaign.store import SCHEMA_VERSION, open_store
from netqual.model.policy import Policy
from netqual.results import path_to_dict
from netqual.table.run import Results

WEEK1 = "2027-01-05T10:00:00+00:00"
WEEK2 = "2027-01-12T10:00:00+00:00"
WEEK3 = "2027-01-19T10:00:00+00:00"


def _run(tmp: Path, name: str, results: Results) -> Path:
    results = dataclasses.replace(results, suspects=localise.suspects(results))
    out = tmp / name
    out.mkdir()
    write_results(out / "results.json", results)
    return out


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Callable[..., Run]:
    def call(*args: str) -> Run:
        return run_in_process(list(args), tmp_path, monkeypatch, capsys)

    return call


@pytest.fixture
def weeks(tmp_path: Path) -> dict[str, Path]:
    return {
        "w1": _run(tmp_path, "w1", make_results(8, started_at=WEEK1)),
        "w2": _run(tmp_path, "w2", make_results(8, started_at=WEEK2, slow_nodes=["gpu03"])),
    }


def test_init_writes_the_default_milestones(cli: Callable[..., Run], tmp_path: Path) -> None:
    r = cli("campaign", "init", "joint", "--start", "2027-01-04")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "joint" / "campaign.toml").read_text()
    assert [ln.split('"')[1] for ln in text.splitlines() if ln.startswith("name = ")][1:] == [
        "week2",
        "week6",
        "week10",
    ]
    for profile in ("preflight", "requalify", "signoff"):
        assert (tmp_path / "joint" / "profiles" / f"{profile}.toml").is_file()
    again = cli("campaign", "init", "joint")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_add_is_idempotent_and_weeks_come_from_dates(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    first = cli("campaign", "add", "joint", str(weeks["w1"]))
    assert first.returncode == 0, first.stderr
    assert "as week 1: 28 paths (28 offload-safe, 0 marginal, 0 unsafe)" in first.stdout
    again = cli("campaign", "add", "joint", str(weeks["w1"]))
    assert again.returncode == 0 and "already in the campaign as week 1" in again.stdout
    assert "nothing added" in again.stdout
    second = cli("campaign", "add", "joint", str(weeks["w2"]))
    assert "as week 2" in second.stdout and "7 unsafe" in second.stdout
    store = open_store(tmp_path / "joint" / "history.duckdb", read_only=True)
    try:
        assert [(r.week, r.n_paths) for r in store.runs()] == [(1, 28), (2, 28)]
        assert store.con.execute("SELECT count(*) FROM paths").fetchone() == (56,)
    finally:
        store.close()


def test_a_run_of_other_nodes_or_policy_is_refused_unless_forced(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    cli("campaign", "init", "joint")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    other = _run(tmp_path, "other", make_results(9, all_safe=True, started_at=WEEK2))
    r = cli("campaign", "add", "joint", str(other))
    assert r.returncode == 2
    assert (
        "nodes: another inventory" in r.stderr
        and "1 not in it (gpu07)" in r.stderr
        and "--force" in r.stderr
    )
    strict = _run(
        tmp_path, "strict", make_results(8, started_at=WEEK2, policy=Policy(safe_max_us=100.0))
    )
    r = cli("campaign", "add", "joint", str(strict))
    assert r.returncode == 2 and "another policy" in r.stderr
    forced = cli("campaign", "add", "joint", str(other), "--force")
    assert forced.returncode == 0 and "as week 2" in forced.stdout


def test_store_of_a_newer_netqual_is_refused(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    cli("campaign", "init", "joint")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    store = open_store(tmp_path / "joint" / "history.duckdb")
    store.con.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)]
    )
    store.close()
    r = cli("campaign", "report", "joint")
    assert r.returncode == 2 and "written by a newer netqual" in r.stderr


def test_report_shows_regression_and_new_suspect(
    cli: Callable[..., Run], weeks: dict[str, Path]
) -> None:
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    cli("campaign", "add", "joint", str(weeks["w2"]))
    r = cli("campaign", "report", "joint")
    assert r.returncode == 0, r.stderr
    assert "Since last week (week 1): 7 paths worse, 0 better of 28" in r.stdout
    assert "offload-safe -> unsafe" in r.stdout
    assert "open   node gpu03: first seen week 2, last seen week 2" in r.stdout
    doc = json.loads(cli("campaign", "report", "joint", "--json").stdout)
    assert [w["unsafe"] for w in doc["weeks"]] == [0, 7]
    assert doc["since_last"]["n_worse"] == 7
    assert {(s["kind"], s["subject"], s["open"]) for s in doc["suspects"]} == {
        ("node", "gpu03", True)
    }


def test_milestone_gate_fails_naming_the_path_and_writes_junit(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    early = cli("campaign", "gate", "joint", "--milestone", "week2", "--junit", "w1.xml")
    assert early.returncode == 1, early.stdout + early.stderr  # only week 1 so far: not due
    assert "not due until week 2" in early.stdout
    cli("campaign", "add", "joint", str(weeks["w2"]))
    r = cli("campaign", "gate", "joint", "--milestone", "week2", "--junit", "gate.xml")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "history: no path worse than its best week" in r.stdout
    assert "gpu03" in r.stdout
    suite = ET.parse(tmp_path / "gate.xml").getroot()
    failed = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    best = failed["history: no path worse than its best week"]
    assert best is not None and "gpu03" in (best.text or "") and "in week 1" in (best.text or "")
    doc = json.loads(cli("campaign", "report", "joint", "--json").stdout)
    assert [(g["milestone"], g["week"], g["passed"]) for g in doc["gates"]] == [
        ("week2", 2, False),
    ]
    unknown = cli("campaign", "gate", "joint", "--milestone", "week7")
    assert unknown.returncode == 2 and "no milestone 'week7'" in unknown.stderr


def test_suspect_open_too_long_fails_the_milestone(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w2"]), "--week", "1")
    for week in (2, 3, 6):
        run = _run(
            tmp_path,
            f"again{week}",
            make_results(
                8,
                started_at=f"{dt.date(2027, 1, 5) + dt.timedelta(weeks=week - 1)}T10:00:00+00:00",
                slow_nodes=["gpu03"],
            ),
        )
        cli("campaign", "add", "joint", str(run))
    r = cli("campaign", "gate", "joint", "--milestone", "week6", "--json")
    doc = json.loads(r.stdout)
    rules = {x["name"]: x for x in doc["rules"]}
    age = rules["history: no suspect open longer than 2 weeks"]
    assert age["status"] == "fail"
    assert (
        age["failing"][0]["src"] == "node gpu03"
        and "since week 1 (5 weeks)" in age["failing"][0]["detail"]
    )


def test_a_milestone_before_its_week_is_not_due_never_passed(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """Issue 36: in week 3, `campaign gate --milestone week6` judged week 3's run and passed;
    the page read "Week 3: milestone week6 PASSED" and the exporter wrote a 1. Before its
    week a milestone is not due: exit 1, JUnit skipped, nothing stored as passed."""
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    w3 = _run(tmp_path, "w3", make_results(8, started_at=WEEK3))
    cli("campaign", "add", "joint", str(w3))
    r = cli("campaign", "gate", "joint", "--milestone", "week6", "--junit", "w6.xml",
            "--today", "2027-01-20")  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    said = " ".join(r.stdout.split())
    assert (
        "GATE NOT DUE: week6 is not due until week 6" in said and "latest run is in week 3" in said
    )
    assert "PASSED" not in r.stdout
    suite = ET.parse(tmp_path / "w6.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("failures") == "0"
    [case] = suite.iter("testcase")
    assert case.get("name") == "milestone week6" and case.find("skipped") is not None
    doc = json.loads(cli("campaign", "gate", "joint", "--milestone", "week6", "--json").stdout)
    assert doc["passed"] is False and "not due until week 6" in doc["not_due"]
    # Calendar week 7 without a run of week 6 or later: due, still not judged.
    late = cli("campaign", "gate", "joint", "--milestone", "week6", "--today", "2027-02-16")
    assert late.returncode == 1 and "is due (week 6; today is in week 7)" in late.stdout
    # A store written by a netqual that judged early holds a week-3 "passed" for week6:
    # the trend, the page and the exporter leave it out.
    store = open_store(tmp_path / "joint" / "history.duckdb")
    try:
        seq = store.runs()[-1].seq
        store.record_gate(seq, "week6", "requalify", True, [], dt.date(2027, 1, 20))
    finally:
        store.close()
    rep = cli("campaign", "report", "joint")
    assert "Milestones: week2 due (week 2), not judged yet, week6 not due until week 6" in (
        " ".join(rep.stdout.split())
    ), rep.stdout
    assert "PASSED" not in rep.stdout
    states = json.loads(cli("campaign", "report", "joint", "--json").stdout)["milestones"]
    assert [(m["name"], m["status"]) for m in states] == [
        ("week2", "due, not judged"),
        ("week6", "not due"),
        ("week10", "not due"),
    ]
    assert cli("campaign", "report", "joint", "--html", "c.html").returncode == 0
    page = (tmp_path / "c.html").read_text()
    assert "week6 not due until week 6" in page and "PASSED" not in page
    m = cli("export", "joint", "--openmetrics")
    assert m.returncode == 0, m.stderr
    assert 'netqual_milestone_due{milestone="week6",week="6"} 0.0' in m.stdout
    assert 'netqual_milestone_due{milestone="week2",week="2"} 1.0' in m.stdout
    assert "netqual_gate_passed" not in m.stdout
    # In week 6 it is judged.
    w6 = _run(tmp_path, "w6", make_results(8, started_at="2027-02-09T10:00:00+00:00"))
    cli("campaign", "add", "joint", str(w6))
    r = cli("campaign", "gate", "joint", "--milestone", "week6", "--today", "2027-02-10")
    assert "not due" not in r.stdout and "GATE PASSED" in r.stdout, r.stdout


def test_export_needs_no_format_flag_and_replaces_a_file_only_when_forced(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """Issue 36: export demanded --openmetrics (its only format) and overwrote --out."""
    plain = cli("export", str(weeks["w1"]))
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == cli("export", str(weeks["w1"]), "--openmetrics").stdout
    assert "netqual_paths" in plain.stdout
    (tmp_path / "m.prom").write_text("keep me\n")
    r = cli("export", str(weeks["w1"]), "--out", "m.prom")
    assert r.returncode == 2 and "m.prom already exists" in r.stderr and "--force" in r.stderr
    assert (tmp_path / "m.prom").read_text() == "keep me\n"
    assert cli("export", str(weeks["w1"]), "--out", "m.prom", "--force").returncode == 0
    assert "netqual_paths" in (tmp_path / "m.prom").read_text()


# The columns of `paths` each version added (version 1's are the rest)
_ADDED_IN_3 = ("transport", *(f"ci95_{m}_{e}_us" for m in ("p50", "p90", "p99", "p999")
                              for e in ("low", "high")))  # fmt: skip


def _as_version(path: Path, version: int) -> None:
    """The store as that version of netqual left it: version 1 had no week_paths table,
    version 2 no transport or intervals per path, version 3 no plan per run."""
    store = open_store(path)
    con = store.con
    con.execute("ALTER TABLE runs DROP COLUMN plan")
    if version == 3:
        con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        store.close()
        return
    for name in _ADDED_IN_3:
        con.execute(f"ALTER TABLE paths DROP COLUMN {name}")
    con.execute("DROP TABLE week_paths")
    if version == 2:
        con.execute(
            "CREATE TABLE week_paths AS SELECT * EXCLUDE (rn) FROM (SELECT p.*, r.week,"
            " row_number() OVER (PARTITION BY r.week, p.a, p.b ORDER BY p.seq DESC) AS rn"
            " FROM paths p JOIN runs r USING (seq)) WHERE rn = 1"
        )
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(version)])
    store.close()


def test_a_version_3_store_is_upgraded_and_a_later_run_is_held_to_what_it_knows(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """Runs added before version 4 kept no plan: a later run is held to their transport
    and metric, not to a ping-pong size or chunk set the store never knew."""
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    _as_version(tmp_path / "joint" / "history.duckdb", 3)
    small = make_results(8, started_at=WEEK2)
    small = dataclasses.replace(
        small,
        run=dataclasses.replace(
            small.run, plan=dataclasses.replace(small.run.plan, size_bytes=4096)
        ),
    )
    r = cli("campaign", "add", "joint", str(_run(tmp_path, "w2-4k", small)))
    assert r.returncode == 0 and "not comparable" not in r.stdout, r.stdout + r.stderr
    store = open_store(tmp_path / "joint" / "history.duckdb", read_only=True)
    try:
        plans = store.con.execute("SELECT plan IS NULL FROM runs ORDER BY seq").fetchall()
    finally:
        store.close()
    assert plans == [(True,), (False,)]


def test_a_version_2_store_is_upgraded_and_read(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """A store as version 2 left it (paths without transport or intervals) is upgraded:
    each path's transport is its run's, its intervals NULL; the report reads as before,
    and a run added after the upgrade keeps its transport (intervals kept: the schema's
    round trip, tests/unit/core/test_path_schema.py)."""
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    before = json.loads(cli("campaign", "report", "joint", "--json").stdout)
    _as_version(tmp_path / "joint" / "history.duckdb", 2)
    assert json.loads(cli("campaign", "report", "joint", "--json").stdout) == before
    assert cli("campaign", "add", "joint", str(weeks["w2"])).returncode == 0
    store = open_store(tmp_path / "joint" / "history.duckdb", read_only=True)
    try:
        got = store.con.execute(
            "SELECT seq, transport, count(*) FROM paths GROUP BY seq, transport ORDER BY seq"
        ).fetchall()
        q = "SELECT count(ci95_p99_low_us) FROM paths WHERE seq = 1"
        intervals = store.con.execute(q).fetchone()
        week = store.con.execute("SELECT count(DISTINCT transport) FROM week_paths").fetchone()
    finally:
        store.close()
    assert intervals == (0,)
    assert got == [(1, "tcp", 28), (2, "tcp", 28)]
    assert week == (1,)


def test_a_version_1_store_is_upgraded_and_read(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """A store as version 1 left it (no week_paths table) reads with this netqual."""
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    cli("campaign", "add", "joint", str(weeks["w2"]))
    before = json.loads(cli("campaign", "report", "joint", "--json").stdout)
    _as_version(tmp_path / "joint" / "history.duckdb", 1)
    after = cli("campaign", "report", "joint", "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == before
    store = open_store(tmp_path / "joint" / "history.duckdb", read_only=True)
    try:
        version = store.con.execute("SELECT value FROM meta WHERE key = 'schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)
        assert store.con.execute("SELECT count(*) FROM week_paths").fetchone() == (56,)
    finally:
        store.close()


def test_a_retest_joins_its_run_and_overrides_its_paths(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """A retest of week 2 (3 of gpu03's paths re-measured, fine now) is recorded as a retest
    of that run, in its week; the week's state of those paths is the retest's."""
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    cli("campaign", "add", "joint", str(weeks["w2"]))
    fine = make_results(8, started_at="2027-01-20T10:00:00+00:00")  # a date in week 3
    keep = np.flatnonzero(fine.paths.src == fine.paths.names.index("gpu03"))[:3]
    retest = dataclasses.replace(fine, paths=fine.paths.take(keep), retest_of="w2")
    r = cli("campaign", "add", "joint", str(_run(tmp_path, "w2-retest", retest)))
    assert r.returncode == 0, r.stderr
    assert "added retest" in r.stdout and "as week 2: 3 paths" in r.stdout
    assert "retest of run" in r.stdout
    doc = json.loads(cli("campaign", "report", "joint", "--json").stdout)
    assert [(w["week"], w["runs"], w["unsafe"]) for w in doc["weeks"]] == [(1, 1, 0), (2, 2, 4)]


def test_an_interrupted_run_is_added_as_incomplete(cli: Callable[..., Run], tmp_path: Path) -> None:
    full = make_results(6, started_at=WEEK1)
    out = tmp_path / "cut"
    out.mkdir()
    with (out / "results.jsonl").open("w") as f:
        for p in list(full.paths)[:5]:
            f.write(json.dumps(path_to_dict(p)) + "\n")
    cli("campaign", "init", "joint")
    r = cli("campaign", "add", "joint", str(out / "results.jsonl"), "--week", "1")
    assert r.returncode == 0, r.stderr
    assert "as week 1: 5 paths" in r.stdout and "incomplete run" in r.stdout


def test_the_stored_baseline_judges_as_the_file_does(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """campaign gate compares with the baseline run as the store keeps it: the regression
    rules find the same paths as `netqual gate --baseline FILE` does."""
    import datetime as dt

    from netqual.campaign.milestone import stored_baseline
    from netqual.gate import evaluate, load_profile
    from netqual.run.runfiles import load_run

    cli("campaign", "init", "joint", "--start", "2027-01-04")
    cli("campaign", "add", "joint", str(weeks["w1"]))
    cli("campaign", "add", "joint", str(weeks["w2"]))
    profile = load_profile(tmp_path / "joint" / "profiles" / "requalify.toml")
    new, old = load_run(weeks["w2"]), load_run(weeks["w1"])
    store = open_store(tmp_path / "joint" / "history.duckdb", read_only=True)
    try:
        base = store.runs()[0]
        from_store = evaluate(new, profile, today=dt.date(2027, 1, 12),
                              baseline=stored_baseline(store, base, new))  # fmt: skip
    finally:
        store.close()
    from_file = evaluate(new, profile, today=dt.date(2027, 1, 12), baseline=old)
    assert [(o.rule, o.status, o.failing) for o in from_store.outcomes] == [
        (o.rule, o.status, o.failing) for o in from_file.outcomes
    ]
    assert any(o.rule == "no_class_drop" and o.failing for o in from_file.outcomes)


def test_a_milestone_with_a_workload_judges_paths_by_it(
    cli: Callable[..., Run], tmp_path: Path, weeks: dict[str, Path]
) -> None:
    """`workload = PRESET` on a milestone: the gate judges each path by that model's KV
    chunk (a profile's min_workload_verdict rule sees the workload verdicts)."""
    cli("campaign", "init", "joint", "--start", "2027-01-04")
    toml = tmp_path / "joint" / "campaign.toml"
    text = toml.read_text().replace(
        'profile = "profiles/preflight.toml"',
        'profile = "profiles/wl.toml"\nworkload = "llama-3.1-70b-tp8"',
    )
    toml.write_text(text)
    (tmp_path / "joint" / "profiles" / "wl.toml").write_text(
        '[profile]\nname = "wl"\n[limits]\nmin_workload_verdict = "offload-safe"\n'
    )
    cli("campaign", "add", "joint", str(weeks["w2"]), "--week", "2")
    r = cli("campaign", "gate", "joint", "--milestone", "week2", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    rules = {x["name"]: x for x in json.loads(r.stdout)["rules"]}
    judged = rules["min_workload_verdict"]
    assert judged["status"] == "fail" and judged["failing"], judged
    assert all("gpu03" in (f["src"], f["dst"]) for f in judged["failing"]), judged
