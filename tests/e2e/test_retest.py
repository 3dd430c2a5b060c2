"""`netqual retest`: the chosen paths re-measured with a larger plan into a new run that
names the run it re-tests; report and diff show before and after."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from agentpool import AgentPool
from cli_helpers import Run, run_in_process
from e2e_cli import netqual_here, write_inventory

from netqual.base.units import format_us

SMALL = ["--iterations", "400", "--warmup", "20", "--no-bulk", "--allow-short-plan"]


def test_retest_of_marginal_paths_and_of_one_path_both_ways(
    agents: AgentPool, tmp_path: Path
) -> None:
    procs = agents.start_many([(f"n{i}",) for i in range(3)], timeout_s=90)
    inv = tmp_path / "inv.toml"
    write_inventory(inv, procs, agents.token_file)
    run1 = tmp_path / "run1"
    # A short plan on purpose: run refuses it without --allow-short-plan.
    r = netqual_here("run", str(inv), "--out", str(run1), *SMALL, "--allow-short-plan")
    assert r.returncode == 0, r.stderr
    first = json.loads((run1 / "results.json").read_text())
    # 400 samples < the policy's 10,000: no path can be offload-safe, so all three are
    # re-tested (marginal, or unsafe when this loaded machine pushes p99 past 500 us).
    assert "offload-safe" not in {p["verdict"] for p in first["paths"]}

    # Someone planted the old default name (<run>-retest) as a symlink to a directory of the
    # user's: the default out is a new, unguessable directory instead, the plant untouched.
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "run1-retest").symlink_to(victim, target_is_directory=True)
    r = netqual_here("retest", str(run1), "--token-file", str(agents.token_file))
    assert r.returncode == 0, r.stderr
    [new] = tmp_path.glob("run1-retest-*")
    assert re.fullmatch(r"run1-retest-\d{8}-\d{6}-[0-9a-f]{6}", new.name)
    # a long temporary path (an xdist worker's) is folded across lines: compare unfolded
    assert f"into{new}" in "".join(r.stdout.split())
    assert list(victim.iterdir()) == [] and (tmp_path / "run1-retest").is_symlink()
    again = json.loads((new / "results.json").read_text())
    assert again["retest_of"] == str(run1.resolve())
    # Twice the run's would still be preliminary: the default reaches min_samples.
    assert again["run"]["plan"]["iterations"] == 10_000
    assert again["run"]["preliminary"] is False
    assert sorted((p["src"], p["dst"]) for p in again["paths"]) == sorted(
        (p["src"], p["dst"]) for p in first["paths"]
    )
    assert all(p["rtt_us"]["samples"] == 10_000 for p in again["paths"])
    # Every node was re-tested: each agent sent its configuration snapshot at the start,
    # so the decision judges configuration (it said "not judged" in a retest once).
    assert set(again["fleet"]["snapshot"]) == {"n0", "n1", "n2"}
    assert "carried" not in again["fleet"]
    [config] = [e for e in again["decision"]["evidence"] if e["kind"] == "config"]
    assert config["class"] is not None and "3 nodes (asked by this retest)" in config["detail"]

    out2 = tmp_path / "one"
    args = ["retest", str(run1), "--path", "n0:n2", "--both-directions", "--iterations", "600"]
    r = netqual_here(*args, "--out", str(out2))
    assert r.returncode == 0, r.stderr
    both = json.loads((out2 / "results.json").read_text())
    # n1 was not re-tested: its snapshot is the run's, beside n0's and n2's fresh ones
    assert set(both["fleet"]["snapshot"]) == {"n0", "n1", "n2"}
    assert both["fleet"]["carried"] == ["n1"]
    assert both["fleet"]["snapshot"]["n1"] == first["fleet"]["snapshot"]["n1"]
    assert [(p["src"], p["dst"]) for p in both["paths"]] in (
        [("n0", "n2"), ("n2", "n0")],
        [("n2", "n0"), ("n0", "n2")],
    )
    # The terminal matrix (row = source, column = destination) shows each direction's own
    # p99, as results.json has them (it used to print one direction's value in both cells).
    p99 = {(p["src"], p["dst"]): format_us(p["rtt_us"]["p99"]) for p in both["paths"]}
    assert p99[("n0", "n2")] != p99[("n2", "n0")]  # to 0.1 us: a tie would test nothing
    lines = r.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "row = source, column = destination" in line)
    header = [c.strip() for c in lines[at + 2].split("┃")[2:-1]]
    rows = {
        cells[0]: dict(zip(header, cells[1:], strict=True))
        for line in lines[at + 4 : at + 4 + len(header)]
        for cells in [[c.strip() for c in line.split("│")[1:-1]]]
    }
    assert rows["n0"]["n2"] == p99[("n0", "n2")], r.stdout
    assert rows["n2"]["n0"] == p99[("n2", "n0")], r.stdout

    r = netqual_here("report", str(out2 / "results.json"))
    assert r.returncode == 0, r.stderr
    said = f"re-test of {run1.resolve()}: before and after"
    assert "".join(said.split()) in "".join(r.stdout.split())  # unfolded, as above
    r = netqual_here("diff", str(run1 / "results.json"), str(out2 / "results.json"), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["missing_paths"] == []  # paths not re-tested are not "missing"
    assert {(c["src"], c["dst"]) for c in d["deltas"]} == {("n0", "n2"), ("n2", "n0")}


def test_bad_path_and_verdict_are_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No agent is asked: the command's entry point in this process."""
    from factories import make_results, write_results

    def retest(*args: str) -> Run:
        return run_in_process(["retest", *args], tmp_path, monkeypatch, capsys)

    f = write_results(tmp_path / "results.json", make_results(4))
    r = retest(str(f), "--path", "gpu01:nosuch")
    assert r.returncode == 2 and "--path" in r.stderr and "gpu01:nosuch" in r.stderr
    r = retest(str(f), "--verdict", "bad")
    assert r.returncode == 2 and "--verdict" in r.stderr
    safe = write_results(tmp_path / "safe.json", make_results(4, all_safe=True))
    r = retest(str(safe))
    assert r.returncode == 0 and "nothing to re-test" in r.stdout
