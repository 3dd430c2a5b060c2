"""One home each for what several commands share: the sampled mode's pairs per rack pair,
"worse than before" and its thresholds, a speedup's class and text, a median. Each test
drives every caller through the one definition, so a second copy that drifts fails it."""

from __future__ import annotations

import importlib
import inspect
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
from factories import make_results

from netqual.analysis import rise
from netqual.analysis.diff import diff_runs
from netqual.analysis.interference import tier_record
from netqual.analysis.stats import lower_median, median
from netqual.base.units import format_speedup
from netqual.campaign import milestone
from netqual.campaign.config import HistoryRules
from netqual.campaign.store import open_store
from netqual.campaign.trend import movement
from netqual.cli.cmd_run import run as cmd_run
from netqual.gate.profile import load_profile, parse_profile_text
from netqual.gate.registry import RULES, compares_baseline
from netqual.gate.regression import MaxP99IncreasePct
from netqual.model.path import Tier
from netqual.model.run import SampledPath
from netqual.model.verdict import Verdict
from netqual.planning import estimate, rails, schedule
from netqual.run.config import RunConfig
from netqual.workload import load_workload
from netqual.workload.columns import speedup_ranks, speedup_verdict

ROOT = Path(__file__).resolve().parents[3]


def test_the_sampled_modes_pairs_per_rack_pair_default_once() -> None:
    defaults = [
        inspect.signature(f).parameters["sample_k"].default
        for f in (schedule.build, schedule.plan_rounds, rails.build, estimate.dry_run, cmd_run)
    ]
    defaults.append(RunConfig.__dataclass_fields__["sample_k"].default)
    assert defaults == [schedule.DEFAULT_SAMPLE_K] * 6


def test_worse_means_what_the_requalify_profile_says_when_nothing_else_does() -> None:
    profile = load_profile(ROOT / "docs/gate-profiles/requalify.toml")
    (rule,) = [r for r in profile.rules if isinstance(r, MaxP99IncreasePct)]
    assert (rule.pct, rule.min_delta_us) == (rise.DEFAULT_INCREASE_PCT, rise.DEFAULT_MIN_DELTA_US)
    assert (HistoryRules().increase_pct, HistoryRules().min_delta_us) == (
        rise.DEFAULT_INCREASE_PCT,
        rise.DEFAULT_MIN_DELTA_US,
    )
    params = inspect.signature(diff_runs).parameters
    assert params["increase_pct"].default == rise.DEFAULT_INCREASE_PCT
    assert params["min_delta_us"].default == rise.DEFAULT_MIN_DELTA_US


def test_diff_and_the_campaign_call_the_same_paths_worse(tmp_path: Path) -> None:
    # gpu01->gpu02 rises 57% within its class, gpu01->gpu03 drops to unsafe, gpu02->gpu03
    # falls by a third: worse, worse, better (the campaign; diff's better is a class change)
    old = make_results(
        4, slow_paths=[("gpu01", "gpu02", 100.0), ("gpu01", "gpu03", 150.0),
                                      ("gpu02", "gpu03", 150.0)],
    )  # fmt: skip
    new = make_results(
        4, slow_paths=[("gpu01", "gpu02", 157.0), ("gpu01", "gpu03", 600.0),
                                      ("gpu02", "gpu03", 100.0)],
        started_at="2026-12-06T12:00:00+00:00",
    )  # fmt: skip
    worse = {("gpu01", "gpu02"), ("gpu01", "gpu03")}
    d = diff_runs(old, new)
    assert {(c.new.src, c.new.dst) for c in d.worse} == worse
    assert [c.new.dst for c in d.worse] == ["gpu03", "gpu02"]  # the class drop first
    store = open_store(tmp_path / "h.duckdb", create=True)
    try:
        store.add(old, source=tmp_path / "w1.json", week=1)
        store.add(new, source=tmp_path / "w2.json", week=2)
        m = movement(store, 1, 2, rise.DEFAULT_INCREASE_PCT, rise.DEFAULT_MIN_DELTA_US)
    finally:
        store.close()
    assert {(p.src, p.dst) for p in m.worse} == worse
    assert {(p.src, p.dst) for p in m.better} == {("gpu02", "gpu03")}
    assert (m.n_worse, m.n_better, m.compared) == (2, 1, 6)


