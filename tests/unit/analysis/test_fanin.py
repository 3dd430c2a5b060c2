"""Fan-in analysis and fetch profiles, one layer at a time (no agents): known answers for
the knee, the verdict, ranks in step, shared uplinks, the TTFT projection, the results
codec, and how a profile cuts a chunk."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from netqual.analysis import fanin
from netqual.analysis.policy import load_policy
from netqual.base.errors import PolicyError, ResultsFileError
from netqual.codec.plan import plan_from_dict, plan_to_dict
from netqual.model.fanin import Call, ChunkStats, FaninLevel
from netqual.model.fetchprofile import PLAIN, PROFILES, profile, wave_sizes
from netqual.model.node import Node, Role
from netqual.model.path import RawBulk
from netqual.model.plan import PlanFieldError, ProbePlan
from netqual.model.policy import Policy, PolicyFieldError
from netqual.report.fanin import counter_lines
from netqual.results.fanin_codec import from_list, to_list
from netqual.workload.load import load_workload


def lv(
    readers: int,
    p99: float,
    samples: int = 5000,
    p50: float | None = None,
    ci: tuple[float, float] | None = None,
) -> FaninLevel:
    """A level whose p99's 95% interval is ``ci`` (default: the p99 itself, exactly)."""
    c = ChunkStats(samples, p50 or p99 / 2, p99, p99 * 1.2, (), ci or (p99, p99))
    return FaninLevel(readers, c, 1.0, float(readers))


@pytest.mark.parametrize(
    ("p99s", "factor", "knee", "safe"),
    [
        ([100, 150, 199, 200], 2.0, None, 8),  # 200 = 2.0x: not *more* than the factor
        ([100, 150, 201, 400], 2.0, 4, 2),
        ([100, 301, 150, 150], 2.0, 2, 1),  # the first level past the line decides
        ([100, 140, 160, 400], 1.5, 4, 2),
    ],
)
def test_knee_is_the_first_level_past_factor_times_level_one(
    p99s: list[float], factor: float, knee: int | None, safe: int
) -> None:
    levels = [lv(k, p) for k, p in zip((1, 2, 4, 8), p99s, strict=True)]
    assert fanin.knee(levels, factor) == knee
    r = fanin.judge("st1", PLAIN, 1 << 20, factor, levels)
    assert (r.knee, r.safe_up_to) == (knee, safe)
    assert r.verdict.startswith(f"safe up to {safe} concurrent reader")
    assert "preliminary" not in r.verdict


def test_verdict_names_shared_uplinks_and_loss_at_the_knee() -> None:
    levels = [lv(1, 100), dataclasses.replace(lv(4, 500), shared_uplinks=("r1 (2 readers)",))]
    r = fanin.judge("st1", PLAIN, 1 << 20, 2.0, levels)
    assert r.knee == 4 and r.safe_up_to == 1
    assert (
        "at 4 readers a chunk's p99 completion rises past 2x that at 1 reader, the knee: "
        "500 us, 5.0x the 100 us"
    ) in r.verdict
    assert "at 4 readers rack uplinks are shared: r1 (2 readers) (no other storage" in r.verdict
    assert "preliminary" not in r.verdict
    lossy = [levels[0], dataclasses.replace(levels[1], storage_tcp_retrans=1234)]
    assert (
        "st1 retransmitted 1,234 TCP segments at 4 readers"
        in fanin.judge("st1", PLAIN, 1 << 20, 2.0, lossy).verdict
    )
    judged = fanin.judge("st1", PLAIN, 1, 2.0, lossy)
    assert from_list(to_list((judged,)), "x")[0].levels == judged.levels


