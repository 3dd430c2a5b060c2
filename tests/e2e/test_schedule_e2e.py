"""Phases and bulk budgets with real agents on loopback, through ``netqual run``.

Every agent listens on its own loopback address (127.0.0.x), so the scheduler sees seven
hosts. Concurrency is read from the windows recorded around each phase request
(``details.phase_windows_s``): a bulk transfer happens inside its request's window, so
the largest number of overlapping windows bounds the real concurrency from above.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool, new_token_file
from cli_helpers import Run, run_in_process
from e2e_cli import netqual_here

from netqual.results import load

SMALL = [
    "--iterations",
    "300",
    "--warmup",
    "30",
    "--chunk",
    "1MiB",
    "--depth",
    "2",
    "--allow-short-plan",
]


@pytest.fixture(scope="module")
def bipartite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Six compute agents and one storage agent, shared by this module's runs."""
    tmp_path = tmp_path_factory.mktemp("bipartite")
    agents = AgentPool(tmp_path, new_token_file(tmp_path))
    try:
        yield _bipartite(agents, tmp_path)
    finally:
        agents.close()


def _bipartite(agents: AgentPool, tmp_path: Path) -> Path:
    specs: list[tuple[str, ...]] = [(f"c{i}", "--listen", f"127.0.0.{10 + i}:0") for i in range(6)]
    specs.append(("st", "--listen", "127.0.0.20:0"))
    started = agents.start_many(specs, timeout_s=90)
    lines = [f'[defaults]\ntoken_file = "{agents.token_file}"\n[run]\nmode = "bipartite"\n']
    for a, spec in zip(started, specs, strict=True):
        role = "storage" if a.name == "st" else "compute"
        host = spec[2].rsplit(":", 1)[0]
        lines.append(
            f'[[node]]\nname = "{a.name}"\naddress = "{host}"\nport = {a.port}\n'
            f'role = "{role}"\nrack = "r1"\n'
        )
    inventory = tmp_path / "inventory.toml"
    inventory.write_text("\n".join(lines))
    return inventory


def max_overlap(windows: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in windows] + [(e, -1) for _, e in windows])
    now = peak = 0
    for _, step in events:  # an end sorts before a start at the same instant
        now += step
        peak = max(peak, now)
    return peak


def windows(doc: dict[str, Any], phase: str) -> list[tuple[float, float]]:
    return [tuple(p["details"]["phase_windows_s"][phase]) for p in doc["paths"]]


def test_bipartite_storage_node_never_has_more_bulk_readers_than_the_cap(
    bipartite: Path, tmp_path: Path
) -> None:
    inventory = bipartite
    out = tmp_path / "capped"
    done = netqual_here(
        "run", str(inventory), "--out", str(out), "--bulk-per-node", "2",
        "--interference-sample", "1", *SMALL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["paths"]) == 6 and all(p["dst"] == "st" for p in doc["paths"])
    assert all(p["error"] is None and p["bulk"] for p in doc["paths"])
    bulk = windows(doc, "bulk")
    # every path reads from st: overlapping bulk windows are concurrent readers of st
    assert max_overlap(bulk) <= 2
    assert max(e for _, e in windows(doc, "pingpong")) <= min(s for s, _ in bulk)
    schedule = doc["run"]["schedule"]
    assert schedule["name"] == "aligned" and schedule["bulk_per_node"] == 2
    assert schedule["bulk"] == "budgeted" and schedule["interference"] == "checked"
    assert doc["interference"]["sample"] == 1
    # estimated vs actual per phase: 6 pairs on one storage host, cap 2, in 3 bulk waves
    est, actual = schedule["estimate"], schedule["actual"]
    assert {"preflight", "pingpong", "bulk", "interference"} <= set(est)
    assert est["bulk"]["count"] == actual["bulk_waves"] == 3 and actual["bulk_pairs"] == 6
    assert est["interference"]["count"] == 1 and actual["bulk_not_selected"] == 0
    # every agent on loopback: the estimate modelled them sharing this host's cores
    assert est["model"]["shared_cores"] == len(os.sched_getaffinity(0))
    assert all(actual[k] > 0 for k in ("preflight_s", "pingpong_s", "bulk_s", "interference_s"))
    assert schedule["fabric"]["assumption"].startswith("non-blocking")
    again = load(out / "results.json")  # validates against the schema and reads back
    assert again.interference is not None and again.interference.sample == 1
    assert again.run.schedule["bulk_per_node"] == 2


