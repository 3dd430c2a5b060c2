"""The decision rule (netqual.analysis.decision), table-driven: on a run whose every path is
offload-safe by its RTT, each kind of evidence alone takes the paths it holds below
offload-safe (and names its subject and cause), leaves the others safe, keeps the RTT class
in ``rtt_verdict``, and evidence that cannot judge never passes a path."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from factories import make_results, write_results

from netqual.analysis.decision import decide, undecided
from netqual.analysis.evidence.loss import path_loss
from netqual.model.decision import Answer, EvidenceKind, SubjectKind
from netqual.model.fanin import ChunkStats, FaninLevel, FaninResult
from netqual.model.fleet import ConfigSnapshot, FleetOutlier, FleetResult
from netqual.model.path import PathResult
from netqual.model.verdict import Verdict
from netqual.results import load, path_to_dict, results_to_dict
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.workload import load_workload
from netqual.workload.judge import apply

NAMES = ("gpu01", "gpu02", "stor01", "gpu03", "gpu04", "stor02")


def healthy() -> Results:
    """Six nodes (two storage), 15 paths, every one offload-safe by its RTT."""
    res = make_results(6, all_safe=True, storage_every=3)
    assert tuple(n.name for n in res.nodes) == NAMES
    assert res.paths.counts()[Verdict.SAFE] == 15
    return res


def with_paths(res: Results, change: Callable[[PathResult], PathResult]) -> Results:
    return dataclasses.replace(
        res, paths=PathTable.from_paths([change(p) for p in res.paths], [n.name for n in res.nodes])
    )


def touches(res: Results, node: str) -> np.ndarray:
    return np.array([node in key for key in res.paths.keys()])  # noqa: SIM118 (not a dict)


def counters(retrans: int, sent: int) -> dict[str, object]:
    side = {"interfaces": {"eth0": {"tx_packets": sent // 2, "tx_bytes": 1}}, "tcp_retrans": 0}
    return {"counters": {"src": {**side, "tcp_retrans": retrans}, "dst": side}}


def lossy(res: Results) -> Results:
    """gpu02's link loses 0.5% of the packets: every one of its paths retransmits."""
    return with_paths(
        res,
        lambda p: dataclasses.replace(
            p,
            details=counters(50, 10_000) if "gpu02" in p.key else counters(1, 10_000),
        ),
    )


def mtu_outlier(res: Results) -> Results:
    snaps = tuple(ConfigSnapshot(n, (("mtu", "9000"),)) for n in NAMES)
    out = FleetOutlier("gpu03", "mtu", "1500", majority="9000", majority_nodes=("gpu01",))
    version = FleetOutlier("gpu04", "kernel", "6.1", majority="6.8", majority_nodes=("gpu01",))
    return dataclasses.replace(res, fleet=FleetResult(snaps, (out, version)))


def slow_nic(res: Results) -> Results:
    """gpu04's paths read at a fifth of the goodput of every other path."""

    def slower(p: PathResult) -> PathResult:
        if "gpu04" not in p.key:
            return p
        return dataclasses.replace(
            p, bulk=tuple(dataclasses.replace(b, goodput_gbps=b.goodput_gbps / 5) for b in p.bulk)
        )

    return with_paths(res, slower)


def level(readers: int, p99_us: float, samples: int = 2_000) -> FaninLevel:
    untrusted = ("p999",) if samples >= 1_000 else ("p99", "p999")
    return FaninLevel(readers, ChunkStats(samples, p99_us / 2, p99_us, p99_us * 2, untrusted))


def sweep(*levels: FaninLevel, knee: int | None, safe: int | None) -> FaninResult:
    return FaninResult("stor01", "plain", 256 * 1024, 2.0, levels, knee, safe, "safe up to ...")


def fanin_knee(res: Results) -> Results:
    """stor01 doubles its chunk p99 at 2 readers; four compute nodes would read it."""
    lv = (level(1, 1000.0), level(2, 2500.0), level(4, 5000.0))
    return dataclasses.replace(res, fanin=(sweep(*lv, knee=2, safe=1),))


def fanin_preliminary(res: Results) -> Results:
    lv = (level(1, 1000.0, 300), level(2, 1100.0, 300), level(4, 1200.0, 300))
    return dataclasses.replace(res, fanin=(sweep(*lv, knee=None, safe=4),))


