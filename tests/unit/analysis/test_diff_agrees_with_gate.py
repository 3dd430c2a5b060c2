"""diff and the re-qualification gate agree on what is worse (same test, same
thresholds), and diff says which changes lie within the two runs' noise. The commands run
in-process (run_in_process): a unit test starts no process."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import Run, run_in_process
from factories import make_results, write_results

from netqual.model.stats import Ci95
from netqual.table.paths import PathTable
from netqual.table.run import Results

PROFILE = """
[profile]
name = "requalify"
metric = "p99"

[baseline]
max_p99_increase_pct = 25
min_delta_us = 5.0
"""


@pytest.fixture
def netqual(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def test_a_57_percent_rise_is_worse_in_diff_and_fails_the_gate(
    tmp_path: Path, netqual: Callable[..., Run]
) -> None:
    old = make_results(4, slow_paths=[("gpu03", "stor01", 100.0)])
    new = make_results(
        4, slow_paths=[("gpu03", "stor01", 157.0)], started_at="2026-11-30T12:00:00+00:00"
    )
    write_results(tmp_path / "old.json", old)
    write_results(tmp_path / "new.json", new)
    (tmp_path / "gate.toml").write_text(PROFILE)
    g = netqual(
        "gate", "new.json", "--profile", "gate.toml", "--baseline", "old.json", cwd=tmp_path
    )
    assert g.returncode == 1
    assert "gpu03 -> stor01  p99 100.0 -> 157.0 us (+57%)" in g.stdout
    d = netqual("diff", "old.json", "new.json", "--profile", "gate.toml", cwd=tmp_path)
    assert d.returncode == 0, d.stderr
    assert "1 path worse" in d.stdout
    assert "p99 up more than 25% and 5 us" in " ".join(d.stdout.split())
    doc = json.loads(
        netqual(
            "diff", "old.json", "new.json", "--json", "--profile", "gate.toml", cwd=tmp_path
        ).stdout
    )
    assert [(w["src"], w["dst"]) for w in doc["worse"]] == [("gpu03", "stor01")]


def _with_ci(run: Results, scale: float, half_width_pct: float) -> Results:
    """Every path's p99 times ``scale``, with a 95% CI of +-half_width_pct around it."""
    paths = []
    for p in run.paths:
        assert p.rtt is not None
        p99 = p.rtt.p99_us * scale
        w = p99 * half_width_pct / 100
        rtt = replace(p.rtt, p99_us=p99, ci95=Ci95(p99=(p99 - w, p99 + w)))
        paths.append(replace(p, rtt=rtt))
    return replace(run, paths=PathTable.from_paths(paths))


def test_changes_inside_both_confidence_intervals_are_noise(
    tmp_path: Path, netqual: Callable[..., Run]
) -> None:
    run = make_results(4, all_safe=True)
    write_results(tmp_path / "a.json", _with_ci(run, 1.0, 10.0))
    write_results(tmp_path / "b.json", _with_ci(run, 1.08, 10.0))  # +8%: the CIs overlap
    d = netqual("diff", "a.json", "b.json", cwd=tmp_path)
    assert d.returncode == 0, d.stderr
    assert "0 paths worse" in d.stdout
    text = " ".join(d.stdout.split())
    assert "6 of 6 changes lie within the run-to-run noise" in text
    assert "(+8%), noise" in text
    write_results(tmp_path / "c.json", _with_ci(run, 1.5, 10.0))  # +50%: clearly apart
    text = " ".join(netqual("diff", "a.json", "c.json", cwd=tmp_path).stdout.split())
    assert "0 of 6 changes lie within the run-to-run noise" in text
    assert "6 paths worse" in text


def _tail_up(run: Results, scale: float, half_width_pct: float) -> Results:
    """The tail (p99, p999, max) times ``scale``, p99 with a CI of +-half_width_pct."""
    paths = []
    for p in run.paths:
        assert p.rtt is not None
        p99 = p.rtt.p99_us * scale
        w = p99 * half_width_pct / 100
        rtt = replace(p.rtt, p99_us=p99, p999_us=p.rtt.p999_us * scale,
                      max_us=p.rtt.max_us * scale, ci95=Ci95(p99=(p99 - w, p99 + w)))  # fmt: skip
        paths.append(replace(p, rtt=rtt))
    return replace(run, paths=PathTable.from_paths(paths))


def test_a_p99_rise_within_both_intervals_still_fails_and_says_so(
    tmp_path: Path, netqual: Callable[..., Run]
) -> None:
    # min_delta_us is the rule's noise floor; the intervals tell the reader to re-test
    run = make_results(3, all_safe=True)
    write_results(tmp_path / "old.json", _tail_up(run, 1.0, 10.0))
    write_results(tmp_path / "wide.json", _tail_up(run, 1.5, 40.0))  # CIs overlap
    write_results(tmp_path / "tight.json", _tail_up(run, 1.5, 10.0))  # CIs apart
    (tmp_path / "gate.toml").write_text(PROFILE)
    outs = {}
    for new in ("wide", "tight"):
        g = netqual("gate", f"{new}.json", "--profile", "gate.toml", "--baseline", "old.json",
                    cwd=tmp_path)  # fmt: skip
        assert g.returncode == 1, g.stdout
        outs[new] = " ".join(g.stdout.split())
    assert outs["wide"].count("(+50%, within run-to-run noise: the 95% CIs overlap)") == 3
    assert "(+50%)" in outs["tight"] and "noise" not in outs["tight"]
    d = netqual("diff", "old.json", "wide.json", "--profile", "gate.toml", cwd=tmp_path)
    text = " ".join(d.stdout.split())
    assert "3 paths worse" in text and text.count("(+50%), noise") >= 3