def test_storage_counters_of_a_level_are_named_at_the_knee_and_in_the_report() -> None:
    """The storage agent's one window over a level: pause frames, RDMA loss and drops are
    named (the knee's in the verdict), the busiest sender in the report's lines; a quiet
    window says so; a level without a window has no line; the codec keeps the window."""
    quiet = {"interfaces": {"eth0": {"tx_bytes": 3 << 30, "rx_bytes": 1 << 20}}, "rdma": {}}
    busy = {
        "interfaces": {
            "eth0": {"tx_bytes": 5 << 30, "rx_prio3_pause": 40, "tx_dropped": 2},
            "eth1": {"tx_bytes": 1 << 20},
        },
        "rdma": {"mlx5_0/1": {"port_xmit_data": 1 << 20, "out_of_sequence": 7}},
        "shared": True,  # the level's own reads: a storage window always is
        "rdma_ports_read": 1,
    }
    levels = [
        dataclasses.replace(lv(1, 100), storage_counters=quiet),
        dataclasses.replace(lv(4, 150), storage_counters=None),
        dataclasses.replace(lv(8, 900), storage_counters=busy),
    ]
    r = fanin.judge("st1", PLAIN, 1 << 20, 2.0, levels)
    assert r.knee == 8
    assert r.verdict.endswith(
        "st1's counters at 8 readers: out_of_sequence 7 on st1 mlx5_0/1, "
        "rx_prio3_pause 40 on st1 eth0, tx_dropped 2 on st1 eth0"
    )
    assert fanin.storage_findings("st1", levels[0]) == ()
    assert counter_lines(r) == (
        "1 reader: eth0 sent 3.00 GiB; no drops, pauses or RDMA errors",
        "8 readers: eth0 sent 5.00 GiB; out_of_sequence 7 on st1 mlx5_0/1; "
        "rx_prio3_pause 40 on st1 eth0; tx_dropped 2 on st1 eth0",
    )
    (back,) = from_list(json.loads(json.dumps(to_list((r,)))), "x")
    assert back.levels == r.levels
    with pytest.raises(ResultsFileError, match=r"fanin\[0\].*storage_counters must be an object"):
        bad = to_list((r,))
        bad[0]["levels"][0]["storage_counters"] = [1]
        from_list(bad, "x")


def test_fewer_than_two_measured_levels_are_not_judged() -> None:
    skipped = FaninLevel(8, None, skipped="only 3 compute nodes")
    r = fanin.judge("st1", PLAIN, 1 << 20, 2.0, [lv(1, 100), skipped])
    assert r.knee is None and r.safe_up_to is None and r.verdict.startswith("not judged")


def test_level_pools_ranks_or_takes_the_slowest_in_step() -> None:
    st = Node("st", "10.0.0.1", role=Role.STORAGE, rack="s")
    readers = [Node("a", "10.0.0.2", rack="r1"), Node("b", "10.0.0.3", rack="r1")]
    ms = 1_000_000
    rank0 = RawBulk(1 << 20, 1, np.array([1 * ms, 5 * ms], dtype=np.int64), 6 * ms)
    rank1 = RawBulk(1 << 20, 1, np.array([3 * ms, 2 * ms], dtype=np.int64), 5 * ms)
    pooled = fanin.level(st, readers, [[rank0, rank1], [rank0]], [], ranks_in_step=False)
    assert pooled.chunk is not None and pooled.chunk.samples == 6
    stepped = fanin.level(st, readers, [[rank0, rank1], [rank0]], ["x"], ranks_in_step=True)
    assert stepped.chunk is not None and stepped.chunk.samples == 4
    # node a in step: max(1,3)=3 ms, max(5,2)=5 ms; node b: 1, 5 ms -> p50 of [1,3,5,5] = 4 ms
    assert stepped.chunk.p50_us == pytest.approx(4000.0)
    assert stepped.shared_uplinks == ("r1 (2 readers)",) and stepped.errors == ("x",)
    # node a: 4 MiB in 6 ms; node b: 2 MiB in 6 ms; aggregate 6 MiB over the longest 6 ms
    assert stepped.aggregate_gbps == pytest.approx(6 * (1 << 20) * 8 / (6 * ms))


