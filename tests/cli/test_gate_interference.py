"""Gate rules over the interference check, through ``netqual gate``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cli_helpers import netqual
from factories import make_results, write_results

from netqual.model.path import Tier
from netqual.model.run import Interference, SampledPath, TierInterference
from netqual.table.run import Results

PROFILE = """
[profile]
name = "clean-measurement"
[limits]
interference_clean = true
max_interference_p99_ratio = 1.5
"""


def _with_interference(results: Results, inflate: float) -> Results:
    """Three sampled paths of one tier; ``inflate`` x their alone p99 in the run."""
    sampled = []
    for p in results.paths[:3]:
        assert p.rtt is not None
        sampled.append(
            SampledPath(
                src=p.src,
                dst=p.dst,
                tier=Tier.CROSS_RACK,
                run_p50_us=p.rtt.p50_us,
                run_p99_us=p.rtt.p99_us * inflate,
                alone_p50_us=p.rtt.p50_us,
                alone_p99_us=p.rtt.p99_us,
                run_verdict=p.verdict,
                alone_verdict=p.verdict,
                disturbed=inflate > 1.2,
            )
        )
    tier = TierInterference(Tier.CROSS_RACK, 3, 1.0, inflate, inflate > 1.2)
    inter = Interference(3, 1.0, inflate, 0, 1.2, (tier,), tuple(sampled))
    return dataclasses.replace(results, interference=inter)


def _gate(tmp_path: Path, results: Results) -> tuple[int, str]:
    write_results(tmp_path / "r.json", results)
    (tmp_path / "p.toml").write_text(PROFILE)
    r = netqual("gate", "r.json", "--profile", "p.toml", cwd=tmp_path)
    return r.returncode, r.stdout + r.stderr


def test_a_disturbed_run_fails_and_names_the_tier(tmp_path: Path) -> None:
    code, out = _gate(tmp_path, _with_interference(make_results(4, all_safe=True), 6.0))
    assert code == 1, out
    assert "the run disturbed its own measurement on cross-rack" in out
    assert "median run/alone p99 ratio 6.00 (limit 1.5)" in out


def test_an_undisturbed_run_passes(tmp_path: Path) -> None:
    code, out = _gate(tmp_path, _with_interference(make_results(4, all_safe=True), 1.05))
    assert code == 0, out
    assert "3 sampled paths match their alone measurement" in out


def test_a_run_without_the_check_fails_these_rules(tmp_path: Path) -> None:
    code, out = _gate(tmp_path, make_results(4, all_safe=True))
    assert code == 1
    assert "no interference check" in out


def test_bad_ratio_names_the_field(tmp_path: Path) -> None:
    write_results(tmp_path / "r.json", make_results(4, all_safe=True))
    (tmp_path / "p.toml").write_text("[limits]\nmax_interference_p99_ratio = 0.5\n")
    r = netqual("gate", "r.json", "--profile", "p.toml", cwd=tmp_path)
    assert r.returncode == 2
    assert "limits.max_interference_p99_ratio" in r.stderr


def test_first_screen_says_the_run_disturbed_itself_and_which_tier(tmp_path: Path) -> None:
    write_results(tmp_path / "r.json", _with_interference(make_results(4, all_safe=True), 6.0))
    r = netqual("report", "r.json", "--html", "r.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (
        "The run disturbed its own measurement" in r.stdout and "cross-rack (p99 x6.0)" in r.stdout
    )
    html = (tmp_path / "r.html").read_text()
    header = html[: html.index("<main>")]
    assert 'id="interference"' in header and "cross-rack (p99 x6.0)" in header
    assert "3 paths re-measured alone" in html  # methodology row
    write_results(tmp_path / "ok.json", _with_interference(make_results(4, all_safe=True), 1.05))
    ok = netqual("report", "ok.json", "--html", "ok.html", cwd=tmp_path)
    assert ok.returncode == 0 and "disturbed" not in ok.stdout
    assert 'id="interference"' not in (tmp_path / "ok.html").read_text()
