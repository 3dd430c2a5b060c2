"""Localisation: a slow node, a slow rack pair, one bad link and a one-way problem are each
named as such, with their evidence; the results file carries them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results

from netqual.analysis.localise import suspects
from netqual.model.path import PathResult
from netqual.model.suspects import (
    AsymmetryEvidence,
    LinkEvidence,
    NodeEvidence,
    NodeSubject,
    RackPairEvidence,
    SuspectKind,
)
from netqual.model.verdict import Verdict
from netqual.results import load, results_to_dict
from netqual.table.paths import PathTable
from netqual.table.run import Results


def kinds(r: Results) -> dict[SuspectKind, list[str]]:
    out: dict[SuspectKind, list[str]] = {k: [] for k in SuspectKind}
    for s in suspects(r):
        out[s.kind].append(s.subject)
    return out


def test_a_slow_node_is_a_node_suspect_with_counts_and_medians() -> None:
    r = make_results(16, rack_size=4, slow_nodes=["gpu03"])
    found = suspects(r)
    assert [(s.kind, s.subject) for s in found] == [(SuspectKind.NODE, "gpu03")]
    e = found[0].evidence
    assert isinstance(e, NodeEvidence)
    assert (e.bad_paths, e.paths) == (15, 15)
    assert e.median_us is not None and e.all_paths_median_us is not None
    assert e.median_us >= 600 > 5 * e.all_paths_median_us
    worst = e.worst
    assert "gpu03" in (worst.src, worst.dst)
    mine = [p for p in r.paths if "gpu03" in (p.src, p.dst) and p.rtt is not None]
    assert worst.value_us == max(p.rtt.p99_us for p in mine if p.rtt is not None)


def test_a_slow_rack_pair_is_an_uplink_suspect_not_its_nodes() -> None:
    r = make_results(16, rack_size=4, slow_rack_pairs=[("r01", "r03")])
    k = kinds(r)
    assert k[SuspectKind.RACK_PAIR] == ["r01<->r03"]
    assert k[SuspectKind.NODE] == [] and k[SuspectKind.LINK] == []
    (s,) = [s for s in suspects(r) if s.kind is SuspectKind.RACK_PAIR]
    assert isinstance(s.evidence, RackPairEvidence)
    assert (s.evidence.bad_paths, s.evidence.paths) == (16, 16)


def test_one_bad_path_between_healthy_nodes_is_a_link_suspect() -> None:
    r = make_results(12, rack_size=4, slow_paths=[("gpu02", "gpu07", 700.0)])
    (s,) = suspects(r)
    assert (s.kind, s.subject) == (SuspectKind.LINK, "gpu02->gpu07")
    e = s.evidence
    assert isinstance(e, LinkEvidence)
    assert e.path.verdict is Verdict.UNSAFE and e.path.value_us == 700.0
    assert (e.src_bad_elsewhere, e.src_paths_elsewhere) == (0, 10)


def test_a_bad_path_whose_ends_have_no_other_judged_path_names_no_link() -> None:
    """Nothing tells the link from its two ends (the demo's st1 -> st2, whose other paths
    are all distance-explained, once read "elsewhere st1 has 0 of 0 paths bad")."""
    r = make_results(2, rack_size=2, slow_paths=[("gpu01", "gpu02", 700.0)])
    assert [p.verdict for p in r.paths] == [Verdict.UNSAFE]
    assert suspects(r) == ()


def _reversed(p: PathResult, p99_us: float, verdict: Verdict) -> PathResult:
    assert p.rtt is not None
    rtt = dataclasses.replace(p.rtt, p99_us=p99_us)
    return dataclasses.replace(p, src=p.dst, dst=p.src, rtt=rtt, verdict=verdict)


def test_a_pair_whose_directions_disagree_is_an_asymmetry_suspect() -> None:
    r = make_results(6, rack_size=3, all_safe=True)
    healthy, odd = r.paths[0], r.paths[1]
    assert odd.rtt is not None
    extra = (
        _reversed(healthy, healthy.rtt.p99_us * 1.1 if healthy.rtt else 0, healthy.verdict),
        _reversed(odd, 650.0, Verdict.UNSAFE),
    )
    r = dataclasses.replace(r, paths=PathTable.from_paths([*r.paths, *extra]))
    asym = [s for s in suspects(r) if s.kind is SuspectKind.ASYMMETRY]
    assert [s.subject for s in asym] == [f"{odd.src}<->{odd.dst}"]
    ev = asym[0].evidence
    assert isinstance(ev, AsymmetryEvidence)
    assert ev.ratio == pytest.approx(650.0 / odd.rtt.p99_us)


def test_healthy_run_has_no_suspects_and_no_key() -> None:
    r = make_results(8, all_safe=True)
    assert suspects(r) == ()
    assert "suspects" not in results_to_dict(r)


def test_suspects_round_trip_and_show_in_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    r = make_results(16, rack_size=4, slow_nodes=["gpu03"])
    r = dataclasses.replace(r, suspects=suspects(r))
    f = write_results(tmp_path / "results.json", r)
    assert load(f).suspects == r.suspects
    out = run_in_process(["report", str(f)], tmp_path, monkeypatch, capsys)
    assert out.returncode == 0, out.stderr
    assert "suspects (where the problem sits)" in out.stdout
    assert "node gpu03: 15 of 15 paths not offload-safe" in out.stdout


def test_readers_use_the_stored_suspects_and_compute_them_only_for_files_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    r = make_results(16, rack_size=4, slow_nodes=["gpu03"])
    (found,) = [s for s in suspects(r) if s.kind is SuspectKind.NODE]
    # stored under another name: only a reader of the stored suspects can show "gpu05"
    moved = dataclasses.replace(
        r, suspects=(dataclasses.replace(found, about=NodeSubject("gpu05")),)
    )
    stored = write_results(tmp_path / "stored.json", moved)
    bare = write_results(tmp_path / "bare.json", r)
    assert load(bare).suspects is None
    html = tmp_path / "report.html"
    out = run_in_process(
        ["report", str(stored), "--html", str(html)], tmp_path, monkeypatch, capsys
    )
    assert out.returncode == 0, out.stderr
    assert "node gpu05: 15 of 15 paths not offload-safe" in out.stdout
    assert "gpu03: 15 of 15" not in out.stdout
    assert "gpu05" in html.read_text(encoding="utf-8")
    out = run_in_process(["report", str(bare)], tmp_path, monkeypatch, capsys)
    assert out.returncode == 0, out.stderr
    assert "node gpu03: 15 of 15 paths not offload-safe" in out.stdout


def test_the_terminal_shows_the_first_suspects_and_counts_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    r = make_results(16, rack_size=4, slow_nodes=["gpu03"])
    (found,) = [s for s in suspects(r) if s.kind is SuspectKind.NODE]
    many = tuple(dataclasses.replace(found, about=NodeSubject(f"gpu{i:02d}")) for i in range(9))
    path = write_results(tmp_path / "many.json", dataclasses.replace(r, suspects=many))
    out = run_in_process(["report", str(path)], tmp_path, monkeypatch, capsys)
    assert out.returncode == 0, out.stderr
    assert "... and 3 more in results.json (--all shows them)" in out.stdout
    every = run_in_process(["report", str(path), "--all"], tmp_path, monkeypatch, capsys)
    assert "node gpu08:" in every.stdout and "more in results.json" not in every.stdout
