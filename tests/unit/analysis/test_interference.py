"""The interference check: sample choice, ratios, the disturbed/affected rules, JSON."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from netqual.analysis.interference import (
    check,
    compare,
    from_dict,
    headline,
    to_dict,
)
from netqual.analysis.stats import rtt_stats
from netqual.base.errors import ResultsFileError
from netqual.model.path import PathResult, Tier
from netqual.model.run import RunKind
from netqual.model.stats import Ci95, Metric
from netqual.model.verdict import Verdict
from netqual.planning.sampling import choose_sample, sample_size


def path(src: str, dst: str, tier: Tier, base_us: float, spread_us: float = 2.0) -> PathResult:
    rng = np.random.default_rng(abs(hash((src, dst, base_us))) % 2**32)
    ns = (base_us + rng.exponential(spread_us, 4000)) * 1000
    rtt = rtt_stats(ns.astype(np.int64))
    verdict = Verdict.SAFE if rtt.p99_us <= 200 else Verdict.MARGINAL
    return PathResult(src, dst, "tcp", verdict, ("x",), rtt=rtt, tier=tier)


@pytest.mark.parametrize(
    ("total", "expected"),
    [(0, 0), (5, 5), (8, 8), (100, 8), (400, 8), (401, 9), (3_200, 64), (523_776, 64)],
)
def test_sample_size_is_8_or_a_capped_two_percent(total: int, expected: int) -> None:
    assert sample_size(total) == expected


def test_sample_has_one_path_per_tier_and_skips_failed_paths() -> None:
    paths = [path(f"a{i}", f"b{i}", Tier.SAME_RACK, 20) for i in range(50)]
    paths.append(path("x", "y", Tier.REMOTE, 900))
    paths.append(dataclasses.replace(path("f", "g", Tier.CROSS_RACK, 50), error="down", rtt=None))
    for seed in range(5):
        sample = choose_sample(paths, seed=seed)
        assert len(sample) == 8
        assert any(p.tier is Tier.REMOTE for p in sample)
        assert all(p.error is None for p in sample)
        assert len({p.key for p in sample}) == 8


def test_inflated_tier_is_affected_and_noise_is_not() -> None:
    same = [path(f"s{i}", f"t{i}", Tier.SAME_RACK, 20) for i in range(3)]
    cross = [path(f"c{i}", f"d{i}", Tier.CROSS_RACK, 60) for i in range(3)]
    inflated = [path(p.src, p.dst, p.tier, 60, 400) for p in cross]
    again = {
        p.key: path(p.src, p.dst, p.tier, 20 if p.tier is Tier.SAME_RACK else 60)
        for p in same + cross
    }
    inter = compare([(p, again[p.key]) for p in [*same, *inflated]])
    assert inter.sample == 6
    assert inter.affected_tiers == (Tier.CROSS_RACK,)
    cross_tier = next(t for t in inter.tiers if t.tier is Tier.CROSS_RACK)
    assert cross_tier.p99_ratio is not None and cross_tier.p99_ratio > 5
    same_tier = next(t for t in inter.tiers if t.tier is Tier.SAME_RACK)
    assert not same_tier.affected and same_tier.p99_ratio == pytest.approx(1.0, abs=0.15)
    assert inter.verdict_changes == 3  # the inflated cross-rack paths are marginal, alone safe
    text = headline(inter)
    assert text is not None and "cross-rack" in text and "same-rack" not in text
    clean = compare([(p, again[p.key]) for p in [*same, *cross]])
    assert not clean.exceeds and headline(clean) is None and clean.verdict_changes == 0


def test_failed_alone_measurement_is_recorded_not_judged() -> None:
    p = path("a", "b", Tier.SAME_RACK, 20)
    gone = dataclasses.replace(p, rtt=None, error="agent gone", verdict=Verdict.UNSAFE)
    inter = check([p], lambda _: gone)
    assert inter.sample == 1 and inter.paths[0].error == "agent gone"
    assert inter.p99_ratio is None and not inter.exceeds and inter.verdict_changes == 0


def test_json_round_trip_and_a_malformed_record_names_the_field() -> None:
    a = path("a", "b", Tier.CROSS_RACK, 60)
    inflated = dataclasses.replace(a, rtt=path("a", "b", Tier.CROSS_RACK, 60, 400).rtt)
    inter = compare([(inflated, a)])
    d = to_dict(inter)
    assert d["exceeds"] is True and d["affected_tiers"] == ["cross-rack"]
    back = from_dict(d, "r.json")
    assert back.affected_tiers == inter.affected_tiers and back.sample == 1
    with pytest.raises(ResultsFileError) as err:
        from_dict({"sample": 1}, "r.json")
    assert err.value.field == "interference"


def test_half_a_tier_inflated_is_affected_one_noisy_path_of_three_is_not() -> None:
    base = [path(f"c{i}", f"d{i}", Tier.CROSS_RACK, 60) for i in range(4)]
    alone = {p.key: path(p.src, p.dst, p.tier, 60) for p in base}
    half = [path(p.src, p.dst, p.tier, 60, 400) if i < 2 else p for i, p in enumerate(base)]
    assert compare([(p, alone[p.key]) for p in half]).affected_tiers == (Tier.CROSS_RACK,)
    one = [path(p.src, p.dst, p.tier, 60, 400) if i < 1 else p for i, p in enumerate(base[:3])]
    inter = compare([(p, alone[p.key]) for p in one])
    assert sum(s.disturbed for s in inter.paths) == 1 and not inter.exceeds


def test_a_zero_share_samples_exactly_the_minimum() -> None:
    assert sample_size(500_000, fraction=0.0, minimum=8) == 8
    assert sample_size(500_000, fraction=0.001, minimum=8) == 64  # the share is capped
    assert sample_size(500_000, fraction=0.001, minimum=500) == 500  # an explicit minimum wins


def test_the_p99_noise_guard_holds_under_a_p50_policy() -> None:
    # Measured under any policy, a path carries p99's interval, so a run p99 beyond the
    # tolerance but inside the alone p99's interval is noise. (Before, a p50 policy left
    # only p50's interval and the p99 guard was silently skipped.)
    # a Pareto tail (quantile function 20 / (1 - q)) over 1,000 samples: p99's interval is
    # wide, from rank 984 to rank 996
    tail_us = 20.0 / (1.0 - np.arange(1000) / 1000.0)
    rtt = rtt_stats((tail_us * 1000).astype(np.int64))
    alone = PathResult("a", "b", "tcp", Verdict.SAFE, ("x",), rtt=rtt, tier=Tier.SAME_RACK)
    assert alone.rtt is not None
    ci = alone.rtt.ci95.of(Metric.P99)
    assert ci is not None and ci[1] > 1.2 * alone.rtt.p99_us
    inside = dataclasses.replace(alone.rtt, p99_us=(1.2 * alone.rtt.p99_us + ci[1]) / 2)
    beyond = dataclasses.replace(alone.rtt, p99_us=ci[1] * 1.01)
    run_inside = dataclasses.replace(alone, rtt=inside)
    run_beyond = dataclasses.replace(alone, rtt=beyond)
    assert [s.disturbed for s in compare([(run_inside, alone), (run_beyond, alone)]).paths] == [
        False,
        True,
    ]
    # an alone record without p99's interval (a p50-only one, as older runs kept) is unguarded
    p50_only = dataclasses.replace(alone.rtt, ci95=Ci95(p50=alone.rtt.ci95.of(Metric.P50)))
    unguarded = dataclasses.replace(alone, rtt=p50_only)
    assert compare([(run_inside, unguarded)]).paths[0].disturbed


def _inflated_cross_rack() -> tuple[list[tuple[PathResult, PathResult]], list[PathResult]]:
    cross = [path(f"c{i}", f"d{i}", Tier.CROSS_RACK, 60) for i in range(3)]
    alone = [path(p.src, p.dst, p.tier, 60) for p in cross]
    inflated = [path(p.src, p.dst, p.tier, 60, 400) for p in cross]
    return list(zip(inflated, alone, strict=True)), alone


def test_noise_both_ways_as_large_as_the_rise_is_no_disturbance() -> None:
    """Paths faster in the run than alone show how far noise alone moves a path: a rise
    no larger than that is the run's repeatability, not the run disturbing itself (a
    shared host flagged every run)."""
    pairs, alone = _inflated_cross_rack()
    assert compare(pairs).affected_tiers == (Tier.CROSS_RACK,)
    # as many paths that read as much *faster* in the run as the inflated ones read slower
    faster = [(a, b) for b, a in pairs]
    noisy = compare(pairs + faster)
    assert not noisy.exceeds and headline(noisy) is None
    # a little noise the other way does not hide a rise far beyond it
    small = [(a, path(a.src, a.dst, a.tier, 70)) for a in alone]
    assert compare(pairs + small).affected_tiers == (Tier.CROSS_RACK,)


def test_a_run_of_one_pair_at_a_time_cannot_disturb_itself() -> None:
    pairs, _ = _inflated_cross_rack()
    inter = compare(pairs, one_at_a_time=True)
    assert not inter.exceeds and not any(s.disturbed for s in inter.paths)
    assert inter.p99_ratio is not None and inter.p99_ratio > 5  # kept: the repeatability


def test_the_advice_names_only_options_the_command_has_and_the_run_did_not_use() -> None:
    pairs, _ = _inflated_cross_rack()
    inter = compare(pairs)
    run = headline(inter, "aligned", RunKind.CLUSTER, None)
    assert run is not None and run.endswith("re-run with --parallel 1.")
    assert headline(inter, "aligned", RunKind.LAB, 1) is None  # measured alone already
    unaligned = headline(inter, "unaligned", RunKind.LAB, 4)
    assert unaligned is not None and unaligned.endswith("re-run with --schedule aligned.")
    for kind in (RunKind.RETEST, RunKind.DEMO):  # neither has --parallel nor --schedule
        text = headline(inter, "unaligned", kind, None)
        assert text is not None and text.endswith("look for other traffic on the fabric.")
        assert "--" not in text
