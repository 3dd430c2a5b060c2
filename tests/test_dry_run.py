"""`netqual run --dry-run`: the plan and an estimate, without contacting any agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_in_process

from netqual.estimate import DurationModel
from netqual.models import ProbePlan


def _inventory(tmp_path: Path, n: int, *, shared_host: bool = False) -> Path:
    lines = []
    for i in range(n):
        addr = "198.18.9.1" if shared_host else f"198.18.{i // 250}.{i % 250 + 1}"
        port = 18515 + i if shared_host else 18515
        lines.append(f'[[node]]\nname = "n{i:04d}"\naddress = "{addr}"\nport = {port}\n')
    # No token file exists: a dry run must not need one.
    path = tmp_path / "inv.toml"
    path.write_text('[defaults]\ntoken_file = "missing.token"\n\n' + "\n".join(lines))
    return path


def test_a_thousand_nodes_plan_without_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = _inventory(tmp_path, 1024)
    r = run_in_process(["run", str(inv), "--dry-run", "--json"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["nodes"], d["rounds"], d["pairs"]) == (1024, 1023, 523_776)
    assert d["mode"] == "full-mesh" and d["max_pairs_per_round"] == 512
    pair_s = DurationModel().pair_s(ProbePlan(), "tcp")
    assert d["estimate"]["duration_s"] == pytest.approx(1023 * pair_s, rel=1e-6)
    assert d["preview"][0][0] == ["n0000", "n1023"]
    assert not (tmp_path / "netqual-out").exists()


def test_text_names_rounds_pairs_plan_and_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = _inventory(tmp_path, 6)
    args = ["run", str(inv), "--dry-run", "--no-bulk", "--iterations", "2000"]
    r = run_in_process(args, tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert "no agent contacted" in r.stdout
    assert "rounds 5  pairs 15" in r.stdout
    assert "2,000 iterations" in r.stdout and "no bulk" in r.stdout
    assert "estimated duration:" in r.stdout
    assert "round 1: n0000<->n0005" in r.stdout


def test_pairs_on_one_host_are_estimated_one_after_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = _inventory(tmp_path, 8, shared_host=True)
    args = ["run", str(inv), "--dry-run", "--json", "--no-bulk"]
    d = json.loads(run_in_process(args, tmp_path, monkeypatch, capsys).stdout)
    assert d["batches"] == d["pairs"] == 28
    capped = json.loads(
        run_in_process(
            ["run", str(_inventory(tmp_path, 8)), "--dry-run", "--json", "--parallel", "3"],
            tmp_path,
            monkeypatch,
            capsys,
        ).stdout
    )
    assert capped["batches"] == 7 * 2  # 4 pairs per round, at most 3 at once


def test_bad_mode_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = _inventory(tmp_path, 4)
    r = run_in_process(
        ["run", str(inv), "--dry-run", "--mode", "ring"], tmp_path, monkeypatch, capsys
    )
    assert r.returncode == 2
    assert "--mode" in r.stderr
