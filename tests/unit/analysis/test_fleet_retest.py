"""A retest's configuration check (issue 34): the re-tested run's snapshots with the
re-tested nodes' fresh ones in their place, judged by that run's ``[fleet]`` policy. A fix
made before the retest shows as fixed, one not made still blocks, a retest whose agents
sent no snapshot is not judged and says why, and one over a run without snapshots says how
many nodes it compared."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from factories import make_results, write_results

from netqual.analysis import fleet
from netqual.analysis.decision import decide
from netqual.base.errors import ResultsFileError
from netqual.model.decision import EvidenceKind
from netqual.model.fleet import ConfigSnapshot, FleetPolicy, FleetResult
from netqual.model.run import RunKind
from netqual.model.verdict import Verdict
from netqual.results import load
from netqual.table.run import Results

NAMES = ("gpu01", "gpu02", "stor01", "gpu03", "gpu04", "stor02")


def snap(node: str, mtu: int, kernel: str = "6.8") -> ConfigSnapshot:
    return ConfigSnapshot(node, (("kernel", kernel), ("mtu", str(mtu))))


def first_run(policy: FleetPolicy | None = None) -> FleetResult:
    """The run: gpu03 at MTU 1500 where the others have 9000."""
    snaps = [snap(n, 1500 if n == "gpu03" else 9000) for n in NAMES]
    return fleet.evaluate(snaps, policy=policy)


def test_a_fix_made_before_the_retest_shows_as_fixed() -> None:
    before = first_run()
    assert [o.text for o in before.outliers] == [
        "gpu03: mtu 1500 (majority 9000 on 5 of 6 nodes, e.g. gpu01, gpu02)"
    ]
    got = fleet.retest(before, [snap("gpu03", 9000), snap("gpu01", 9000)])
    assert got is not None and got.outliers == ()
    # every node of the run is compared: the re-tested ones' fresh, the others' as found
    assert [s.node for s in got.snapshot] == list(NAMES)
    assert got.snapshot[NAMES.index("gpu03")] == snap("gpu03", 9000)
    assert got.carried == ("gpu02", "stor01", "gpu04", "stor02")


def test_a_fault_not_fixed_still_shows_against_the_others_as_found() -> None:
    got = fleet.retest(first_run(), [snap("gpu03", 1500), snap("gpu01", 9000)])
    assert got is not None
    [out] = got.outliers
    assert (out.node, out.key, out.value, out.majority) == ("gpu03", "mtu", "1500", "9000")
    # the majority counts the carried snapshots too: one re-tested peer is no majority
    assert (out.holders, out.compared) == (5, 6)


def test_a_fault_that_appeared_since_the_run_shows() -> None:
    before = fleet.evaluate([snap(n, 9000) for n in NAMES])
    assert before.outliers == ()
    got = fleet.retest(before, [snap("gpu04", 1400)])
    assert got is not None and [o.node for o in got.outliers] == ["gpu04"]


def test_no_fresh_snapshot_claims_nothing() -> None:
    """Agents that do not answer ``snapshot``: the run's snapshots are no evidence of
    the configuration now, so there is no check at all (the decision: not judged)."""
    assert fleet.retest(first_run(), []) is None
    assert fleet.retest(None, []) is None


def test_a_run_without_snapshots_compares_the_fresh_ones_alone() -> None:
    got = fleet.retest(None, [snap("gpu01", 9000), snap("gpu02", 9000), snap("gpu03", 1500)])
    assert got is not None and got.carried == ()
    assert [s.node for s in got.snapshot] == ["gpu01", "gpu02", "gpu03"]
    assert [o.node for o in got.outliers] == ["gpu03"]


def test_a_node_the_run_had_no_snapshot_of_is_added() -> None:
    before = fleet.evaluate([snap(n, 9000) for n in NAMES[:4]])
    got = fleet.retest(before, [snap("gpu04", 9000)])
    assert got is not None and [s.node for s in got.snapshot] == list(NAMES[:5])
    assert got.carried == NAMES[:4]


def test_the_runs_fleet_policy_judges_the_retest() -> None:
    # allowed to differ in the run: still allowed in its retest
    allowed = first_run(FleetPolicy(allow_differ=frozenset({"mtu"})))
    assert allowed.outliers == ()
    got = fleet.retest(allowed, [snap("gpu03", 1500)])
    assert got is not None and got.outliers == () and got.policy == allowed.policy
    # expected in the run: still expected, against the fresh value
    expect = FleetPolicy((("mtu", "9000"),))
    got = fleet.retest(first_run(expect), [snap("gpu03", 1500)])
    assert got is not None
    assert [(o.node, o.expected) for o in got.outliers] == [("gpu03", "9000")]
    got = fleet.retest(first_run(expect), [snap("gpu03", 9000)])
    assert got is not None and got.outliers == ()


def test_an_older_file_without_its_policy_keeps_the_expectations_its_outliers_name() -> None:
    old = dataclasses.replace(first_run(FleetPolicy((("mtu", "9000"),))), policy=FleetPolicy())
    assert fleet.policy_of(old) == FleetPolicy((("mtu", "9000"),))
    assert fleet.policy_of(None) == FleetPolicy()


def test_policy_and_carried_go_through_the_results_file() -> None:
    before = first_run(FleetPolicy((("mtu", "9000"),), frozenset({"kernel"})))
    got = fleet.retest(before, [snap("gpu03", 9000)])
    assert got is not None
    doc = fleet.to_dict(got)
    assert doc["policy"] == {"expected": {"mtu": "9000"}, "allow_differ": ["kernel"]}
    assert doc["carried"] == [n for n in NAMES if n != "gpu03"]
    assert fleet.from_dict(doc, "r.json") == got
    # a run without a policy or a retest writes neither key (its files stay as they were)
    assert set(fleet.to_dict(first_run())) == {"snapshot", "outliers"}
    broken: list[tuple[str, object]] = [
        ("policy", {"expected": {"mtus": "9000"}}),
        ("policy", {"expected": {"mtu": 9000}}),
        ("policy", {"allow_differ": ["mtu", 3]}),
        ("policy", {"allow_differ": "mtu"}),
        ("policy", []),
        ("carried", ["gpu01", 2]),
    ]
    for key, value in broken:
        with pytest.raises(ResultsFileError, match=rf"fleet\.{key}"):
            fleet.from_dict({**doc, key: value}, "r.json")


def retest_of(fleet_result: FleetResult | None) -> Results:
    res = make_results(6, all_safe=True, storage_every=3)
    assert tuple(n.name for n in res.nodes) == NAMES
    run = dataclasses.replace(res.run, kind=RunKind.RETEST)
    return dataclasses.replace(res, run=run, retest_of="/runs/r1", fleet=fleet_result)


def config_evidence(res: Results) -> tuple[Verdict | None, str]:
    d = decide(res).decision
    assert d is not None
    [ev] = [e for e in d.evidence if e.kind is EvidenceKind.CONFIG]
    return ev.verdict, ev.detail


def test_the_retests_decision_says_whose_snapshots_it_compared(tmp_path: Path) -> None:
    fixed = fleet.retest(first_run(), [snap("gpu03", 9000), snap("gpu01", 9000)])
    verdict, detail = config_evidence(retest_of(fixed))
    assert verdict is Verdict.SAFE
    assert detail == (
        "6 nodes (2 asked by this retest, 4 as the re-tested run found them) compared, "
        "no outlier on the data path"
    )
    unfixed = retest_of(fleet.retest(first_run(), [snap("gpu03", 1500)]))
    verdict, detail = config_evidence(unfixed)
    assert verdict is Verdict.UNSAFE and detail.startswith("1 outlier on the data path of 6")
    blocking = decide(unfixed).decision
    assert blocking is not None
    assert [(b.subject.name, b.kind) for b in blocking.blocking] == [("gpu03", EvidenceKind.CONFIG)]
    # through the file: the same decision when the retest is loaded again
    write_results(tmp_path / "results.json", decide(unfixed))
    assert load(tmp_path / "results.json").decision == blocking
    # over a run without snapshots: the fresh ones alone, and how many of the run's nodes
    alone = fleet.retest(None, [snap("gpu01", 9000), snap("gpu03", 9000)])
    assert config_evidence(retest_of(alone))[1] == (
        "2 of 6 nodes (asked by this retest) compared, no outlier on the data path"
    )


def test_a_retest_without_snapshots_is_not_judged_and_says_why() -> None:
    verdict, detail = config_evidence(retest_of(None))
    assert verdict is None
    assert detail.startswith("no configuration snapshot: the re-tested nodes' agents sent none")
    demo = retest_of(None)
    demo = dataclasses.replace(demo, run=dataclasses.replace(demo.run, kind=RunKind.DEMO))
    assert config_evidence(demo) == (None, "no configuration snapshot (a demo takes none)")
