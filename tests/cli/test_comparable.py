"""Runs that measured differently are not compared: `diff`, `gate --baseline` and
`campaign add` refuse (exit 2, naming the field) runs that differ in transport, ping-pong
size, policy metric or chunk set; --allow-incomparable compares them anyway and then every
output of the command says so (terminal, JSON, JUnit, HTML)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Run, run_in_process
from factories import make_results, write_results

from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.stats import Metric

REFUSED = "not comparable; --allow-incomparable compares them anyway"
NOTE = "compared anyway (--allow-incomparable)"


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Callable[..., Run]:
    def call(*args: str) -> Run:
        return run_in_process(list(args), tmp_path, monkeypatch, capsys)

    return call


def _run(tmp: Path, name: str, edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """A run directory with a results.json, edited as a user could edit it."""
    out = tmp / name
    out.mkdir()
    path = write_results(out / "results.json", make_results(5, seed=3))
    if edit is not None:
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
    return out


def _rdma(doc: dict[str, Any]) -> None:
    """RDMA-looking results (no RDMA device here): the run's transport and every path's."""
    doc["run"]["transport"] = "rdma"
    for p in doc["paths"]:
        p["transport"] = "rdma"


def test_diff_of_a_tcp_and_an_rdma_run_exits_2_naming_transport(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    _run(tmp_path, "run1")
    _run(tmp_path, "run2", _rdma)
    r = cli("diff", "run1", "run2")
    assert r.returncode == 2, r.stdout
    said = " ".join(r.stderr.split())
    assert (
        f"run2/results.json and run1/results.json differ in transport (rdma vs tcp): {REFUSED}"
        in said
    )
    assert r.stdout == ""


@pytest.mark.parametrize(
    ("edit", "differs"),
    [
        (lambda d: d["run"]["plan"].update(size_bytes=4096), "ping-pong size (4KiB vs 64B)"),
        (lambda d: d["run"]["policy"].update(metric="p999"), "policy metric (p999 vs p99)"),
        (
            lambda d: d["run"]["plan"].update(chunks_bytes=[1 << 20]),
            "chunk set (1MiB vs 64KiB, 1MiB, 8MiB)",
        ),
        (lambda d: d["run"]["plan"].update(bulk=False), "chunk set (no bulk vs 64KiB, 1MiB, 8MiB)"),
    ],
)
def test_each_field_is_named(
    cli: Callable[..., Run], tmp_path: Path, edit: Callable[[dict[str, Any]], None], differs: str
) -> None:
    _run(tmp_path, "run1")
    _run(tmp_path, "run2", edit)
    r = cli("diff", "run1", "run2")
    assert r.returncode == 2 and f"differ in {differs}: {REFUSED}" in " ".join(r.stderr.split())


def test_several_fields_are_named_together_and_a_same_setup_is_compared(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    def both(d: dict[str, Any]) -> None:
        _rdma(d)
        d["run"]["policy"]["metric"] = "p50"

    _run(tmp_path, "run1")
    _run(tmp_path, "run2", both)
    _run(tmp_path, "run3")
    said = " ".join(cli("diff", "run1", "run2").stderr.split())
    assert "differ in transport (rdma vs tcp), policy metric (p50 vs p99): not comparable" in said
    same = cli("diff", "run1", "run3")
    assert same.returncode == 0 and "not comparable" not in same.stdout + same.stderr


def test_an_older_file_without_a_plan_is_judged_on_what_it_recorded(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """No plan recorded: size and chunks unknown, not judged; the transport still is."""
    _run(tmp_path, "run1", lambda d: d["run"].pop("plan"))
    _run(tmp_path, "run2", lambda d: d["run"]["plan"].update(size_bytes=4096))
    assert cli("diff", "run1", "run2").returncode == 0
    _run(tmp_path, "run3", _rdma)
    assert cli("diff", "run1", "run3").returncode == 2


def test_diff_compared_anyway_says_so_in_every_output(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    _run(tmp_path, "run1")
    _run(tmp_path, "run2", _rdma)
    r = cli("diff", "run1", "run2", "--allow-incomparable", "--html", "diff.html")
    assert r.returncode == 0, r.stderr
    said = f"not comparable with the old run: differ in transport (rdma vs tcp); {NOTE}"
    assert f"warning: {said}" in " ".join(r.stdout.split())
    page = re.sub(r"<[^>]+>", "", (tmp_path / "diff.html").read_text())  # span.opt
    assert said in page
    doc = json.loads(cli("diff", "run1", "run2", "--allow-incomparable", "--json").stdout)
    assert doc["incomparable"] == [{"field": "transport", "new": "rdma", "old": "tcp"}]
    plain = json.loads(cli("diff", "run1", "run1", "--json").stdout)
    assert "incomparable" not in plain


def test_gate_baseline_refuses_then_says_so_in_every_output(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    _run(tmp_path, "run1")
    _run(tmp_path, "run2", _rdma)
    refused = cli("gate", "run2", "--baseline", "run1")
    assert refused.returncode == 2
    assert (
        f"run2/results.json and run1/results.json differ in transport (rdma vs tcp): {REFUSED}"
        in (" ".join(refused.stderr.split()))
    )
    said = f"not comparable with the baseline: differ in transport (rdma vs tcp); {NOTE}"
    args = ("gate", "run2", "--baseline", "run1", "--allow-incomparable")
    r = cli(*args, "--junit", "gate.xml")
    assert r.returncode == 0 and said in " ".join(r.stdout.split())  # every rule holds
    assert said in (tmp_path / "gate.xml").read_text()
    assert said in json.loads(cli(*args, "--json").stdout)["notes"]


def test_campaign_add_refuses_a_run_unlike_the_first_then_adds_it_saying_so(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    cli("campaign", "init", "joint", "--start", "2026-11-23")
    assert cli("campaign", "add", "joint", str(_run(tmp_path, "run1"))).returncode == 0

    def later_rdma(d: dict[str, Any]) -> None:  # another run (its own id), a week later
        _rdma(d)
        d["run"]["started_at"] = "2026-12-06T12:00:00+00:00"

    run2 = _run(tmp_path, "run2", later_rdma)
    r = cli("campaign", "add", "joint", str(run2))
    assert r.returncode == 2
    assert "differ in transport (rdma vs tcp): not comparable; --allow-incomparable adds them" in (
        " ".join(r.stderr.split())
    )
    ok = cli("campaign", "add", "joint", str(run2), "--allow-incomparable")
    assert ok.returncode == 0, ok.stderr
    said = (
        "warning: not comparable with the campaign's first run: differ in transport (rdma vs tcp)"
    )
    assert said in " ".join(ok.stdout.split())


def test_the_same_checks_hold_for_records_as_for_files() -> None:
    """Setup.of reads a run's meta as the CLI does: one rule (netqual.analysis.comparable)."""
    from netqual.analysis.comparable import Setup

    res = make_results(3)
    other = replace(
        res.run, transport="rdma", policy=Policy(metric=Metric.P50), plan=ProbePlan(size_bytes=8)
    )
    found = Setup.of(other).differences(Setup.of(res.run))
    assert [d.field for d in found] == ["transport", "ping-pong size", "policy metric"]
