"""diff and the re-qualification gate agree on what is worse (same test, same
thresholds), and diff says which changes lie within the two runs' noise."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from cli_helpers import netqual
from factories import make_results, write_results

from netqual.models import Ci95
from netqual.pathtable import PathTable
from netqual.runresults import Results

PROFILE = """
[profile]
name = "requalify"
metric = "p99"

[baseline]
max_p99_increase_pct = 25
min_delta_us = 5.0
"""


def test_a_57_percent_rise_is_worse_in_diff_and_fails_the_gate(tmp_path: Path) -> None:
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
    assert "1 paths worse" in d.stdout
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


def test_changes_inside_both_confidence_intervals_are_noise(tmp_path: Path) -> None:
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