# kind, the change, the node whose paths it holds, the class they get, the blocking subject
CASES = [
    (EvidenceKind.LOSS, lossy, "gpu02", Verdict.UNSAFE, "gpu02"),
    (EvidenceKind.CONFIG, mtu_outlier, "gpu03", Verdict.UNSAFE, "gpu03"),
    (EvidenceKind.BANDWIDTH, slow_nic, "gpu04", Verdict.UNSAFE, "gpu04"),
    (EvidenceKind.FANIN, fanin_knee, "stor01", Verdict.MARGINAL, "stor01"),
    (EvidenceKind.FANIN, fanin_preliminary, "stor01", Verdict.MARGINAL, "stor01"),
]


@pytest.mark.parametrize(("kind", "change", "node", "verdict", "subject"), CASES)
def test_each_kind_alone_takes_its_paths_below_offload_safe(
    kind: EvidenceKind,
    change: Callable[[Results], Results],
    node: str,
    verdict: Verdict,
    subject: str,
) -> None:
    got = decide(change(healthy()))
    mine = touches(got, node)
    assert (got.paths.verdict[mine] == verdict.rank).all()
    assert (got.paths.verdict[~mine] == Verdict.SAFE.rank).all()
    rtt = undecided(got.paths)
    assert (rtt.verdict == Verdict.SAFE.rank).all()  # the RTT class is kept beside
    d = got.decision
    assert d is not None and d.answer is Answer.CONDITIONAL
    assert [(b.kind, b.subject.name) for b in d.blocking] == [(kind, subject)]
    assert d.blocking[0].paths == int(mine.sum())
    row = got.paths.row(int(np.flatnonzero(mine)[0]))
    assert row.rtt_verdict is Verdict.SAFE and row.verdict is verdict
    kinds = [e.kind for e in row.evidence]
    assert kinds[0] is EvidenceKind.RTT and kind in kinds
    assert row.reasons[0].startswith(f"{kind.label}: "), row.reasons
    assert got.summary.counts[verdict] == int(mine.sum())


def test_cannot_judge_never_passes() -> None:
    got = decide(fanin_preliminary(healthy()))
    ev = [e for e in got.paths.row(int(np.flatnonzero(touches(got, "stor01"))[0])).evidence]
    fanin = [e for e in ev if e.kind is EvidenceKind.FANIN]
    assert fanin and fanin[0].verdict is None and "preliminary" in fanin[0].detail
    assert got.decision is not None and got.decision.blocking[0].verdict is None


def test_a_version_difference_is_a_caution_not_a_blocker() -> None:
    res = healthy()
    snaps = tuple(ConfigSnapshot(n, (("kernel", "6.8"),)) for n in NAMES)
    out = FleetOutlier("gpu04", "kernel", "6.1", majority="6.8", majority_nodes=("gpu01",))
    got = decide(dataclasses.replace(res, fleet=FleetResult(snaps, (out,))))
    assert (got.paths.verdict == Verdict.SAFE.rank).all()
    assert got.decision is not None and got.decision.answer is Answer.GO
    assert any("kernel 6.1" in c for c in got.decision.cautions)


def test_a_healthy_run_is_go_and_says_what_each_kind_judged() -> None:
    got = decide(healthy())
    d = got.decision
    assert d is not None and d.answer is Answer.GO and not d.blocking
    by_kind = {e.kind: e for e in d.evidence}
    assert by_kind[EvidenceKind.RTT].verdict is Verdict.SAFE
    # without a workload the RTT lines decide, and the run says so
    assert by_kind[EvidenceKind.WORKLOAD].verdict is None
    assert "the RTT lines decide" in by_kind[EvidenceKind.WORKLOAD].detail
    assert "no workload given" in d.governs
    assert by_kind[EvidenceKind.FANIN].verdict is None  # not swept: listed, not dropped
    assert by_kind[EvidenceKind.BANDWIDTH].verdict is Verdict.SAFE


def test_no_safe_path_is_no_go() -> None:
    res = make_results(4, slow_nodes=["gpu01", "gpu02", "gpu03"], storage_every=0)
    got = decide(res)
    assert got.decision is not None and got.decision.answer is Answer.NO_GO


