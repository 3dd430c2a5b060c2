"""`netqual run --dry-run`: the plan and an estimate, without contacting any agent."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results

from netqual.model.plan import ProbePlan
from netqual.planning.estimate import DurationModel


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
    # default coverage (all) on the default non-blocking fabric: one bulk wave per round
    assert (d["bulk_pairs"], d["bulk_waves"]) == (523_776, 1023)
    assert d["fabric"].startswith("non-blocking")
    model, plan = DurationModel(), ProbePlan()
    est = d["estimate"]["phases"]
    assert est["pingpong"]["seconds"] == pytest.approx(
        1023 * model.pingpong_s(plan, "tcp"), rel=1e-6
    )
    assert est["bulk"]["seconds"] == pytest.approx(1023 * model.bulk_s(plan, "tcp"), rel=1e-6)
    assert est["interference"]["count"] == 64  # 2% of the paths, capped at 64
    assert est["preflight"]["count"] == 1024
    # 16 groups of 64 at 0.1 s each are 1.6 s; the coordinator's part, one agent at a time,
    # is longer: 1,024 x 2.5 ms
    assert est["preflight"]["seconds"] == pytest.approx(1024 * model.check_each_s, rel=1e-3)
    total = sum(est[k]["seconds"] for k in ("preflight", "pingpong", "bulk", "interference"))
    assert d["estimate"]["duration_s"] == pytest.approx(total, abs=0.01)
    assert total < 10 * 3600  # the default plan fits a working day
    assert d["preview"][0][0] == ["n0000", "n1023"]
    assert not (tmp_path / "netqual-out").exists()


def test_bulk_waves_follow_the_fabric_and_the_coverage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = tmp_path / "racks.toml"
    inv.write_text(
        "".join(
            f'[[node]]\nname = "n{i:02d}"\naddress = "198.18.0.{i + 1}"\nrack = "r{1 + i // 32}"\n'
            for i in range(64)
        )
    )

    def dry(*extra: str) -> dict[str, object]:
        args = ["run", str(inv), "--dry-run", "--json", *extra]
        r = run_in_process(args, tmp_path, monkeypatch, capsys)
        assert r.returncode == 0, r.stderr
        return dict(json.loads(r.stdout))

    assert dry()["bulk_waves"] == 63
    one = dry("--bulk-pairs", "per-node:1")
    # round 1 pairs r1 with r2 only: r1-r1 and r2-r2 get one pair each on top
    assert one["bulk_pairs"] == 32 + 2 and one["bulk_waves"] == 2
    inv.write_text(inv.read_text() + "[rack.r1]\noversubscription = 4\n")
    oversubscribed = dry()
    assert "1 rack stated" in str(oversubscribed["fabric"])
    assert int(str(oversubscribed["bulk_waves"])) > 63
    assert dry("--no-bulk")["bulk_waves"] == 0


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
    assert "preflight" in r.stdout and "interference" in r.stdout and "  bulk" not in r.stdout
    assert "fabric: non-blocking" in r.stdout
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


@pytest.mark.parametrize("profile", ["mooncake", "nixl", "sglang-hicache"])
def test_a_sliced_fetch_profile_over_rdma_is_planned(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    profile: str,
) -> None:
    """Fetch profiles run over verbs too (docs/fanin.md): no longer a usage error."""
    inv = tmp_path / "fanin.toml"
    inv.write_text(
        "".join(
            f'[[node]]\nname = "{name}"\naddress = "198.18.0.{i + 1}"\nrole = "{role}"\n'
            for i, (name, role) in enumerate(
                (("c1", "compute"), ("c2", "compute"), ("st", "storage"))
            )
        )
    )
    argv = ["run", str(inv), "--mode", "bipartite", "--fanin", "1,2", "--transport", "rdma"]
    argv += ["--fetch-profile", profile, "--dry-run", "--json"]
    r = run_in_process(argv, tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["estimate"]["phases"]["fanin"]["count"] == 2


def _earlier_run(tmp_path: Path, name: str, **run: Any) -> tuple[Path, Path]:
    """A finished run of 8 nodes (results.json) and the inventory of its nodes; ``run``
    replaces fields of its RunMeta (schedule: what it took and recorded)."""
    res = make_results(8, all_safe=True)
    sched = {
        "actual": {"preflight_s": 0.3, "pingpong_s": 6.0, "bulk_s": 9.0, "interference_s": 2.0},
        "calibration": {"work_s": {"preflight": 0.1, "pingpong": 3.0, "bulk": 9.0}},
    }
    res = dataclasses.replace(res, run=dataclasses.replace(res.run, **{"schedule": sched, **run}))
    out = tmp_path / name
    out.mkdir()
    write_results(out / "results.json", res)
    inv = tmp_path / "inv.toml"
    inv.write_text(
        "".join(f'[[node]]\nname = "{n.name}"\naddress = "{n.address}"\n' for n in res.nodes)
    )
    return out, inv


def test_calibrate_from_refuses_a_run_that_cannot_calibrate_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def dry(run: Path, inv: Path) -> str:
        args = ["run", str(inv), "--dry-run", "--calibrate-from", str(run)]
        r = run_in_process(args, tmp_path, monkeypatch, capsys)
        assert r.returncode == 2, r.stdout + r.stderr
        return " ".join(r.stderr.split())

    run, inv = _earlier_run(tmp_path, "cut", complete=False)
    assert "--calibrate-from: " in dry(run, inv) and "an interrupted run" in dry(run, inv)
    run, inv = _earlier_run(tmp_path, "rdma", transport="rdma")
    assert "measured over rdma; this run is tcp" in dry(run, inv)
    run, inv = _earlier_run(tmp_path, "old", schedule={})
    assert "records no calibration (written by a netqual without it)" in dry(run, inv)
    run, _ = _earlier_run(tmp_path, "fine")
    other = tmp_path / "other.toml"
    other.write_text(
        "".join(f'[[node]]\nname = "x{i}"\naddress = "198.18.9.{i}"\n' for i in (1, 2))
    )
    assert "measured none of this inventory's nodes" in dry(run, other)


def test_calibrate_from_a_campaign_uses_its_latest_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run, inv = _earlier_run(tmp_path, "week1")

    def cli(*args: str) -> Any:
        return run_in_process(list(args), tmp_path, monkeypatch, capsys)

    assert cli("campaign", "init", "joint").returncode == 0
    assert cli("campaign", "add", "joint", str(run), "--week", "1").returncode == 0
    r = cli("run", str(inv), "--dry-run", "--json", "--calibrate-from", "joint")
    assert r.returncode == 0, r.stderr
    est = json.loads(r.stdout)["estimate"]
    assert est["calibrated_by"] == [str(run.resolve())]
    # the earlier run's factor (actual / its own work) on this plan's work at its rates
    assert est["phases"]["preflight"]["calibrated_by"] == 1
    assert est["phases"]["preflight"]["seconds"] > 0
    r = cli("run", str(inv), "--dry-run", "--calibrate-from", "joint")
    assert "expected" in r.stdout and "calibrated by 1 earlier run of this inventory" in " ".join(
        r.stdout.split()
    )


def test_ten_thousand_nodes_with_50_mb_of_labels_plan_in_bounded_time_and_memory(
    tmp_path: Path,
) -> None:
    """50 million pairs: the bulk waves are packed for an even sample of the rounds and
    scaled (estimate.MAX_PACKED_PAIRS); packing every pair took over 300 s and 10 GB.
    CPU time and peak memory of the child, not wall time (the host is shared): measured
    ~7 s and ~370 MiB here."""
    import subprocess
    import sys

    from agentpool import cli_env

    labels = ", ".join(f'k{j} = "{"v" * 40}{j}"' for j in range(100))
    lines = ["[defaults]\nport = 7000\n"]
    for i in range(10_000):
        lines.append(
            f'[[node]]\nname = "n{i:05d}"\naddress = "198.18.{i // 250}.{i % 250 + 1}"\n'
            f'rack = "r{i // 32:04d}"\nlabels = {{ site = "s{i % 3}", {labels} }}\n'
        )
    (tmp_path / "inventory.toml").write_text("\n".join(lines))
    # The plan's own CPU time and peak memory, measured by a parent of its own (this test
    # process's RUSAGE_CHILDREN would hold every earlier child's too).
    measure = (
        "import resource, subprocess, sys\n"
        "with open('out.txt', 'w') as out:\n"
        "    rc = subprocess.run(sys.argv[1:], stdout=out).returncode\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(u.ru_utime + u.ru_stime, u.ru_maxrss)\n"
        "sys.exit(rc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "netqual", "run",
         "inventory.toml", "--dry-run"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "out.txt").read_text()
    assert "pairs 49,995,000" in out and "49,995,000 pairs (all) in 9,999 waves" in out
    cpu_s, rss_kib = r.stdout.split()
    assert float(cpu_s) < 30, cpu_s
    assert int(rss_kib) < 2 * 1024 * 1024, rss_kib  # under 2 GiB