def test_incast_is_a_labelled_deliberate_fan_in(bipartite: Path, tmp_path: Path) -> None:
    inventory = bipartite
    out = tmp_path / "incast"
    done = netqual_here(
        "run", str(inventory), "--out", str(out), "--incast", "3",
        "--interference-sample", "0", *SMALL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["schedule"]["bulk"] == "incast" and doc["run"]["schedule"]["incast"] == 3
    assert "interference" not in doc
    assert [p["details"]["incast_readers"] for p in doc["paths"]] == [3] * 6
    assert max_overlap(windows(doc, "bulk")) <= 3


def test_unaligned_schedule_is_kept_and_recorded(
    bipartite: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inventory = bipartite
    out = tmp_path / "unaligned"
    done = netqual_here(
        "run", str(inventory), "--out", str(out), "--schedule", "unaligned",
        "--interference-sample", "0", *SMALL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["schedule"]["name"] == "unaligned"
    assert all(set(p["details"]["phase_windows_s"]) == {"probe"} for p in doc["paths"])

    # Options refused before any agent is asked: the command's entry point in this process.
    def refused(*args: str) -> Run:
        return run_in_process(["run", str(inventory), *args], tmp_path, monkeypatch, capsys)

    bad = refused("--schedule", "sometimes")
    assert bad.returncode == 2 and "--schedule" in bad.stderr and "sometimes" in bad.stderr
    loose = refused("--interference-tolerance", "0.5")
    assert loose.returncode == 2 and "--interference-tolerance" in loose.stderr
    share = refused("--interference-fraction", "2")
    assert share.returncode == 2 and "--interference-fraction" in share.stderr
    zero = refused("--bulk-per-node", "0")
    assert zero.returncode == 2 and "--bulk-per-node" in zero.stderr
    assert not list(tmp_path.glob("netqual-run-*"))  # no default run directory either


def test_bulk_pairs_per_node_leaves_the_rest_pingpong_only_and_says_so(tmp_path: Path) -> None:
    """Four agents in two racks, --bulk-pairs per-node:1: the first round (both pairs cross
    the racks) plus one pair inside each rack get bulk; the other two pairs are judged on
    ping-pong and say why. The report names the fabric assumption and the coverage."""
    agents = AgentPool(tmp_path, new_token_file(tmp_path))
    try:
        specs: list[tuple[str, ...]] = [
            (f"n{i}", "--listen", f"127.0.0.{30 + i}:0") for i in range(4)
        ]
        started = agents.start_many(specs, timeout_s=90)
        lines = [f'[defaults]\ntoken_file = "{agents.token_file}"\n']
        for i, a in enumerate(started):
            lines.append(
                f'[[node]]\nname = "{a.name}"\naddress = "127.0.0.{30 + i}"\nport = {a.port}\n'
                f'rack = "r{i // 2}"\n'
            )
        inventory = tmp_path / "inventory.toml"
        inventory.write_text("\n".join(lines))
        out = tmp_path / "run"
        done = netqual_here(
            "run", str(inventory), "--out", str(out), "--bulk-pairs", "per-node:1",
            "--interference-sample", "0", *SMALL,
        )  # fmt: skip
    finally:
        agents.close()
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "results.json").read_text())
    with_bulk = {(p["src"], p["dst"]) for p in doc["paths"] if p["bulk"]}
    without = [p for p in doc["paths"] if not p["bulk"]]
    assert with_bulk == {("n0", "n3"), ("n1", "n2"), ("n0", "n1"), ("n2", "n3")}
    assert len(without) == 2 and all(p["error"] is None for p in without)
    assert {p["details"]["bulk_pairs"] for p in without} == {"not selected (per-node:1)"}
    schedule = doc["run"]["schedule"]
    assert schedule["bulk_pairs"] == "per-node:1" and schedule["actual"]["bulk_not_selected"] == 2
    assert schedule["estimate"]["bulk"]["count"] == schedule["actual"]["bulk_waves"] == 2
    html = (out / "report.html").read_text()
    assert "bulk pairs: per-node:1" in html and "fabric: non-blocking" in html
