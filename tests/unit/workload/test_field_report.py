"""The one TTFT model held to the field report (DESIGN "Where the numbers come from";
docs/workload.md "The field report"): the preset of its class, with its documented
connector (LMCache layer-wise: 62 serial round trips per chunk), puts the 2x line near
~200 us and the break-even line near ~500 us, and gives TTFT p50 17.20 -> 11.85 s (-31%)
at 16 requests. The per-path verdict, `netqual workload`'s lines and the fan-in projection
all come out of the same function.

Tolerances: the lines +-10% (the report's "~200 us" and "~500 us" are round numbers read off
a curve; the model lands within ~1%); the TTFT change +-0.5 points at the healthy RDMA RTT
the fit used (kv_share is fitted to it: a regression guard) and +-1 point anywhere in the
healthy range 5-10 us.
"""

from __future__ import annotations

import pytest

from netqual.analysis.fanin import project
from netqual.model.fanin import ChunkStats, FaninLevel, FaninResult
from netqual.model.path import PathResult
from netqual.model.stats import BulkStats, RttStats
from netqual.model.ttft import (
    HEALTHY_RDMA_RTT_US,
    Loader,
    break_even_rtt_us,
    ttft_break_even_rtt_us,
    ttft_change,
    wire_us,
)
from netqual.model.verdict import Verdict
from netqual.workload import load_workload
from netqual.workload.judge import judged
from netqual.workload.load import PRESETS_DIR

PRESET = "qwen3-coder-480b-tp8"
# The report's numbers
SAFE_LINE_US, GONE_LINE_US = 200.0, 500.0
TTFT_BASE_S, TTFT_OFFLOAD_S = 17.20, 11.85
# What netqual would measure for one node's 62 MiB chunk at 8 reads in flight on 100 GbE
# RoCEv2 (the report gives none): an assumption the fit rests on, not fitted
GOODPUT_GBPS = 92.0

W = load_workload(PRESET)
WIRE = wire_us(W.node_chunk_bytes, GOODPUT_GBPS)


def test_the_preset_states_its_connector_and_its_fitted_parameters() -> None:
    assert W.connector == "lmcache-layerwise"
    assert W.model.layers == 62 and W.round_trips_per_chunk == 62  # one per layer
    assert W.node_chunk_bytes == 65_011_712  # 31 KiB per token per rank x 256 x 8
    assert W.loader is Loader.SERIAL
    text = (PRESETS_DIR / f"{PRESET}.toml").read_text(encoding="utf-8")
    for key in ("local_read_gbps", "kv_share"):
        line = next(ln for ln in text.splitlines() if ln.startswith(key))
        assert "FITTED" in line, line
    assert W.baseline.local_read_gbps == 14.3 and W.kv_share == 0.374


def test_two_x_line_near_200_us() -> None:
    line = break_even_rtt_us(W.budget_us, WIRE, W.round_trips_per_chunk, 2.0)
    assert line == pytest.approx(SAFE_LINE_US, rel=0.10)
    assert line == pytest.approx(202.1, abs=0.1)  # the fit's residual: +1.1%


def test_break_even_line_near_500_us() -> None:
    line = break_even_rtt_us(W.budget_us, WIRE, W.round_trips_per_chunk, 1.0)
    assert line == pytest.approx(GONE_LINE_US, rel=0.10)
    assert line == pytest.approx(495.4, abs=0.1)  # residual: -0.9%
    # the TTFT gain is gone exactly there, at any concurrency (a serial loader)
    for c in (8, 16):
        assert ttft_break_even_rtt_us(WIRE, 62, W.budget_us, W.loader, c) == pytest.approx(line)