def test_unstable_paths_are_a_caution_never_a_blocker() -> None:
    """Only a path noisier than its tier's by more than the run's repeatability is
    unstable (docs/report.md): every path alike is the host's noise, no caution."""

    def noisy(p: PathResult) -> PathResult:
        assert p.rtt is not None
        return dataclasses.replace(p, rtt=dataclasses.replace(p.rtt, stdev_us=p.rtt.mean_us))

    got = decide(with_paths(healthy(), noisy))
    d = got.decision
    assert d is not None and d.answer is Answer.GO
    assert not any("unstable RTT" in c for c in d.cautions)
    first = healthy().paths.row(0).key
    one = decide(with_paths(healthy(), lambda p: noisy(p) if p.key == first else p))
    assert one.decision is not None and one.decision.answer is Answer.GO
    assert any("unstable RTT on 1 offload-safe path:" in c for c in one.decision.cautions)


def test_workload_that_never_pays_is_no_go_naming_the_workload(tmp_path: Path) -> None:
    wf = tmp_path / "w.toml"
    # a local NVMe read at 10 Tbit/s: the wire alone is slower than the baseline
    wf.write_text(
        '[workload]\nname = "m"\nlayers = 32\nkv_heads = 8\nhead_dim = 128\ndtype = "bf16"\n'
        "tp = 8\nchunk_tokens = 64\nlocal_read_gbps = 10000\n"
    )
    got = apply(healthy(), load_workload(wf))
    d = got.decision
    assert d is not None and d.answer is Answer.NO_GO
    assert (got.paths.verdict == Verdict.UNSAFE.rank).all()
    first = d.blocking[0]
    assert first.kind is EvidenceKind.WORKLOAD and first.subject.kind is SubjectKind.WORKLOAD
    assert "can never pay" in first.detail
    assert (undecided(got.paths).verdict == Verdict.SAFE.rank).all()
    assert any("judges worse than the RTT lines" in c for c in d.cautions)


def test_deciding_twice_is_deciding_once() -> None:
    once = decide(mtu_outlier(lossy(healthy())))
    twice = decide(once)
    assert (once.paths.verdict == twice.paths.verdict).all()
    assert once.paths.reasons == twice.paths.reasons
    assert [path_to_dict(p) for p in once.paths] == [path_to_dict(p) for p in twice.paths]


def test_a_decided_file_loads_and_decides_the_same(tmp_path: Path) -> None:
    res = decide(slow_nic(mtu_outlier(lossy(healthy()))))
    back = load(write_results(tmp_path / "r.json", res))
    assert results_to_dict(back) == results_to_dict(res)
    doc = results_to_dict(back)
    assert doc["decision"]["answer"] == "conditional"
    assert {b["subject"] for b in doc["decision"]["blocking"]} == {"gpu02", "gpu03", "gpu04"}


def test_an_older_file_without_a_decision_is_decided_on_load(tmp_path: Path) -> None:
    res = lossy(healthy())  # written as an older netqual wrote it: no rtt_verdict, no evidence
    doc_path = write_results(tmp_path / "old.json", res)
    assert '"rtt_verdict"' not in doc_path.read_text()
    back = load(doc_path)
    assert (back.paths.verdict[touches(back, "gpu02")] == Verdict.UNSAFE.rank).all()
    assert back.decision is not None and back.decision.blocking[0].subject.name == "gpu02"


def test_tcp_loss_is_judged_on_the_ping_pong_phase_where_it_is_kept_apart() -> None:
    """A bulk read's retransmissions are TCP finding a queue; the ping-pong's are loss."""
    merged = counters(100, 10_000)["counters"]  # 1% over both phases, all of it bulk
    quiet = {
        "src": {"tcp_retrans": 0, "tx_packets": 1_100},
        "dst": {"tcp_retrans": 1, "tx_packets": 1_100},
    }
    lossy = {
        "src": {"tcp_retrans": 9, "tx_packets": 1_100},
        "dst": {"tcp_retrans": 8, "tx_packets": 1_100},
    }
    assert path_loss({"counters": merged, "pingpong_counters": quiet}, 0.1) is None
    got = path_loss({"counters": merged, "pingpong_counters": lossy}, 0.1)
    assert got is not None and got.verdict is Verdict.UNSAFE
    assert got.detail.startswith("17 TCP retransmissions of 2,200 packets sent in the ping-pong")
    # a file without the phases apart: both phases count
    old = path_loss({"counters": merged}, 0.1)
    assert old is not None and "100 TCP retransmissions of 10,000 packets sent (1.00%" in old.detail
