"""Localisation against peers at the same distance, beyond the run's own repeatability
(``analysis/localise``, ``analysis/repeatability``, ``analysis/causes``; docs/report.md):
a bipartite run whose paths are all alike names no node and says distance, a storage node
slower than its twin is named, a healthy node with half of its paths noisy is not, a
suspect must stand out beyond the measured repeatability, a cause needs most of the
suspect's bad paths, and a re-test localises on the run it re-tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from netqual.analysis import localise
from netqual.analysis.matrix import tier_of
from netqual.analysis.policy import judge
from netqual.analysis.stability import unstable_paths
from netqual.model.node import Node, Role
from netqual.model.path import PathResult
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Interference, Mode, RunMeta, SampledPath
from netqual.model.stats import BulkStats, RttStats
from netqual.model.suspects import (
    CauseKind,
    LinkEvidence,
    Measure,
    NodeEvidence,
    RepeatSource,
    SuspectKind,
)
from netqual.model.verdict import Verdict
from netqual.report.recommend import recommend
from netqual.results import summarize
from netqual.table.paths import PathTable
from netqual.table.run import Results

POLICY = Policy(min_samples=1000)


def rtt(p50: float, p99: float, stdev: float | None = None) -> RttStats:
    return RttStats(
        samples=2000, min_us=p50 * 0.8, p50_us=p50, p90_us=(p50 + p99) / 2, p99_us=p99,
        p999_us=p99 * 1.2, max_us=p99 * 1.5, mean_us=p50 * 1.05,
        stdev_us=p50 * 0.05 if stdev is None else stdev,
    )  # fmt: skip


def path(a: Node, b: Node, p50: float, p99: float, **extra: object) -> PathResult:
    r = rtt(p50, p99, extra.pop("stdev", None))  # type: ignore[arg-type]
    verdict, reasons = judge(POLICY, r)
    return PathResult(
        a.name,
        b.name,
        "tcp",
        verdict,
        reasons,
        rtt=r,
        tier=tier_of(a, b),
        **extra,  # type: ignore[arg-type]
    )


def results(
    nodes: Sequence[Node],
    paths: Sequence[PathResult],
    mode: Mode = Mode.FULL_MESH,
    inter: Interference | None = None,
) -> Results:
    run = RunMeta(
        "2026-12-01T00:00:00+00:00", "2026-12-01T00:01:00+00:00", "tcp", mode, POLICY,
        ProbePlan(iterations=2000), {},
    )  # fmt: skip
    table = PathTable.from_paths(paths, [n.name for n in nodes])
    return Results(run, tuple(nodes), table, summarize(table, POLICY.metric), interference=inter)


ADDRESSES: dict[str, str] = {}


def node(name: str, rack: str, role: Role = Role.COMPUTE, site: str = "local") -> Node:
    address = ADDRESSES.setdefault(name, f"198.18.0.{len(ADDRESSES) + 1}")
    return Node(name, address, role=role, rack=rack, labels={"site": site})


COMPUTE = [node(f"r{r}h{i}", f"r{r}") for r in (1, 2) for i in (1, 2, 3)]
STORAGE = [node(f"st{i}", "rs", Role.STORAGE, "remote") for i in (1, 2)]


def bipartite(slow: dict[str, float] | None = None) -> Results:
    slow = slow or {}
    paths = []
    for k, c in enumerate(COMPUTE):
        for s in STORAGE:
            p99 = 1100 + 37 * k + slow.get(s.name, 0.0)
            paths.append(path(c, s, 950 + slow.get(s.name, 0.0), p99))
    return results([*COMPUTE, *STORAGE], paths, Mode.BIPARTITE)


def test_a_bipartite_run_whose_paths_are_all_alike_names_no_node_and_says_distance() -> None:
    """Once every node was a suspect ("node st1: median p99 1,137 us vs 1,137 us over all
    paths") and racks r1, r2 and the remote site were to stay on NVMe."""
    r = bipartite()
    assert all(p.verdict is Verdict.UNSAFE for p in r.paths)
    found, loc = localise.localisation(r)
    assert found == ()
    (far,) = loc.distance
    assert (far.tier.value, far.bad_paths, far.paths, far.near_paths) == ("remote", 12, 12, 0)
    titles = [x.title for x in recommend(r)]
    assert "Do not offload KV-cache to the remote site" in titles
    assert not any(t.startswith("Keep") and "NVMe" in t for t in titles)


def test_a_bipartite_storage_node_slower_than_its_twin_is_named_against_it() -> None:
    found = localise.suspects(bipartite({"st1": 2000.0}))
    assert [(s.kind, s.subject) for s in found] == [(SuspectKind.NODE, "st1")]
    e = found[0].evidence
    assert isinstance(e, NodeEvidence) and e.contrast is not None
    # against st2 only (storage against storage), at the remote tier
    assert e.contrast.tier.value == "remote" and e.contrast.peers == 1
    assert e.contrast.peers_level is not None and e.contrast.peers_level < 1400
    assert e.contrast.ratio is not None and e.contrast.ratio > e.contrast.threshold


FIVE = [node(f"h{i}", "r1") for i in range(1, 6)]


def star(bad: dict[tuple[str, str], float]) -> list[PathResult]:
    """Full mesh of five hosts on one switch, p99 80 us but where ``bad`` says."""
    out = []
    for i, a in enumerate(FIVE):
        for b in FIVE[i + 1 :]:
            p99 = bad.get((a.name, b.name), 80.0)
            out.append(path(a, b, 40.0 if p99 < 500 else p99 * 0.9, p99))
    return out


def test_a_healthy_node_with_half_of_its_paths_noisy_is_not_a_suspect() -> None:
    """The relay's scheduling noise once made two of h5's four paths marginal: "node h5".
    Half is not most. Nor is either path a link suspect: its tail alone rose (its p50 did
    not, no counter says why), which is what one path's tail does from run to run."""
    noisy = {("h1", "h5"): 300.0, ("h3", "h5"): 320.0}
    assert localise.suspects(results(FIVE, star(noisy))) == ()
    # the same path with its whole distribution moved (p50 too): a link to check
    moved = [dataclasses.replace(p, rtt=rtt(250.0, 300.0)) if p.key == ("h1", "h5") else p
             for p in star(noisy)]  # fmt: skip
    found = localise.suspects(results(FIVE, moved))
    assert [(s.kind, s.subject) for s in found] == [(SuspectKind.LINK, "h1->h5")]
    e = found[0].evidence
    assert isinstance(e, LinkEvidence) and e.cause is not None
    assert e.cause.kind is CauseKind.DELAY
    # the same node with most of its paths that slow is one
    bad = {**noisy, ("h2", "h5"): 310.0}
    assert [s.subject for s in localise.suspects(results(FIVE, star(bad)))] == ["h5"]


def sampled(ratio: float, n: int = 8) -> Interference:
    """An interference sample whose paths read ``ratio`` apart, run against alone."""
    tier = tier_of(FIVE[0], FIVE[1])
    paths = tuple(
        SampledPath(
            f"a{i}",
            f"b{i}",
            tier,
            40.0,
            80.0 * (ratio if i % 2 else 1.0),
            40.0,
            80.0 * (1.0 if i % 2 else ratio),
            Verdict.SAFE,
            Verdict.SAFE,
            False,
        )
        for i in range(n)
    )
    return Interference(n, 1.0, 1.0, 0, 1.2, (), paths)


def test_a_suspect_must_stand_out_beyond_the_measured_repeatability() -> None:
    bad = {("h1", "h5"): 300.0, ("h2", "h5"): 310.0, ("h3", "h5"): 320.0}
    quiet = localise.localisation(results(FIVE, star(bad), inter=sampled(1.1)))
    assert [s.subject for s in quiet[0]] == ["h5"]
    e = quiet[0][0].evidence
    assert isinstance(e, NodeEvidence) and e.contrast is not None
    assert e.contrast.threshold == pytest.approx(quiet[1].repeatability.ratio)
    # the same numbers from a run whose re-measured paths read 5x apart: within its noise
    noisy = localise.localisation(results(FIVE, star(bad), inter=sampled(5.0)))
    assert noisy[0] == ()
    assert noisy[1].repeatability.decisive.source is RepeatSource.INTERFERENCE
    assert noisy[1].repeatability.ratio == pytest.approx(5.0)


def lossy(p: PathResult) -> PathResult:
    window = {"interfaces": {"eth0": {"tx_packets": 4000}}, "rdma": {}, "tcp_retrans": 154}
    quiet = {"interfaces": {"eth0": {"tx_packets": 4000}}, "rdma": {}, "tcp_retrans": 0}
    return dataclasses.replace(p, details={"counters": {"src": window, "dst": quiet}})


def test_a_cause_is_attached_only_when_most_of_the_bad_paths_show_it() -> None:
    """A delayed node once read "counters: loss" because one of its seven bad paths
    touched the lossy node."""
    eight = [node(f"n{i}", "r1") for i in range(1, 9)]
    paths = []
    for i, a in enumerate(eight):
        for b in eight[i + 1 :]:
            delayed = "n1" in (a.name, b.name)
            paths.append(path(a, b, 650.0 if delayed else 40.0, 700.0 if delayed else 80.0))
    paths[0] = lossy(paths[0])  # n1 -> n2: also lossy
    (s,) = localise.suspects(results(eight, paths))
    assert s.subject == "n1" and isinstance(s.evidence, NodeEvidence)
    cause = s.evidence.cause
    assert cause is not None and (cause.kind, cause.paths, cause.of) == (CauseKind.DELAY, 7, 7)
    # most of its bad paths lossy: loss
    paths = [lossy(p) if "n1" in (p.src, p.dst) and k % 7 < 5 else p for k, p in enumerate(paths)]
    (s,) = localise.suspects(results(eight, paths))
    assert isinstance(s.evidence, NodeEvidence) and s.evidence.cause is not None
    assert s.evidence.cause.kind is CauseKind.LOSS and s.evidence.cause.paths > 7 / 2


def by_name(a: str, b: str, p50: float, p99: float) -> PathResult:
    return path(FIVE[int(a[1]) - 1], FIVE[int(b[1]) - 1], p50, p99)


def test_a_retest_localises_on_the_run_it_retests_never_on_its_subset_alone() -> None:
    """``netqual retest`` once localised on its subset and named five healthy nodes: every
    path of a subset of bad paths is bad, so nothing in it is a reference."""
    slow = {("h1", "h5"): 700.0, ("h2", "h5"): 720.0, ("h3", "h5"): 710.0, ("h2", "h4"): 290.0}
    base = results(FIVE, star(slow))
    # h5's three paths stay slow, h2 -> h4 was noise
    again = [by_name(a, b, 650.0, v) for (a, b), v in slow.items() if (a, b) != ("h2", "h4")]
    again.append(by_name("h2", "h4", 40.0, 85.0))
    retest = dataclasses.replace(results(FIVE, again), retest_of="/runs/base")
    found, loc = localise.localisation(retest, base)
    assert [(s.kind, s.subject) for s in found] == [(SuspectKind.NODE, "h5")]
    assert (loc.paths, loc.retested, loc.base) == (10, 4, "/runs/base")
    assert loc.repeatability.decisive.source is RepeatSource.RETEST
    # the 90th percentile of four before/after ratios, h2 -> h4 read 290 us, then 85 us
    assert loc.repeatability.ratio == pytest.approx(1 + 0.7 * (290 / 85 - 1))
    # a re-test that finds h5's paths fine leaves nothing to name
    fine = [by_name(a, b, 40.0, 85.0) for a, b in slow]
    cleared = dataclasses.replace(results(FIVE, fine), retest_of="/runs/base")
    assert localise.localisation(cleared, base)[0] == ()


def test_unstable_means_noisier_than_the_tier_beyond_the_repeatability() -> None:
    """On a shared host every path trips pyperf's 10%-stdev rule; the go-live sentence
    then waited for "30 unstable paths" to pass a re-test."""
    shaky = [dataclasses.replace(p, rtt=rtt(40.0, 80.0, stdev=12.0)) for p in star({})]
    assert unstable_paths(results(FIVE, shaky)) == 0
    one = [*shaky[:-1], dataclasses.replace(shaky[-1], rtt=rtt(40.0, 80.0, stdev=40.0))]
    assert unstable_paths(results(FIVE, one)) == 1
    titles = [x.title for x in recommend(results(FIVE, shaky))]
    assert "Offload can go live on every measured path" in titles


def with_goodput(p: PathResult, gbps: float) -> PathResult:
    cell = BulkStats(65536, 1, 2048, gbps, 500.0, 900.0, 1000.0)
    return dataclasses.replace(p, bulk=(cell,))


def test_a_nic_far_below_its_peers_in_bulk_goodput_is_named_while_its_rtt_is_fine() -> None:
    """A NIC shaped to a fifth of its twin once went live: every path offload-safe, no
    suspect. Goodput is judged against the peers too, beyond the goodput floor (2x: the
    same path's goodput moved at most 1.66x from run to run in the lab)."""
    slow = {"h2": 0.2}
    paths = [with_goodput(p, min(slow.get(p.src, 1.0), slow.get(p.dst, 1.0))) for p in star({})]
    assert all(p.verdict is Verdict.SAFE for p in paths)
    (s,) = localise.suspects(results(FIVE, paths))
    assert (s.kind, s.subject) == (SuspectKind.NODE, "h2")
    e = s.evidence
    assert isinstance(e, NodeEvidence) and e.contrast is not None and e.cause is not None
    assert e.contrast.measure is Measure.GOODPUT and e.contrast.ratio == pytest.approx(5.0)
    assert (e.cause.kind, e.bad_paths, e.paths) == (CauseKind.BANDWIDTH, 4, 4)
    # within what goodput moves from run to run (1.66x here), and half of a node's paths
    # slow, name nothing
    noisy = [with_goodput(p, 0.6 if "h2" in (p.src, p.dst) else 1.0) for p in star({})]
    assert localise.suspects(results(FIVE, noisy)) == ()
    half = [with_goodput(p, 0.2 if p.key in {("h1", "h2"), ("h2", "h3")} else 1.0)
            for p in star({})]  # fmt: skip
    assert localise.suspects(results(FIVE, half)) == ()