def test_projection_counts_the_bytes_once_and_each_further_round_trip() -> None:
    """The one TTFT model (netqual.model.ttft): a chunk is the level's completion (its
    bytes at the shared goodput and one round trip) plus round_trips_per_chunk - 1 more of
    the reader's own round trip; never the completion times the round trips."""
    w = load_workload("qwen3-coder-480b-tp8")  # 100 chunks per request, 36.4 ms each locally
    assert w.prompt_chunks == 100 and w.round_trips_per_chunk == 62
    levels = [lv(1, 10_000, p50=8_000), lv(8, 30_000, p50=15_000), lv(16, 60_000, p50=25_000)]
    r = fanin.judge("st1", "mooncake", w.chunk_bytes, 2.0, levels)
    proj = fanin.project(r, w, (10.0, 20.0))  # the paths' RTT p50, p99
    assert [p.readers for p in proj] == [1, 8, 16]
    assert proj[0].fetch_p50_us == pytest.approx(100 * (8_000 + 61 * 10.0))
    assert proj[0].fetch_p99_us == pytest.approx(100 * (10_000 + 61 * 20.0))
    assert proj[0].change_p50_us == pytest.approx(proj[0].fetch_p50_us - 100 * w.budget_us)
    # p99 per chunk 11.2 / 31.2 / 61.2 ms against a 36.4 ms budget
    assert [p.pays for p in proj] == [True, True, False]
    assert fanin.pays_up_to(proj) == 8
    assert w.kv_share is not None
    assert proj[0].ttft_change == pytest.approx(w.kv_share * ((8_000 + 610) / w.budget_us - 1))
    one = dataclasses.replace(w, round_trips_per_chunk=1)
    assert fanin.project(r, one, (10.0, 20.0))[0].fetch_p99_us == pytest.approx(100 * 10_000)
    assert fanin.project(r, dataclasses.replace(w, prompt_tokens=None)) == ()


def test_results_codec_round_trips_and_names_a_bad_entry() -> None:
    levels = [lv(1, 100), FaninLevel(8, None, skipped="only 3 compute nodes")]
    r = fanin.judge("st1", "nixl", 8192, 2.0, levels)
    assert from_list(to_list((r,)), "x.json") == (r,)
    with pytest.raises(ResultsFileError, match=r"fanin\[0\]: malformed"):
        from_list([{"storage": "st1"}], "x.json")


def test_profiles_cut_chunks_into_slices_and_waves() -> None:
    assert set(PROFILES) >= {PLAIN, "mooncake", "lmcache", "nixl", "sglang-hicache"}
    assert all(p.source for p in PROFILES.values())
    assert profile(PLAIN).slices(1 << 20) == (1 << 20, 1)
    assert profile("mooncake").slices(1 << 20) == (64 << 10, 16)
    assert profile("mooncake").slices(100_000) == (64 << 10, 2)  # rounded up to whole slices
    assert profile("mooncake").slices(4096) == (4096, 1)
    assert wave_sizes(16, 1) == [16] and wave_sizes(7, 3) == [3, 2, 2]
    with pytest.raises(KeyError, match="known: plain"):
        profile("nope")


def test_plan_carries_a_known_profile_only() -> None:
    plan = ProbePlan(fetch_profile="mooncake")
    assert plan_from_dict(plan_to_dict(plan)) == plan
    assert "fetch_profile" not in plan_to_dict(ProbePlan())  # older agents see the same plan
    with pytest.raises(PlanFieldError, match="fetch_profile"):
        plan_from_dict({"fetch_profile": "nope"})
    with pytest.raises(PlanFieldError, match="fetch_profile"):
        plan_from_dict({"fetch_profile": ["mooncake"]})


def test_knee_factor_is_a_policy_field(tmp_path: Path) -> None:
    f = tmp_path / "policy.toml"
    f.write_text("[policy]\nfanin_knee_factor = 1.5\n")
    assert load_policy(f).fanin_knee_factor == 1.5
    f.write_text("[policy]\nfanin_knee_factor = 1.0\n")
    with pytest.raises(PolicyError, match="fanin_knee_factor: must be a number > 1"):
        load_policy(f)
    with pytest.raises(PolicyFieldError):
        Policy(fanin_knee_factor=True)


def test_no_projection_when_the_sweep_did_not_fetch_the_workloads_chunk() -> None:
    w = load_workload("qwen3-coder-480b-tp8")
    r = fanin.judge("st1", PLAIN, 256 << 10, 2.0, [lv(1, 100), lv(2, 100)])
    assert fanin.project(r, w) == ()
    why = fanin.no_projection(r, w)
    assert why is not None and "262,144-byte chunks" in why and "8,126,464" in why
    same = dataclasses.replace(r, chunk_bytes=w.chunk_bytes)
    assert fanin.no_projection(same, w) is None and len(fanin.project(same, w)) == 2
    assert fanin.pays_up_to(fanin.project(same, w)) == 2


