"""`netqual diff OLD NEW`: class changes, p99 deltas, new and missing paths."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import Run, check_golden, run_in_process
from factories import make_results, write_results

from netqual.analysis.diff import diff_runs
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.results import results_to_dict, summarize
from netqual.table.paths import PathTable


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def _pair(tmp: Path) -> None:
    old = make_results(5, seed=1, slow_paths=[("gpu03", "stor01", 812.0)])
    new = make_results(6, seed=1, slow_paths=[("gpu01", "gpu02", 640.0), ("gpu02", "gpu03", 300.0)])
    # the new run lost one pair (gpu04 was down for it) and measured one path from the other end
    kept = [p for p in new.paths if (p.src, p.dst) != ("gpu01", "gpu04")]
    flipped = [
        replace(p, src=p.dst, dst=p.src) if (p.src, p.dst) == ("gpu01", "gpu03") else p
        for p in kept
    ]
    new = replace(new, paths=PathTable.from_paths(flipped), summary=summarize(flipped, Metric.P99))
    write_results(tmp / "old.json", old)
    write_results(tmp / "new.json", new)


def test_diff_finds_class_changes_deltas_new_and_missing(tmp_path: Path) -> None:
    _pair(tmp_path)
    from netqual.results import load

    d = diff_runs(load(tmp_path / "old.json"), load(tmp_path / "new.json"))
    worse = [(c.label, c.old.verdict, c.new.verdict) for c in d.worse]
    assert worse == [
        ("gpu01 -> gpu02", Verdict.SAFE, Verdict.UNSAFE),
        ("gpu02 -> gpu03", Verdict.SAFE, Verdict.MARGINAL),
    ]
    assert [(c.label, c.new.verdict) for c in d.better] == [("gpu03 -> stor01", Verdict.SAFE)]
    assert sorted(f"{p.src} -> {p.dst}" for p in d.new_paths) == [
        "gpu01 -> gpu05", "gpu02 -> gpu05", "gpu03 -> gpu05", "gpu04 -> gpu05", "stor01 -> gpu05",
    ]  # fmt: skip
    assert [f"{p.src} -> {p.dst}" for p in d.missing_paths] == ["gpu01 -> gpu04"]
    # gpu01 -> gpu03 was measured from the other end: still compared, not new nor missing
    assert any(c.label == "gpu03 -> gpu01" for c in d.deltas)
    top = d.deltas[0]
    assert top.label == "gpu03 -> stor01"
    assert top.delta_us is not None and top.delta_us < -700


def test_diff_terminal_golden(tmp_path: Path, cli: Callable[..., Run]) -> None:
    _pair(tmp_path)
    r = cli("diff", "old.json", "new.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    check_golden("diff.txt", r.stdout)


def test_diff_html_and_json(tmp_path: Path, cli: Callable[..., Run]) -> None:
    _pair(tmp_path)
    r = cli("diff", "old.json", "new.json", "--html", "diff.html", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(c["src"], c["dst"], c["new_verdict"]) for c in doc["changed_class"]][:2] == [
        ("gpu01", "gpu02", "unsafe"), ("gpu02", "gpu03", "marginal"),
    ]  # fmt: skip
    assert doc["missing_paths"] == [{"src": "gpu01", "dst": "gpu04", "verdict": "offload-safe"}]
    html = (tmp_path / "diff.html").read_text()
    assert (
        '<h1 class="verdict" id="verdict">'
        "2 paths worse, 1 better, 5 new, 1 missing (9 compared)</h1>" in html
    )
    assert re.search(r"https?://", html) is None
    assert "gpu01 -&gt; gpu02" in html


def test_diff_rejects_bad_file(tmp_path: Path, cli: Callable[..., Run]) -> None:
    _pair(tmp_path)
    (tmp_path / "bad.json").write_text("{")
    r = cli("diff", "old.json", "bad.json", cwd=tmp_path)
    assert r.returncode == 2
    assert "bad.json: not valid JSON" in r.stderr


def test_an_older_file_and_a_new_one_compare_their_intervals(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    # the old file has "ci95" (the policy metric's interval alone, as older versions wrote
    # it), the new one "ci95_by_metric": the noise test reads both
    base = make_results(3, all_safe=True)
    old, new = results_to_dict(base), results_to_dict(base)
    for p in old["paths"]:
        r = p["rtt_us"]
        r["ci95"] = {"metric": "p99", "low": r["p99"] * 0.9, "high": r["p99"] * 1.1}
    for k, p in enumerate(new["paths"]):
        r = p["rtt_us"]
        r["p99"] *= 1.5 if k == 0 else 1.05
        r["ci95_by_metric"] = {"p99": [r["p99"] * 0.9, r["p99"] * 1.1]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    r = cli("diff", "old.json", "new.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    n = len(new["paths"])
    assert f"{n - 1} of {n} changes lie within the run-to-run noise" in r.stdout


def test_under_a_p50_policy_the_p99_rises_are_shown_in_p99(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    # "worse" judges p99 whatever the run's metric (the gate's max_p99_increase_pct): its
    # table shows p99's values, and p99's intervals decide what is noise
    base = make_results(3, all_safe=True)
    old, new = results_to_dict(base), results_to_dict(base)
    for doc in (old, new):  # both judged by p50: runs of two metrics are not compared
        doc["run"]["policy"]["metric"] = "p50"
        for p in doc["paths"]:
            r = p["rtt_us"]
            r["ci95_by_metric"] = {"p50": [r["p50"] * 0.99, r["p50"] * 1.01]}
            r["ci95_by_metric"]["p99"] = [r["p99"] * 0.99, r["p99"] * 1.01]
    apart, noisy = new["paths"][0]["rtt_us"], new["paths"][1]["rtt_us"]
    apart["p99"] *= 1.6
    apart["ci95_by_metric"]["p99"] = [apart["p99"] * 0.99, apart["p99"] * 1.01]
    noisy["p99"] *= 1.5
    noisy["ci95_by_metric"]["p99"] = [noisy["p99"] * 0.5, noisy["p99"] * 1.5]
    for r in (apart, noisy):  # p99 above p999 would be an impossible value
        r["p999"] = r["max"] = max(r["p999"], r["max"], r["p99"] * 1.5)
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    r = cli("diff", "old.json", "new.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = lines.index(next(x for x in lines if x.startswith("Same class, p99 up beyond")))
    assert "p99 was us" in lines[at + 1]
    rows = {x.split()[0] + " -> " + x.split()[2]: x for x in lines[at + 3 : at + 5]}
    first, second = (new["paths"][k] for k in (0, 1))
    a = rows[f"{first['src']} -> {first['dst']}"]
    b = rows[f"{second['src']} -> {second['dst']}"]
    assert "(+60%)" in a and "noise" not in a  # p99's intervals apart
    assert "(+50%), noise" in b  # p99's intervals overlap
    assert "Largest p50 changes" in r.stdout
    assert "95% confidence intervals of p50 overlap" in " ".join(r.stdout.split())
    j = json.loads(cli("diff", "old.json", "new.json", "--json", cwd=tmp_path).stdout)
    assert j["metric"] == "p50" and j["worse_rule"]["metric"] == "p99"
    # largest p99 change first, as the table lists them
    assert [f"{c['src']} -> {c['dst']}" for c in j["worse"]] == list(rows)
    assert j["worse"][0]["delta_us"] == 0.0  # values in the document's metric, p50


def test_html_diff_carries_the_noise_marks_and_that_both_runs_are_preliminary(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    # issue: the terminal said "-64.8 (-6%), noise" and "11 of 28 changes lie within the
    # run-to-run noise"; the HTML page said neither, nor that both runs were preliminary
    base = make_results(4, all_safe=True)
    old, new = results_to_dict(base), results_to_dict(base)
    for doc in (old, new):
        doc["run"]["plan"]["iterations"] = 2000  # the policy needs 10,000: preliminary
        for p in doc["paths"]:
            r = p["rtt_us"]
            r["ci95_by_metric"] = {"p99": [r["p99"] * 0.8, r["p99"] * 1.2]}
    for k, p in enumerate(new["paths"]):
        r = p["rtt_us"]
        r["p99"] *= 1.1 if k else 1.9  # the first path's intervals apart, the others overlap
        r["ci95_by_metric"] = {"p99": [r["p99"] * 0.8, r["p99"] * 1.2]}
        r["p999"] = r["max"] = max(r["p999"], r["max"], r["p99"] * 1.5)
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    r = cli("diff", "old.json", "new.json", "--html", "diff.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    n = len(new["paths"])
    said = " ".join(r.stdout.split())
    html = (tmp_path / "diff.html").read_text().replace("\u00a0", " ")
    for text in (
        f"{n - 1} of {n} changes lie within the run-to-run noise",
        "Both runs are PRELIMINARY (2,000 samples per path, the policy needs 10,000): "
        "no verdict of either is final",
        "worse = dropped a class, or p99 up more than 25% and 5 us",
    ):
        assert text in said
        assert text.replace("'", "&#39;") in html
    marks = re.findall(r"([+-]\d+\.\d \([+-]\d+%\)), noise", r.stdout)
    assert len(marks) == n - 1
    for mark in marks:  # each change the terminal marks as noise, the page marks too
        assert f'<td class="num noise">{mark}, noise</td>' in html
    apart = re.search(r"([+-]\d+\.\d \([+-]\d+%\))(?!, noise)\s*$", r.stdout, re.M)
    assert apart is not None
    assert f'<td class="num">{apart.group(1)}</td>' in html
