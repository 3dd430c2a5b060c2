"""Table-driven boundary tests for verdicts, and policy file validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from netqual.analysis.policy import judge, load_policy
from netqual.base.errors import PolicyError
from netqual.model.policy import Policy
from netqual.model.stats import BulkStats, Ci95, Metric, RttStats
from netqual.model.verdict import Verdict


def rtt(p99: float, samples: int = 10_000, untrusted: tuple[str, ...] = ()) -> RttStats:
    return RttStats(
        samples=samples,
        min_us=1.0,
        p50_us=min(p99, 10.0),
        p90_us=min(p99, 20.0),
        p99_us=p99,
        p999_us=p99 * 1.5,
        max_us=p99 * 2,
        mean_us=10.0,
        stdev_us=1.0,
        untrusted=untrusted,
    )


@pytest.mark.parametrize(
    ("p99", "expected"),
    [
        (5.0, Verdict.SAFE),
        (199.999, Verdict.SAFE),
        (200.0, Verdict.SAFE),  # <= safe_max_us is safe
        (200.001, Verdict.MARGINAL),
        (350.0, Verdict.MARGINAL),
        (500.0, Verdict.MARGINAL),  # > unsafe_above_us is unsafe, equal is not
        (500.001, Verdict.UNSAFE),
        (10_000.0, Verdict.UNSAFE),
    ],
)
def test_thresholds(p99: float, expected: Verdict) -> None:
    verdict, reasons = judge(Policy(), rtt(p99))
    assert verdict is expected
    assert reasons and "p99 RTT" in reasons[0]


def test_too_few_samples_is_never_safe() -> None:
    verdict, reasons = judge(Policy(), rtt(10.0, samples=5_000))
    assert verdict is Verdict.MARGINAL
    # The sample count is the whole cause, so it is the first reason.
    assert reasons[0].startswith("only 5,000 samples kept, policy needs 10,000")


def test_too_few_samples_does_not_soften_unsafe() -> None:
    verdict, _ = judge(Policy(), rtt(900.0, samples=50))
    assert verdict is Verdict.UNSAFE


def test_untrusted_metric_is_flagged() -> None:
    policy = Policy(metric=Metric.P999, min_samples=100)
    verdict, reasons = judge(policy, rtt(10.0, samples=1_000, untrusted=("p999",)))
    assert verdict is Verdict.MARGINAL
    assert any("not trustworthy" in r for r in reasons)


def test_metric_choice_is_honoured() -> None:
    policy = Policy(metric=Metric.P50, safe_max_us=5.0, unsafe_above_us=8.0)
    verdict, reasons = judge(policy, rtt(1000.0))  # p50 is 10 us
    assert verdict is Verdict.UNSAFE
    assert reasons[0].startswith("p50 RTT 10.0 us > 8.00 us")


def test_error_is_unsafe_with_the_error_as_reason() -> None:
    verdict, reasons = judge(Policy(), None, error="gpu02 unreachable: connection refused")
    assert verdict is Verdict.UNSAFE
    assert reasons == ("gpu02 unreachable: connection refused",)


def test_failed_bulk_cell_makes_the_path_unsafe() -> None:
    bad = BulkStats(8 << 20, 8, 0, 0.0, 0.0, 0.0, 0.0, error="no completed reads")
    verdict, reasons = judge(Policy(), rtt(10.0), [bad])
    assert verdict is Verdict.UNSAFE
    assert any("8MiB x depth 8 failed" in r for r in reasons)


def test_ci_straddling_a_line_is_mentioned() -> None:
    r = RttStats(10_000, 1, 10, 20, 195, 300, 400, 10, 1, (), Ci95(p99=(190.0, 210.0)))
    _, reasons = judge(Policy(), r)
    assert any("p99 95% CI 190.0-210.0 us straddles the 200.0 us line" in x for x in reasons)


def test_only_the_judged_metrics_interval_can_straddle_a_line() -> None:
    # p50 is judged: p50's interval lies below the line, p99's straddles it (not mentioned)
    r = RttStats(
        10_000, 1, 10, 20, 195, 300, 400, 10, 1, (), Ci95(p50=(9.0, 11.0), p99=(190.0, 210.0))
    )
    verdict, reasons = judge(Policy(metric=Metric.P50), r)
    assert verdict is Verdict.SAFE
    assert not [x for x in reasons if "straddles" in x]
    _, reasons = judge(Policy(metric=Metric.P50, safe_max_us=10.0, unsafe_above_us=500.0), r)
    assert any("p50 95% CI 9.00-11.0 us straddles the 10.0 us line" in x for x in reasons)


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "policy.toml"
    p.write_text(text)
    return p


def test_load_policy_round_trip(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        '[policy]\nmetric = "p90"\nsafe_max_us = 150\nunsafe_above_us = 400.5\n'
        "min_samples = 2000\n",
    )
    assert load_policy(p) == Policy(Metric.P90, 150.0, 400.5, 2000)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("[policy\n", "line 1", "TOML syntax error"),
        ("[policy]\nsafe_max_us = -1\n", "policy.safe_max_us", "positive"),
        ("[policy]\nunsafe_above_us = 100\n", "policy.unsafe_above_us", ">= safe_max_us"),
        ('[policy]\nmetric = "p75"\n', "policy.metric", "unknown metric"),
        ("[policy]\nmin_samples = 0\n", "policy.min_samples", ">= 1"),
        ("[policy]\nsafe_max = 1\n", "policy.safe_max", "unknown key"),
        ('[policy]\nsafe_max_us = "fast"\n', "policy.safe_max_us", "expected a number"),
        ("[other]\n", "other", "unknown key"),
    ],
)
def test_bad_policy_names_file_and_field(
    tmp_path: Path, text: str, field: str | None, words: str
) -> None:
    p = write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        load_policy(p)
    assert str(p) in str(info.value)
    assert info.value.field == field
    assert words in str(info.value)
    assert info.value.exit_code == 2