def test_dry_run_estimates_the_sweep_through_the_storage_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per storage node and measured level: one request plus k readers' chunks at the lesser
    of the model's TCP goodput (10 Gbit/s) and the storage node's NIC (stated 1 Gbit/s)."""
    from cli_helpers import Run, run_in_process

    def netqual(*args: str, cwd: Path) -> Run:  # in-process: a unit test starts no process
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    lines = ["[defaults]\nport = 18515\n"]
    lines.append('[[node]]\nname = "st"\naddress = "10.0.0.1"\nrole = "storage"\nnic_gbps = 1.0\n')
    for i in range(3):
        lines.append(f'[[node]]\nname = "c{i}"\naddress = "10.0.1.{i + 1}"\nrole = "compute"\n')
    inv = tmp_path / "inv.toml"
    inv.write_text("\n".join(lines))
    args = ["run", str(inv), "--mode", "bipartite", "--fanin", "1,2,8", "--dry-run", "--json"]
    r = netqual(*args, "--fanin-chunk", "1MiB", "--fanin-chunks", "100", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    phase = json.loads(r.stdout)["estimate"]["phases"]["fanin"]
    assert phase["count"] == 2  # level 8 has more readers than the 3 compute nodes
    per_reader_s = 100 * (1 << 20) * 8 / 1e9
    assert phase["seconds"] == pytest.approx(2 * 0.5 + 3 * per_reader_s, rel=1e-3)
    text = netqual(*args[:-1], cwd=tmp_path).stdout
    assert "fanin" in text and "1 storage node(s) x levels 1,2,8" in text


def test_gate_rule_min_fanin_readers_fails_without_a_sweep_or_below_the_verdict() -> None:
    from netqual.gate.fanin import MinFaninReaders
    from netqual.gate.model import GateContext, Scope, Status
    from netqual.model.stats import Metric
    from netqual.table.paths import PathTable

    nodes = {"st1": Node("st1", "10.0.0.1", role=Role.STORAGE)}
    table = PathTable.from_paths([])
    rows = np.empty(0, dtype=np.int64)
    rule = MinFaninReaders(Scope(), 4)
    none = rule.check(table, rows, GateContext(nodes, Metric.P99))
    assert none.status is Status.FAIL and "no fan-in sweep" in none.message
    r = fanin.judge("st1", PLAIN, 1 << 20, 2.0, [lv(1, 100), lv(2, 150), lv(4, 300)])
    assert r.safe_up_to == 2
    low = rule.check(table, rows, GateContext(nodes, Metric.P99, fanin=(r,)))
    assert low.status is Status.FAIL and [f.src for f in low.failing] == ["st1"]
    ok = MinFaninReaders(Scope(), 2).check(table, rows, GateContext(nodes, Metric.P99, fanin=(r,)))
    assert ok.status is Status.PASS


def test_a_first_level_with_a_stalls_tail_anchors_no_within() -> None:
    """CI's loaded lab: one reader's chunk p50 4.4 ms, p99 104 ms (95% CI 57-235 ms): 2 and
    4 readers of the shaped port were "within" 2x that, "safe up to 4" where the knee is 4.
    A first level whose p99 is surely past 5x its p50 anchors no "within"; a level surely
    past factor x its p99 is still beyond, and the verdict says why it is preliminary."""
    base = lv(1, 103_816, samples=500, p50=4_396, ci=(57_087, 235_043))
    levels = [base, lv(2, 6_186, p50=5_274, ci=(5_591, 10_774)),
              lv(4, 10_680, p50=10_553, ci=(10_665, 10_765))]  # fmt: skip
    called = fanin.call_levels(levels, 2.0)
    assert [c.call for c in called] == [Call.BASE, Call.UNDECIDED, Call.UNDECIDED]
    res = fanin.judge("st1", "plain", 256 << 10, 2.0, levels)
    assert res.safe_up_to == 1 and res.knee is None
    assert "past 5x its p50" in res.verdict and "preliminary at 2" in res.verdict, res.verdict
    assert not fanin.more_decides(base, levels[1], 2.0)  # more of level 2 cannot help
    beyond = lv(4, 600_000, p50=500_000, ci=(590_000, 610_000))
    assert fanin.call_levels([base, beyond], 2.0)[1].call is Call.BEYOND
    # the same first level with an ordinary tail (p99 1.01x its p50) anchors them
    calm = lv(1, 4_455, samples=500, p50=4_397, ci=(4_439, 229_330))
    two = lv(2, 6_498, p50=5_276, ci=(6_150, 6_620))
    assert [c.call for c in fanin.call_levels([calm, two], 2.0)] == [Call.BASE, Call.WITHIN]