@pytest.mark.parametrize("concurrency", [8, 16])
def test_ttft_change_at_8_and_16_requests(concurrency: int) -> None:
    target = TTFT_OFFLOAD_S / TTFT_BASE_S - 1
    assert target == pytest.approx(-0.311, abs=0.001)
    assert W.kv_share is not None

    def change(rtt: float) -> float:
        return ttft_change(rtt, WIRE, 62, W.budget_us, W.kv_share or 0, W.loader, concurrency)

    assert 100 * change(HEALTHY_RDMA_RTT_US) == pytest.approx(100 * target, abs=0.5)
    for rtt in (5.0, 10.0):
        assert 100 * change(rtt) == pytest.approx(100 * target, abs=1.0)
    # 17.20 s -> 11.85 s at 16 requests (the model predicts the same ratio at 8)
    assert TTFT_BASE_S * (1 + change(HEALTHY_RDMA_RTT_US)) == pytest.approx(11.85, abs=0.1)
    # at the 2x line the fetch is half the budget: TTFT keeps -f/2; none at break-even
    two_x = break_even_rtt_us(W.budget_us, WIRE, 62, 2.0)
    gone = break_even_rtt_us(W.budget_us, WIRE, 62, 1.0)
    assert two_x is not None and gone is not None
    assert change(two_x) == pytest.approx(-W.kv_share / 2)
    assert change(gone) == pytest.approx(0.0, abs=1e-12)
    assert change(600.0) > 0  # worse than local NVMe


def _path(rtt_us: float) -> PathResult:
    """A path whose workload cell (the node's chunk at 8 reads in flight) took one round
    trip and the bytes at the assumed goodput."""
    cell = WIRE + rtt_us
    rtt = RttStats(10_000, rtt_us, rtt_us, rtt_us, rtt_us, rtt_us, rtt_us, rtt_us, 0.1)
    bulk = BulkStats(W.chunk_bytes, 8, 64, GOODPUT_GBPS, cell, cell, cell)
    return PathResult("gpu01", "stor01", "rdma", Verdict.SAFE, (), rtt, (bulk,))


@pytest.mark.parametrize(
    ("rtt_us", "verdict"),
    [
        (7.5, Verdict.SAFE),
        (150.0, Verdict.SAFE),
        (300.0, Verdict.MARGINAL),
        (600.0, Verdict.UNSAFE),
    ],
)
def test_the_per_path_verdict_is_the_same_model(rtt_us: float, verdict: Verdict) -> None:
    """The workload verdict of a measured path agrees with the lines (and so with the RTT
    policy's 200 / 500 us on this class: the two verdicts do not contradict each other)."""
    got = judged(_path(rtt_us), W).workload
    assert got is not None and got.verdict is verdict
    assert got.fetch_p99_us == pytest.approx(62 * rtt_us + WIRE)  # the bytes once
    assert got.break_even_rtt_us == pytest.approx(495.4, abs=0.1)


def test_the_fanin_projection_is_the_same_model() -> None:
    """One reader whose chunk completes in one round trip and the bytes: the projected
    fetch per chunk and TTFT change are the model's."""
    rtt = 10.0
    chunk = ChunkStats(2_000, WIRE + rtt, WIRE + rtt, WIRE + rtt)
    level = FaninLevel(1, chunk)
    sweep = FaninResult("stor01", "lmcache", W.chunk_bytes, 2.0, (level,), None, 1, "safe")
    (p,) = project(sweep, W, (rtt, rtt))
    assert p.chunks == 100
    assert p.fetch_p50_us / p.chunks == pytest.approx(62 * rtt + WIRE)
    assert p.ttft_change == pytest.approx(
        ttft_change(rtt, WIRE, 62, W.budget_us, W.kv_share or 0), abs=1e-9
    )
    assert p.pays


def test_netqual_workloads_break_even_table_is_the_same_model() -> None:
    """`netqual workload` at the raw 100 Gbit/s line rate (no goodput measured yet)."""
    row = next(b for b in W.break_even() if b.link_gbps == 100.0)
    wire = wire_us(W.node_chunk_bytes, 100.0)
    assert row.safe_rtt_us == pytest.approx(break_even_rtt_us(W.budget_us, wire, 62, 2.0))
    assert row.safe_rtt_us == pytest.approx(209.4, abs=0.1)
    assert row.rtt_us == pytest.approx(502.7, abs=0.1)
