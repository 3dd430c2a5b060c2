"""`netqual run --dry-run` prices every step a run takes (issue 36, "Estimates that learn"):
with --engine the engine's paths (and its range where start-up is unknown), with
--multirail the node pairs' rail levels, printed like the other phases, in --json, and
calibrated by an earlier run that measured them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results

from netqual.model.engine import EngineCell, EngineName, EngineOp, EngineTransport
from netqual.model.plan import ProbePlan
from netqual.planning import stepcosts
from netqual.run.engine_cells import plan_for


def _railed(tmp_path: Path, n: int = 3) -> Path:
    text = ""
    for i in range(1, n + 1):
        nics = ", ".join(
            f'{{ name = "r{r}", address = "198.18.{200 + r}.{i}", rail = {r} }}' for r in (0, 1)
        )
        text += f'[[node]]\nname = "h{i}"\naddress = "198.18.0.{i}"\nnics = [{nics}]\n'
    inv = tmp_path / "rails.toml"
    inv.write_text(text)
    return inv


def _cli(tmp_path: Path, mp: pytest.MonkeyPatch, cap: pytest.CaptureFixture[str], *a: str) -> Any:
    return run_in_process(list(a), tmp_path, mp, cap)


def test_engine_and_multirail_are_phases_of_the_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = _railed(tmp_path)
    args = ["run", str(inv), "--dry-run", "--engine", "mooncake", "--multirail", "2"]
    r = _cli(tmp_path, monkeypatch, capsys, *args)
    assert r.returncode == 0, r.stderr
    lines = [" ".join(x.split()) for x in r.stdout.splitlines()]
    engine = next(x for x in lines if x.startswith("engine "))
    # 6 NIC paths (3 per rail), each its workers and READ/WRITE at depths 1 and 8; the
    # range is what an unknown host's start-up may take, and the line says so
    assert "6 paths one at a time x (mooncake workers' start, connect and teardown" in engine
    assert "4 cells of" in engine and " to " in engine.split("(")[1]
    assert "mooncake start-up on a host no run has measured: 1-5 s a path (the range)" in engine
    multirail = next(x for x in lines if x.startswith("multirail "))
    assert "2 node pair(s) x 4 levels (1 to R rails at once)" in multirail
    order = [x.split()[0] for x in lines if x.split() and x.split()[0] in stepcosts.ITEMISED]
    assert order == ["engine", "multirail"]
    r = _cli(tmp_path, monkeypatch, capsys, *args, "--json")
    est = json.loads(r.stdout)["estimate"]
    phases = est["phases"]
    assert phases["engine"]["count"] == 6 and phases["multirail"]["count"] == 4
    assert phases["engine"]["low_s"] < phases["engine"]["seconds"] < phases["engine"]["high_s"]
    assert phases["engine"]["calibrated_by"] == 0  # the stated model's range, not a run's
    total = sum(p["seconds"] for k, p in phases.items() if k != "total_s")
    assert est["duration_s"] == pytest.approx(total, abs=0.01)
    # without --engine or --multirail there are no such phases; --multirail needs NICs
    r = _cli(tmp_path, monkeypatch, capsys, "run", str(inv), "--dry-run", "--json")
    assert not set(json.loads(r.stdout)["estimate"]["phases"]) & set(stepcosts.ITEMISED)
    plain = tmp_path / "plain.toml"
    plain.write_text(inv.read_text().split("nics")[0] + "\n" + '[[node]]\nname = "x"\n'
                     'address = "198.18.0.9"\n')  # fmt: skip
    r = _cli(tmp_path, monkeypatch, capsys, "run", str(plain), "--dry-run", "--multirail", "1")
    assert r.returncode == 2 and "--multirail" in r.stderr


def _cells(gbps: float) -> tuple[EngineCell, ...]:
    return tuple(
        EngineCell(
            EngineName.MOONCAKE, "0.3", op, 64 << 10, depth, EngineTransport.TCP, "eth0",
            ops=500, goodput_gbps=gbps, first_op_us=2_000.0,
        )
        for op in EngineOp
        for depth in (1, 8)
    )  # fmt: skip


def test_an_earlier_engine_run_calibrates_the_engine_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An earlier run of the same plan that measured each path's engine cells and took
    70 s for them: the estimate is 70 s, +-35%; twice the operations add theirs at its
    measured rates; a run that measured another engine leaves it uncalibrated."""
    res = make_results(8, all_safe=True)
    keys = res.paths.keys()  # (src, dst) of every path
    table = res.paths.with_engine(dict.fromkeys(keys, _cells(2.0)))
    plan = ProbePlan()  # the default plan, as the dry run below
    eplan = plan_for(EngineName.MOONCAKE, plan, EngineTransport.TCP)
    steps = stepcosts.StepPlan("tcp", 10.0, 0.5, eplan, len(table), 100.0)
    rates = stepcosts.StepRates.of(table.engine, (), table.keys())
    own = stepcosts.works(steps, rates)["engine"]

    def earlier(name: str, engine: str) -> Path:
        sched = {
            "actual": {"preflight_s": 0.3, "pingpong_s": 6.0, "bulk_s": 9.0, "engine_s": 70.0},
            "calibration": {
                "work_s": {"preflight": 0.1, "pingpong": 3.0, "bulk": 9.0},
                "items": {"engine": own.to_dict(engine)},
            },
        }
        run = dataclasses.replace(res.run, schedule=sched)
        out = tmp_path / name
        out.mkdir()
        write_results(out / "results.json", dataclasses.replace(res, run=run, paths=table))
        return out

    inv = tmp_path / "inv.toml"
    inv.write_text(
        "".join(f'[[node]]\nname = "{n.name}"\naddress = "{n.address}"\n' for n in res.nodes)
    )
    first = earlier("first", "mooncake")
    args = ["run", str(inv), "--dry-run", "--engine", "mooncake", "--calibrate-from", str(first)]
    r = _cli(tmp_path, monkeypatch, capsys, *args, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["estimate"]["phases"]["engine"]
    assert got["seconds"] == pytest.approx(70.0, abs=0.01) and got["calibrated_by"] == 1
    assert (got["low_s"], got["high_s"]) == pytest.approx((45.5, 94.5), abs=0.01)
    text = " ".join(_cli(tmp_path, monkeypatch, capsys, *args).stdout.split())
    assert "calibrated by 1 earlier run (its measured seconds per item + what they move" in text
    assert "on a host no run has measured" not in text
    # READ and WRITE at depth 1 only: the paths' items as measured, half the cells at its rates
    one = dataclasses.replace(steps, engine=dataclasses.replace(eplan, depths=(1,)))
    moving = stepcosts.works(one, rates)["engine"].moving_s
    r = _cli(tmp_path, monkeypatch, capsys, *args, "--json", "--depth", "1")
    got = json.loads(r.stdout)["estimate"]["phases"]["engine"]
    assert got["seconds"] == pytest.approx(70.0 - own.moving_s + moving, abs=0.01)
    assert moving == pytest.approx(own.moving_s / 2)
    # a node the earlier run started no engine on: its 8 paths' start-up widens the range
    wider = tmp_path / "wider.toml"
    wider.write_text(inv.read_text() + '[[node]]\nname = "new"\naddress = "198.18.7.7"\n')
    r = _cli(tmp_path, monkeypatch, capsys, "run", str(wider), "--dry-run", "--engine",
             "mooncake", "--calibrate-from", str(first))  # fmt: skip
    engine = " ".join(next(x for x in r.stdout.splitlines() if " engine " in x).split())
    assert "8 of 36 paths touch a node no earlier run started mooncake on" in engine
    # measured with another engine: says nothing of mooncake's start-up
    nixl = earlier("nixl", "nixl")
    r = _cli(tmp_path, monkeypatch, capsys, "run", str(inv), "--dry-run", "--engine",
             "mooncake", "--calibrate-from", str(nixl))  # fmt: skip
    engine = next(x for x in r.stdout.splitlines() if x.strip().startswith("engine "))
    assert "uncalibrated (no earlier run of it)" in " ".join(engine.split())
    assert "on a host no run has measured" in " ".join(engine.split())
