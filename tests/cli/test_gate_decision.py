"""The gate judges the decision (docs/gates.md, docs/policy.md "One decision"): the default
profile fails on every blocking piece of evidence naming its subject and cause, a workload
always applies, a rule with nothing in scope is a SKIP that says why, a preliminary
measurement never passes, and one registry of rule keys feeds parsing and the docs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import ROOT, Run, run_in_process
from factories import make_results, write_results

from netqual.base.errors import ProfileError
from netqual.gate import Status, evaluate, parse_profile_text
from netqual.gate.registry import RULES, docs_table
from netqual.model.fleet import ConfigSnapshot, FleetOutlier, FleetResult
from netqual.model.path import PathResult
from netqual.table.paths import PathTable

TODAY = dt.date(2026, 11, 29)
# A local NVMe read at 10 Tbit/s: one chunk on the wire already takes longer.
NEVER_PAYS = """[workload]
name = "tiny-model"
layers = 32
kv_heads = 8
head_dim = 128
dtype = "bf16"
tp = 8
chunk_tokens = 64
local_read_gbps = 10000
"""
# 8 KiB per token per rank, recompute at 1,000 tokens/s: a 64-token chunk is a 64 ms budget
ALWAYS_PAYS = NEVER_PAYS.replace("local_read_gbps = 10000", "prefill_tokens_per_s = 1000")


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def faulty(tmp_path: Path) -> Path:
    """Eight healthy-by-RTT nodes: gpu02 loses packets, gpu03's MTU differs, gpu05's paths
    read at a fifth of the others' goodput."""
    res = make_results(8, all_safe=True)
    names = [n.name for n in res.nodes]

    def change(p: PathResult) -> PathResult:
        side = {"interfaces": {"eth0": {"tx_packets": 5_000}}, "tcp_retrans": 0}
        lost = {**side, "tcp_retrans": 60 if "gpu02" in p.key else 0}
        bulk = p.bulk
        if "gpu05" in p.key:
            bulk = tuple(dataclasses.replace(b, goodput_gbps=b.goodput_gbps / 5) for b in bulk)
        return dataclasses.replace(p, details={"counters": {"src": lost, "dst": side}}, bulk=bulk)

    snaps = tuple(ConfigSnapshot(n, (("mtu", "9000"),)) for n in names)
    mtu = FleetOutlier("gpu03", "mtu", "1500", majority="9000", majority_nodes=("gpu01",))
    res = dataclasses.replace(
        res,
        paths=PathTable.from_paths([change(p) for p in res.paths], names),
        fleet=FleetResult(snaps, (mtu,)),
    )
    return write_results(tmp_path / "r.json", res)


