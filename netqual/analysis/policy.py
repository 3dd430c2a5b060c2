"""Verdicts: offload-safe, marginal or unsafe, always with the reasons that led there."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from netqual.analysis.fleet import parse_fleet
from netqual.base.errors import PolicyError
from netqual.base.units import format_duration_us, format_size, format_us
from netqual.files.tomlfile import Fields, read_toml
from netqual.model.policy import Policy, PolicyFieldError
from netqual.model.stats import BulkStats, Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.table.paths import VERDICTS, BoolArray, FloatArray, IntArray, PathTable


def _error(source: str, problem: str, field: str | None) -> PolicyError:
    return PolicyError(source, problem, field)


DEFAULT_POLICY = Policy()  # the one place defaults live is the dataclass


def load_policy(path: Path) -> Policy:
    source = str(path)
    data = read_toml(path, _error)
    top = Fields(source, data, "", _error)
    top.check_keys({"policy", "fleet"})
    parse_fleet(top)  # checked here too, so a run stops on it before measuring
    keys = {
        "metric", "safe_max_us", "unsafe_above_us", "min_samples", "fanin_knee_factor",
        "max_loss_pct",
        "max_engine_vs_probe",
    }  # fmt: skip
    f = top.sub("policy", keys, missing="missing [policy] table")
    metric = f.choice(Metric, "metric", DEFAULT_POLICY.metric)
    safe = f.number("safe_max_us", DEFAULT_POLICY.safe_max_us)
    unsafe = f.number("unsafe_above_us", DEFAULT_POLICY.unsafe_above_us)
    min_samples = f.integer("min_samples", DEFAULT_POLICY.min_samples, low=1)
    knee = f.number("fanin_knee_factor", DEFAULT_POLICY.fanin_knee_factor)
    loss = f.number("max_loss_pct", DEFAULT_POLICY.max_loss_pct, positive=False)
    engine = f.number("max_engine_vs_probe", DEFAULT_POLICY.max_engine_vs_probe)
    try:
        return Policy(
            metric=metric, safe_max_us=safe, unsafe_above_us=unsafe, min_samples=min_samples,
            fanin_knee_factor=knee, max_loss_pct=loss, max_engine_vs_probe=engine,
        )  # fmt: skip
    except PolicyFieldError as err:
        raise f.fail(err.field, err.problem) from None


def judge(
    policy: Policy,
    rtt: RttStats | None,
    bulk: Sequence[BulkStats] = (),
    error: str | None = None,
) -> tuple[Verdict, tuple[str, ...]]:
    """Classify one path. A failed path (error set or no samples) is unsafe."""
    if error is not None:
        return Verdict.UNSAFE, (error,)
    if rtt is None:
        return Verdict.UNSAFE, ("no RTT samples were measured",)
    m = policy.metric.value
    value = rtt.value(policy.metric)
    reasons: list[str] = []
    verdict = VERDICTS[int(value_classes(policy, np.array([value]))[0])]
    if verdict is Verdict.UNSAFE:
        reasons.append(
            f"{m} RTT {format_us(value)} us > {format_us(policy.unsafe_above_us)} us: "
            "the offload gain is gone"
        )
    elif verdict is Verdict.MARGINAL:
        reasons.append(
            f"{m} RTT {format_us(value)} us is above {format_us(policy.safe_max_us)} us "
            "(TTFT degrades) but within "
            f"{format_us(policy.unsafe_above_us)} us"
        )
    else:
        reasons.append(f"{m} RTT {format_us(value)} us <= {format_us(policy.safe_max_us)} us")

    ci = rtt.ci95.of(policy.metric)  # the judged metric's interval, never another's
    if ci is not None:
        for line in (policy.safe_max_us, policy.unsafe_above_us):
            if ci[0] <= line < ci[1]:
                reasons.append(
                    f"{m} 95% CI {format_us(ci[0])}-{format_us(ci[1])} us "
                    f"straddles the {format_us(line)} us line: re-test with more iterations"
                )
    if few_samples(policy, np.array([rtt.samples]))[0]:
        few = f"only {rtt.samples:,} samples kept, policy needs {policy.min_samples:,}"
        if verdict is Verdict.SAFE:
            # The sample count is the whole cause: say so first, then what was measured.
            verdict = Verdict.MARGINAL
            reasons.insert(0, f"{few} (too few to call it offload-safe)")
        else:
            reasons.append(few)
    if m in rtt.untrusted and verdict is Verdict.SAFE:
        verdict = Verdict.MARGINAL
        reasons.append(f"{m} is not trustworthy with {rtt.samples} samples")
    failed = [b for b in bulk if b.error]
    for b in failed:
        reasons.append(
            f"bulk read {format_size(b.chunk_bytes)} x depth {b.depth} failed: {b.error}"
        )
    if failed:
        verdict = Verdict.UNSAFE
    elif bulk:
        big = max(bulk, key=lambda b: (b.chunk_bytes, b.depth))
        reasons.append(  # a chunk's completion in the unit its size suits: "2.9 ms"
            f"{format_size(big.chunk_bytes)} reads at depth {big.depth}: completion p99 "
            f"{format_duration_us(big.completion_p99_us)}, {big.goodput_gbps:.1f} Gbit/s"
        )
    return verdict, tuple(reasons)


# -- the policy's lines over columns: the one definition, per path and for whole runs -----


def value_classes(policy: Policy, value_us: FloatArray) -> IntArray:
    """The verdict rank each value of the policy's metric earns by the two lines alone:
    over ``unsafe_above_us`` unsafe, over ``safe_max_us`` marginal, else safe. NaN (no
    value) is unsafe."""
    with np.errstate(invalid="ignore"):
        got: IntArray = np.where(
            ~(value_us <= policy.unsafe_above_us),
            Verdict.UNSAFE.rank,
            np.where(value_us > policy.safe_max_us, Verdict.MARGINAL.rank, Verdict.SAFE.rank),
        )
    return got


def few_samples(policy: Policy, samples: IntArray) -> BoolArray:
    """Fewer samples than the policy needs to call a path offload-safe."""
    got: BoolArray = samples < policy.min_samples
    return got


def classes(policy: Policy, value_us: FloatArray, samples: IntArray) -> IntArray:
    """``judge``'s class from the values (no errors, CIs or bulk): ``value_classes``, and a
    safe value with ``few_samples`` is marginal."""
    by_value = value_classes(policy, value_us)
    got: IntArray = np.where(
        (by_value == Verdict.SAFE.rank) & few_samples(policy, samples),
        Verdict.MARGINAL.rank,
        by_value,
    )
    return got


def sample_limited(policy: Policy, table: PathTable) -> BoolArray:
    """Marginal only for want of samples, for every path: an RTT, ``few_samples`` and the
    metric itself within the safe line. Such a path says nothing about the hardware."""
    limited: BoolArray = (
        table.has_rtt
        & few_samples(policy, table.samples)
        & (value_classes(policy, table.values(policy.metric)) == Verdict.SAFE.rank)
    )
    return limited


def short_plan_problem(policy: Policy, iterations: int) -> str | None:
    """Why a plan cannot reach an offload-safe verdict, or None when it can."""
    if iterations >= policy.min_samples:
        return None
    return (
        f"the plan keeps {iterations:,} samples per path, below the policy's min_samples "
        f"{policy.min_samples:,}: no path could be called offload-safe. Use --iterations "
        f"{policy.min_samples} or more, or --allow-short-plan for a preliminary look"
    )