def test_worse_known_answers_and_backwards_better() -> None:
    old_rank = np.array([0, 0, 1, 1, 0, 2])
    new_rank = np.array([1, 0, 0, 1, 0, 2])
    old_p99 = np.array([10.0, 10.0, 10.0, 20.0, 10.0, math.nan])
    new_p99 = np.array([10.0, 20.0, 30.0, 10.0, 14.0, 50.0])
    args = (old_rank, new_rank, old_p99, new_p99, 25.0, 5.0)
    # class drop; +100% and +10 us; better class yet p99 up (worse wins); -50%: better;
    # +40% but 4 us: neither; no RTT before: neither
    assert rise.worse(*args).tolist() == [True, True, True, False, False, False]
    back = rise.worse(new_rank, old_rank, new_p99, old_p99, 25.0, 5.0) & ~rise.worse(*args)
    assert back.tolist() == [False, False, False, True, False, False]


def test_a_speedups_class_is_one_rule_for_paths_tiers_and_the_report() -> None:
    w = load_workload("qwen3-coder-480b-tp8")
    assert (w.unsafe_speedup, w.safe_speedup) == (1.0, 2.0)
    speedups = np.array([math.nan, 0.5, 1.0, 1.99, 2.0, math.inf])
    u, m, s = Verdict.UNSAFE.rank, Verdict.MARGINAL.rank, Verdict.SAFE.rank
    assert speedup_ranks(w, speedups).tolist() == [u, u, m, m, s, s]
    assert [speedup_verdict(w, x) for x in (None, 0.99, 1.0, 2.0)] == [
        Verdict.UNSAFE, Verdict.UNSAFE, Verdict.MARGINAL, Verdict.SAFE,
    ]  # fmt: skip
    assert [format_speedup(x) for x in (None, math.inf, 2.04, 0.96)] == [
        "-", "inf", "2.0x", "1.0x",
    ]  # fmt: skip


@pytest.mark.parametrize("n", [1, 2, 5, 6, 101])
def test_one_median_is_statistics_median(n: int) -> None:
    values = np.random.default_rng(n).lognormal(3.0, 1.0, n)
    expect = statistics.median(values.tolist())
    assert median(values) == expect
    assert median(values.tolist()) == expect
    assert median([None, *values.tolist(), None]) == expect  # None: not measured
    lower = sorted(values.tolist())[(n - 1) // 2]
    assert lower_median(np.concatenate((values, [math.nan, math.inf]))) == lower


def test_a_median_of_nothing_is_none_and_a_tier_uses_it() -> None:
    assert median([]) is None and median([None]) is None
    assert math.isnan(lower_median(np.array([math.nan])))
    members = [
        SampledPath("a", "b", Tier.SAME_RACK, 10.0, 20.0, alone, alone, Verdict.SAFE, None, False)
        for alone in (10.0, 5.0, None, 4.0)
    ]  # p99 ratios 2, 4, none, 5: the median of the three is 4
    assert tier_record(Tier.SAME_RACK, members, 1.2).p99_ratio == 4.0


ROOMS = {p.name for p in (ROOT / "netqual").iterdir() if (p / "__init__.py").is_file()}


def _resolves(ref: str) -> bool:
    """``room/module.py``, ``room/module.attr`` or ``room.module.attr.attr``: the file, or
    the longest module prefix and then attributes, exist."""
    if ref.endswith((".py", "/")):
        return (ROOT / "netqual" / ref).exists()
    parts = ref.replace("/", ".").split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module("netqual." + ".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_architecture_md_names_only_homes_that_exist() -> None:
    """Every module or name the "One home per concept" table gives as a home (written from
    its room: `analysis/rise.worse`, `model.stats.Metric`) is there."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("## One home per concept") :].split("\n\n")[1]
    refs = [
        ref
        for line in table.splitlines()[2:]
        for ref in re.findall(r"`([^` ]+)`", line.rsplit(" | ", 1)[1])
        if re.split(r"[./]", ref)[0] in ROOMS | {"models"}  # models: the room's old name
    ]
    assert len(refs) > 60
    assert [ref for ref in refs if not _resolves(ref)] == []


def test_the_rules_that_compare_with_a_baseline_are_the_registrys_baseline_section() -> None:
    for spec in RULES:
        value = "5" if spec.value.name in ("COUNT", "PERCENT", "MICROSECONDS") else "true"
        value = {"VERDICT": '"marginal"', "FRACTION": "0.5", "RATIO": "1.5"}.get(
            spec.value.name, value
        )
        profile = parse_profile_text(f"[{spec.section}]\n{spec.key} = {value}\n", "p.toml")
        (rule,) = [r for r in profile.rules if r.key == spec.key]
        assert compares_baseline(rule) is (spec.section == "baseline"), spec.key
        assert milestone.compares(profile) is (spec.section == "baseline"), spec.key