def test_default_gate_names_each_blocking_subject_and_its_cause(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    faulty(tmp_path)
    r = cli("gate", "r.json", "--junit", "j.xml", cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert "no_blocking: what blocks, most paths held first" in r.stdout
    blocking = r.stdout.split("no_blocking: what blocks", 1)[1].split("max_unsafe:", 1)[0]
    lines = [ln.strip() for ln in blocking.splitlines() if ln.startswith("  ")]
    subjects = {ln.split()[0] for ln in lines}
    assert subjects == {"gpu02", "gpu03", "gpu05"}, lines
    text = " ".join(lines)
    assert "loss: " in text and "TCP retransmissions" in text
    assert "configuration: mtu 1500" in text
    assert "bandwidth: every one of its" in text
    for healthy in ("gpu01", "gpu04", "gpu06", "stor01", "stor02"):
        assert not any(ln.startswith(healthy + " ") for ln in lines), healthy
    junit = ET.parse(tmp_path / "j.xml").getroot()
    case = next(c for c in junit.iter("testcase") if c.get("name") == "no_blocking")
    failure = case.find("failure")
    assert failure is not None and "gpu02" in (failure.text or "")


def test_gate_workload_that_can_never_pay_exits_1_and_says_why(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    write_results(tmp_path / "r.json", make_results(6, all_safe=True))
    (tmp_path / "w.toml").write_text(NEVER_PAYS)
    assert cli("gate", "r.json", cwd=tmp_path).returncode == 0
    r = cli("gate", "r.json", "--workload", "w.toml", cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert "tiny-model (TP8)  workload: offload can never pay on 15 of 15 paths" in r.stdout


def test_a_workload_always_applies_even_without_its_rule(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """A profile that judges the RTT alone still fails on a workload that does not pay."""
    write_results(tmp_path / "r.json", make_results(6, all_safe=True))
    (tmp_path / "w.toml").write_text(NEVER_PAYS)
    (tmp_path / "p.toml").write_text("[limits]\nmax_metric_us = 500\n")
    plain = cli("gate", "r.json", "--profile", "p.toml", cwd=tmp_path)
    assert plain.returncode == 0 and "workload (--workload)" not in plain.stdout
    r = cli("gate", "r.json", "--profile", "p.toml", "--workload", "w.toml", cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert "workload (--workload) │ FAIL" in r.stdout
    (tmp_path / "ok.toml").write_text(ALWAYS_PAYS)
    fine = cli("gate", "r.json", "--profile", "p.toml", "--workload", "ok.toml", cwd=tmp_path)
    assert fine.returncode == 0, fine.stdout
    assert "workload (--workload) │ PASS" in fine.stdout


def test_a_rule_with_nothing_in_scope_is_a_skip_that_says_why(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    write_results(tmp_path / "r.json", make_results(6, all_safe=True, storage_every=0))
    (tmp_path / "p.toml").write_text(
        '[limits]\nmax_unsafe = 0\n[[scope]]\nname = "storage paths"\nroles = ["storage"]\n'
        "max_unsafe = 0\n"
    )
    r = cli("gate", "r.json", "--profile", "p.toml", "--junit", "j.xml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    assert "storage paths: max_unsafe │ SKIP   │ no path in scope: nothing to judge" in r.stdout
    junit = ET.parse(tmp_path / "j.xml").getroot()
    case = next(c for c in junit.iter("testcase") if c.get("name") == "storage paths: max_unsafe")
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message") == "no path in scope: nothing to judge"


def test_a_metric_from_too_few_samples_does_not_pass_max_metric() -> None:
    res = make_results(4, all_safe=True, samples=500)  # p99 needs 1,000 samples to trust

    def short(p: PathResult) -> PathResult:
        assert p.rtt is not None
        return dataclasses.replace(p, rtt=dataclasses.replace(p.rtt, untrusted=("p99", "p999")))

    names = [n.name for n in res.nodes]
    res = dataclasses.replace(res, paths=PathTable.from_paths([short(p) for p in res.paths], names))
    profile = parse_profile_text("[limits]\nmax_metric_us = 1000\n", "p.toml")
    report = evaluate(res, profile, today=TODAY)
    rule = next(o for o in report.outcomes if o.rule == "max_metric_us")
    assert rule.status is Status.FAIL
    assert "untrusted: 500 samples are too few for p99" in rule.failing[0].detail


def test_no_blocking_takes_a_list_of_kinds_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    res = make_results(4, slow_paths=[("gpu01", "gpu02", 900.0)])
    some = parse_profile_text('[limits]\nno_blocking = ["loss", "config"]\n', "p.toml")
    rule = next(o for o in evaluate(res, some, today=TODAY).outcomes if o.rule == "no_blocking")
    assert rule.status is Status.PASS  # the RTT's block is not one of these kinds
    every = parse_profile_text("[limits]\nno_blocking = true\n", "p.toml")
    rule = next(o for o in evaluate(res, every, today=TODAY).outcomes if o.rule == "no_blocking")
    assert rule.status is Status.FAIL and rule.failing[0].label == "gpu01 -> gpu02"
    with pytest.raises(ProfileError, match=r"limits\.no_blocking"):
        parse_profile_text('[limits]\nno_blocking = ["lost"]\n', "p.toml")


def test_docs_gates_lists_every_rule_key_as_the_registry_says() -> None:
    docs = (ROOT / "docs" / "gates.md").read_text(encoding="utf-8")
    assert docs_table() in docs
    for spec in RULES:  # and every key parses
        value = {"limits": "true", "baseline": "true"}[spec.section]
        if spec.value.name not in ("FLAG", "KINDS"):
            value = {"VERDICT": '"marginal"', "FRACTION": "0.5", "RATIO": "1.5"}.get(
                spec.value.name, "5"
            )
        text = f"[{spec.section}]\n{spec.key} = {value}\n"
        rules = parse_profile_text(text, "p.toml").rules
        assert any(r.key == spec.key for r in rules), spec.key


def test_gate_json_carries_the_decision(tmp_path: Path, cli: Callable[..., Run]) -> None:
    faulty(tmp_path)
    doc = json.loads(cli("report", "r.json", "--json", cwd=tmp_path).stdout)
    assert doc["decision"]["answer"] == "conditional"
    blocking = doc["decision"]["blocking"]
    assert {b["subject"] for b in blocking} == {"gpu02", "gpu03", "gpu05"}
    assert [b["paths"] for b in blocking] == [7, 7, 7]  # each holds its node's 7 paths


def test_the_first_screen_gives_one_answer_then_the_fixes_ranked(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    faulty(tmp_path)
    r = cli("report", "r.json", "--html", "r.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(
        "Decision: GO WITH CONDITIONS (10 offload-safe, 0 marginal, 18 unsafe); judged by the "
        "RTT lines"
    ), lines[0]
    assert "with loss, configuration, bandwidth" in lines[0]
    assert lines[1] == "Fix first (what blocks, most paths held first):"
    fixes = [ln.split()[1] for ln in lines[2:5]]
    assert sorted(fixes) == ["gpu02", "gpu03", "gpu05"] and all("(" in ln for ln in lines[2:5])
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    header = html.split("<header")[1].split("</header>")[0]
    section = header.split('id="decision"')[1].split("</section>")[0]
    assert "Decision: <b>GO WITH CONDITIONS</b>" in section
    assert "3 fixes to make: see What to do." in section
    assert "Not judged: workload: no workload given" in section
    assert header.index('id="decision"') < header.index('class="chips"')
    # one ranked list, the decision's, each fix once (issue 36: the header's "Fix first"
    # and the "What to do" cards "Keep gpu05 on local NVMe", "Fix the configuration of
    # gpu03 first" and "Packet loss behind the tail of 7 paths" said each thing twice)
    assert "<li>" not in section
    todo = html.split('id="recommendations"')[1].split("</section>")[0]
    assert todo.count("<li>") == 3 and "(loss, 7 paths)" in todo
    items = [li.split("</li>")[0] for li in todo.split("<li>")[1:]]
    assert [li.split("</b>")[0].removeprefix("<b>") for li in items] == [
        "gpu05", "gpu03", "gpu02",
    ]  # fmt: skip
    assert '<div class="rec ' not in todo, todo
    for subject in ("gpu05", "gpu03", "gpu02"):  # named by its one fix, and in no card
        assert sum(subject in li.split("</b>")[0] for li in items) == 1
    assert html.count("et mtu on gpu03 to 9000") == 1  # its action, once ("Set mtu ...")


def test_noisy_paths_are_a_caution_and_the_go_live_sentence_does_not_wait_on_them(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    res = make_results(6, all_safe=True)

    def noisy(p: PathResult) -> PathResult:
        assert p.rtt is not None
        return dataclasses.replace(p, rtt=dataclasses.replace(p.rtt, stdev_us=p.rtt.mean_us))

    names = [n.name for n in res.nodes]
    # every path as noisy as the next: the host's noise, within the run's repeatability
    alike = dataclasses.replace(res, paths=PathTable.from_paths(map(noisy, res.paths), names))
    write_results(tmp_path / "r.json", alike)
    r = cli("report", "r.json", "--html", "r.html", cwd=tmp_path)
    assert r.stdout.startswith("Decision: GO (15 offload-safe, 0 marginal, 0 unsafe)")
    assert "unstable RTT" not in r.stdout
    todo = (tmp_path / "r.html").read_text().split('id="recommendations"')[1]
    assert "Offload can go live on every measured path" in todo
    assert "pass a re-test" not in todo and "a caution, not a blocker" not in todo
    # one path noisier than its tier beyond the repeatability: a caution, still GO
    first = res.paths.row(0).key
    one = [noisy(p) if p.key == first else p for p in res.paths]
    write_results(
        tmp_path / "one.json", dataclasses.replace(res, paths=PathTable.from_paths(one, names))
    )
    r = cli("report", "one.json", "--html", "one.html", cwd=tmp_path)
    assert r.stdout.startswith("Decision: GO (15 offload-safe, 0 marginal, 0 unsafe)")
    assert "caution: unstable RTT on 1 offload-safe path:" in " ".join(r.stdout.split())
    todo = (tmp_path / "one.html").read_text().split('id="recommendations"')[1]
    assert "Offload can go live on every measured path" in todo
    assert "pass a re-test" not in todo and "a caution, not a blocker" in todo
    assert cli("gate", "one.json", cwd=tmp_path).returncode == 0
