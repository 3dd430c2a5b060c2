"""A large run's terminal report stays readable: the worst rack pairs and the first
suspects by default, every one with --all; counts grouped (15,563)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from paths import REPO

sys.path.insert(0, str(REPO / "bench"))
from scale import synthetic_results  # bench/scale.py: the 1,024-node file maker


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """288 nodes in 9 racks: 45 rack pairs, 41,328 paths, a slow node, a slow rack pair."""
    path = tmp_path_factory.mktemp("big") / "results.json"
    synthetic_results(path, 288)
    return path


def test_default_report_fits_60_lines_and_names_the_worst(
    big: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NETQUAL_WIDTH", "100")
    r = run_in_process(["report", str(big)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 60, r.stdout
    # the answer first, the fixes ranked by the paths they hold, then the counts sentence
    assert lines[0].startswith(
        "Decision: GO WITH CONDITIONS (39,921 offload-safe, 1,118 marginal, 289 unsafe)"
    )
    assert lines[2].startswith("  1. racks r001<->r002 (RTT, 1,024 paths)")
    sentence = next(ln for ln in lines if ln.startswith("39,921 of 41,328 paths offload-safe"))
    assert "289 unsafe" in sentence and "1,118 marginal" in sentence
    assert "by rack pair (us): the 8 worst of 45" in r.stdout
    # worst first (issue 36: listed in rack order, the 100%-marginal pair last): the
    # all-marginal rack pair heads the table, and each row's share of bad paths (marginal
    # plus unsafe over paths) never rises down the table
    at = lines.index(next(x for x in lines if x.startswith("by rack pair (us): the 8 worst")))
    rows = [x.split("│")[1:-1] for x in lines[at + 1 : at + 14] if "<->" in x]
    cells = [[c.strip().replace(",", "") for c in row] for row in rows]
    assert len(cells) == 8 and cells[0][0] == "r001 <-> r002", r.stdout
    share = [(int(c[5]) + int(c[6])) / int(c[1]) for c in cells]
    assert share == sorted(share, reverse=True), r.stdout
    # and a suspect's counts are grouped too ("1,023 of 1,023", not "1023 of 1023")
    assert not [x for x in lines if re.search(r"\d{4} of \d", x)], r.stdout
    assert "... 37 more rack pairs" in r.stdout and "--all shows every one" in r.stdout
    # the slow node, the slow rack pair and the two failed paths, every one shown; the 0.2%
    # of paths marginal at random are tails alone, no cause: no link (docs/report.md)
    suspects = r.stdout.split("suspects (where the problem sits", 1)[1]
    assert "node n00003: 287 of 287 paths not offload-safe" in " ".join(suspects.split())
    assert "rack-pair r001<->r002:" in suspects and suspects.count("\n  link ") == 2
    assert "failed (no samples) where its peers read p99" in " ".join(suspects.split())
    assert "more in results.json" not in r.stdout
    everything = run_in_process(["report", str(big), "--all"], tmp_path, monkeypatch, capsys)
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.count(" <-> r0") >= 45 and "more rack pairs" not in everything.stdout
    assert "more in results.json" not in everything.stdout


def test_piped_output_keeps_headlines_whole_and_tables_at_120_columns(
    big: Path, tmp_path: Path
) -> None:
    """Issue 36: piped output wrapped at rich's 80 columns, splitting the headline; the
    width is NETQUAL_WIDTH, else the terminal's, else 120 when piped (README)."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("NETQUAL_WIDTH", "COLUMNS")}
    env["PYTHONPATH"] = str(REPO)
    cmd = [sys.executable, "-m", "netqual", "report", str(big)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    sentence = next(x for x in lines if x.startswith("39,921 of 41,328 paths offload-safe"))
    # one line, whole: it would have been split at 80 columns
    assert sentence.endswith("1,118 marginal") and len(sentence) > 80, sentence
    policy = next(x for x in lines if x.startswith("policy: "))
    assert policy.endswith("+00:00") and len(policy) > 80, policy
    tables = [x for x in lines if x[:1] in "┏┃│┡└"]
    assert tables and max(map(len, tables)) <= 120
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`NETQUAL_WIDTH=N` sets the width" in readme and "120 columns" in readme
    env["NETQUAL_WIDTH"] = "60"
    narrow = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert max(len(x) for x in narrow.stdout.splitlines() if x[:1] in "┏┃│┡└") <= 60
