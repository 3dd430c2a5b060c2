"""Known-answer and property tests for the statistics (netqual.analysis.stats)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netqual.analysis.stats import bulk_stats, needed_samples, quantile_ci, rtt_stats
from netqual.model.stats import Metric
from netqual.transports import RawBulk


def ns(values_us: list[float]) -> np.ndarray:
    return (np.asarray(values_us) * 1000).astype(np.int64)


def test_known_answers_on_1_to_100_us() -> None:
    s = rtt_stats(ns(list(range(1, 101))))
    assert s.samples == 100
    assert s.min_us == 1.0
    assert s.max_us == 100.0
    assert s.mean_us == pytest.approx(50.5)
    # numpy linear (type 7): position q*(n-1)
    assert s.p50_us == pytest.approx(50.5)
    assert s.p90_us == pytest.approx(90.1)
    assert s.p99_us == pytest.approx(99.01)
    assert s.p999_us == pytest.approx(99.901)
    # population stdev of 1..100 = sqrt((n^2-1)/12)
    assert s.stdev_us == pytest.approx(np.sqrt((100**2 - 1) / 12))


def test_trust_thresholds_follow_the_ten_tail_samples_rule() -> None:
    assert needed_samples(0.5) == 20
    assert needed_samples(0.9) == 100
    assert needed_samples(0.99) == 1000
    assert needed_samples(0.999) == 10_000
    assert rtt_stats(ns([5.0] * 999)).untrusted == ("p99", "p999")
    assert rtt_stats(ns([5.0] * 1000)).untrusted == ("p999",)
    assert rtt_stats(ns([5.0] * 10_000)).untrusted == ()


def test_ci95_brackets_the_quantile_and_narrows_with_more_samples() -> None:
    rng = np.random.default_rng(7)
    small = np.sort(rng.exponential(20.0, 2_000))
    large = np.sort(rng.exponential(20.0, 200_000))
    lo_s, hi_s = quantile_ci(small, 0.99)
    lo_l, hi_l = quantile_ci(large, 0.99)
    assert lo_s <= np.percentile(small, 99) <= hi_s
    assert lo_l <= np.percentile(large, 99) <= hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s)
    # true p99 of Exp(mean 20) is 20*ln(100) = 92.1 us: the large-sample CI covers it
    assert lo_l <= 20 * np.log(100) <= hi_l


def test_every_percentile_has_its_interval() -> None:
    # whatever the policy judges: the interference check needs p99's under a p50 policy
    s = rtt_stats(ns(list(range(1, 10_001))))
    for m in Metric:
        ci = s.ci95.of(m)
        assert ci is not None, m
        assert ci == quantile_ci(np.arange(1, 10_001) / 1.0, m.quantile)
        assert ci[0] < s.value(m) < ci[1], m


def test_histogram_counts_every_sample() -> None:
    s = rtt_stats(ns([1.0, 2.0, 3.0, 50.0, 900.0]))
    assert sum(s.histogram_counts) == 5
    assert len(s.histogram_edges_us) == len(s.histogram_counts) + 1
    # fixed grid, 10 bins per decade: 1 us opens bin 0, 900 us falls in [794, 1000)
    assert s.histogram_edges_us[0] == pytest.approx(1.0)
    assert s.histogram_edges_us[-2] <= 900.0 < s.histogram_edges_us[-1]
    assert s.histogram_edges_us[-1] == pytest.approx(1000.0)
    for lo, hi in zip(s.histogram_edges_us, s.histogram_edges_us[1:], strict=False):
        assert hi / lo == pytest.approx(10**0.1)
    flat = rtt_stats(ns([7.0] * 30))
    assert flat.histogram_counts == (30,)


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError):
        rtt_stats(np.empty(0, dtype=np.int64))


def test_bulk_goodput_is_payload_bits_over_cell_wall_time() -> None:
    raw = RawBulk(
        chunk_bytes=1 << 20,
        depth=2,
        completion_ns=ns([100.0, 200.0, 300.0, 400.0]),
        elapsed_ns=1_000_000,
    )
    b = bulk_stats(raw)
    assert b.reads == 4
    assert b.goodput_gbps == pytest.approx(4 * (1 << 20) * 8 / 1e6)
    assert b.completion_p50_us == pytest.approx(250.0)
    assert b.completion_max_us == pytest.approx(400.0)
    assert b.error is None


def test_bulk_without_reads_reports_an_error_not_a_rate() -> None:
    b = bulk_stats(RawBulk(65536, 1, np.empty(0, dtype=np.int64), 0))
    assert b.goodput_gbps == 0.0
    assert b.error == "no completed reads"


samples = st.lists(st.integers(min_value=1, max_value=10**9), min_size=1, max_size=400)


@settings(max_examples=150, deadline=None)
@given(samples)
def test_order_invariants(values: list[int]) -> None:
    s = rtt_stats(np.asarray(values, dtype=np.int64))
    assert s.min_us <= s.p50_us <= s.p90_us <= s.p99_us <= s.p999_us <= s.max_us
    assert s.min_us <= s.mean_us <= s.max_us
    # population stdev, against the standard library's exact computation, and within
    # Popoviciu's bound (half the range)
    assert s.stdev_us == pytest.approx(statistics.pstdev(values) / 1000.0, rel=1e-9, abs=1e-9)
    assert s.stdev_us <= (s.max_us - s.min_us) / 2 + 1e-9
    for m in Metric:
        ci = s.ci95.of(m)
        assert ci is not None
        assert s.min_us <= ci[0] <= ci[1] <= s.max_us


@settings(max_examples=100, deadline=None)
@given(samples, st.randoms(use_true_random=False))
def test_statistics_do_not_depend_on_sample_order(values: list[int], rnd: object) -> None:
    shuffled = list(values)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a = rtt_stats(np.asarray(values, dtype=np.int64))
    b = rtt_stats(np.asarray(shuffled, dtype=np.int64))
    assert a == b
