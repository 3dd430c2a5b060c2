"""The interference check: did the run disturb what it measured?

After a run, a random sample of paths (default the larger of 2% and 8 paths, the 2% share
capped at 64 paths so a 500,000-path run does not spend hours re-measuring; at least one
per tier) is measured again *alone*: one pair at a time, ping-pong only, nothing else
running. For each sampled path the run's RTT is compared with the alone RTT.

Definitions (exact):

- a path's ratio is run / alone, for p50 and for p99;
- the sample's *noise* is how far a path reads apart when nothing can have disturbed it:
  over the sampled paths that were faster in the run than alone (only noise does that),
  the 90th percentile of alone / run (1 when there is none). A run disturbs its paths one
  way only; noise moves them both ways, so this is the run's own repeatability here;
- a path is *disturbed* when its p99 ratio exceeds the larger of ``tolerance`` (default
  1.2) and the noise **and** its run p99 lies above the alone p99's distribution-free 95%
  confidence interval (when the alone measurement carries one for p99): beyond practical,
  measured and statistical noise;
- a tier is *affected* when the median p99 ratio of its sampled paths exceeds the larger
  of ``tolerance`` and the noise and at least one of them is disturbed (one noisy path out
  of three leaves the median alone; half the tier inflated several times over does not);
- a run that measured one pair at a time (``--parallel 1``, ``netqual demo``) measured
  every path alone already: nothing of its own can have disturbed it, so no path is
  disturbed and the comparison is only the run's repeatability (``analysis/repeatability``);
- ``p50_ratio`` / ``p99_ratio`` are medians over the sample (and over a tier's paths);
- ``verdict_changes`` counts sampled paths whose verdict alone differs from the run's.

The JSON mapping (``interference`` in the results file) lives here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from netqual.analysis.stats import median
from netqual.base.errors import ResultsFileError
from netqual.model.path import PathResult, Tier
from netqual.model.run import Interference, RunKind, SampledPath, TierInterference
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.planning.sampling import DEFAULT_FRACTION, DEFAULT_MINIMUM, choose_sample

TOLERANCE = 1.2
NOISE_QUANTILE = 0.9


def noise(pairs: Sequence[tuple[float, float]]) -> float:
    """(run p99, alone p99) of the sampled paths -> how far apart noise alone put them:
    the 90th percentile of alone / run over the paths faster in the run (1.0: none)."""
    faster = sorted(a / r for r, a in pairs if r > 0 and a > r)
    if not faster:
        return 1.0
    k = NOISE_QUANTILE * (len(faster) - 1)
    lo = int(k)
    hi = min(lo + 1, len(faster) - 1)
    return faster[lo] + (faster[hi] - faster[lo]) * (k - lo)


def _disturbed(run: PathResult, alone: PathResult, tolerance: float) -> bool:
    """This check judges p99, whatever the policy's metric: a run disturbs its tail first.
    Its noise guard (the run's p99 inside the alone p99's 95% CI is not a disturbance) uses
    p99's interval, which every path measured by this version carries under any policy;
    only an alone path without one (never measured here, a test's record) goes unguarded."""
    assert run.rtt is not None and alone.rtt is not None
    if alone.rtt.p99_us <= 0 or run.rtt.p99_us <= tolerance * alone.rtt.p99_us:
        return False
    ci = alone.rtt.ci95.of(Metric.P99)
    return ci is None or run.rtt.p99_us > ci[1]


def by_tier(sampled: Iterable[SampledPath]) -> dict[Tier, list[SampledPath]]:
    out: dict[Tier, list[SampledPath]] = {}
    for s in sorted(sampled, key=lambda s: s.tier.value):
        out.setdefault(s.tier, []).append(s)
    return out


def tier_record(
    tier: Tier, members: Sequence[SampledPath], tolerance: float, line: float | None = None
) -> TierInterference:
    """``line``: what the median must exceed (the larger of the tolerance and the noise;
    the tolerance when not given: the members' ``disturbed`` flags carry the noise)."""
    p99 = median([s.p99_ratio for s in members])
    over = max(tolerance, line or 0.0)
    return TierInterference(
        tier=tier,
        paths=len(members),
        p50_ratio=median([s.p50_ratio for s in members]),
        p99_ratio=p99,
        affected=p99 is not None and p99 > over and any(s.disturbed for s in members),
    )


def compare(
    pairs: Sequence[tuple[PathResult, PathResult]],
    tolerance: float = TOLERANCE,
    one_at_a_time: bool = False,
) -> Interference:
    """(run path, alone path) pairs -> the interference record. ``one_at_a_time``: the
    run measured one pair at a time (``--parallel 1``): nothing of its own ran beside a
    probe, so no path is disturbed (module docstring)."""
    measured = [
        (run.rtt.p99_us, alone.rtt.p99_us)
        for run, alone in pairs
        if run.rtt is not None and alone.error is None and alone.rtt is not None
    ]
    line = max(tolerance, noise(measured))
    sampled: list[SampledPath] = []
    for run, alone in pairs:
        assert run.rtt is not None
        ok = alone.error is None and alone.rtt is not None
        sampled.append(
            SampledPath(
                src=run.src,
                dst=run.dst,
                tier=run.tier,
                run_p50_us=run.rtt.p50_us,
                run_p99_us=run.rtt.p99_us,
                alone_p50_us=alone.rtt.p50_us if ok and alone.rtt else None,
                alone_p99_us=alone.rtt.p99_us if ok and alone.rtt else None,
                run_verdict=run.verdict,
                alone_verdict=alone.verdict if ok else None,
                disturbed=ok and not one_at_a_time and _disturbed(run, alone, line),
                error=alone.error,
            )
        )
    tiers = [
        tier_record(tier, members, tolerance, line)
        for tier, members in by_tier(s for s in sampled if s.error is None).items()
    ]
    return Interference(
        sample=len(sampled),
        p50_ratio=median([s.p50_ratio for s in sampled]),
        p99_ratio=median([s.p99_ratio for s in sampled]),
        verdict_changes=sum(
            1 for s in sampled if s.alone_verdict is not None and s.alone_verdict != s.run_verdict
        ),
        tolerance=tolerance,
        tiers=tuple(tiers),
        paths=tuple(sampled),
    )


def check(
    paths: Sequence[PathResult],
    measure_alone: Callable[[PathResult], PathResult],
    fraction: float = DEFAULT_FRACTION,
    minimum: int = DEFAULT_MINIMUM,
    seed: int | None = None,
    tolerance: float = TOLERANCE,
    one_at_a_time: bool = False,
) -> Interference:
    """Re-measure a sample one path at a time with ``measure_alone`` and compare."""
    sample = choose_sample(paths, fraction, minimum, seed)
    return compare([(p, measure_alone(p)) for p in sample], tolerance, one_at_a_time)


def headline(
    inter: Interference,
    schedule: str | None = None,
    kind: RunKind = RunKind.CLUSTER,
    parallel: int | None = None,
) -> str | None:
    """One sentence for a report's first screen when the run disturbed itself, else None.

    ``schedule``: the run's ``run.schedule.name``, ``parallel`` its ``--parallel`` (None:
    not recorded, or all disjoint pairs at once); the advice names only options the
    command that made a run of ``kind`` has and the run did not use: ``--schedule
    aligned`` for an unaligned run, ``--parallel 1`` for a run that measured several pairs
    at once, and only for ``netqual run`` (``retest`` and ``demo`` have neither)."""
    if not inter.exceeds or parallel == 1:
        return None
    parts = []
    for t in inter.tiers:
        if t.affected and t.p99_ratio is not None:
            parts.append(f"{t.tier.value} (p99 x{t.p99_ratio:.1f})")
    if kind in (RunKind.DEMO, RunKind.RETEST):
        advice = "look for other traffic on the fabric"
    elif schedule == "unaligned":
        advice = "re-run with --schedule aligned"
    else:
        advice = "look for other traffic on the fabric, or re-run with --parallel 1"
    return (
        "The run disturbed its own measurement: paths re-measured alone were faster on "
        + ", ".join(parts)
        + f". Verdicts of these tiers may be pessimistic; {advice}."
    )


# -- JSON --------------------------------------------------------------------------------
def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def to_dict(inter: Interference) -> dict[str, Any]:
    return {
        "sample": inter.sample,
        "p50_ratio": _r(inter.p50_ratio),
        "p99_ratio": _r(inter.p99_ratio),
        "verdict_changes": inter.verdict_changes,
        "tolerance": inter.tolerance,
        "exceeds": inter.exceeds,
        "affected_tiers": [t.value for t in inter.affected_tiers],
        "tiers": [
            {
                "tier": t.tier.value,
                "paths": t.paths,
                "p50_ratio": _r(t.p50_ratio),
                "p99_ratio": _r(t.p99_ratio),
                "affected": t.affected,
            }
            for t in inter.tiers
        ],
        "paths": [
            {
                "src": s.src,
                "dst": s.dst,
                "tier": s.tier.value,
                "run_p50_us": round(s.run_p50_us, 3),
                "run_p99_us": round(s.run_p99_us, 3),
                "alone_p50_us": None if s.alone_p50_us is None else round(s.alone_p50_us, 3),
                "alone_p99_us": None if s.alone_p99_us is None else round(s.alone_p99_us, 3),
                "run_verdict": s.run_verdict.value,
                "alone_verdict": None if s.alone_verdict is None else s.alone_verdict.value,
                "disturbed": s.disturbed,
                "error": s.error,
            }
            for s in inter.paths
        ],
    }


def _opt(d: Mapping[str, Any], key: str) -> float | None:
    v = d.get(key)
    return None if v is None else float(v)


def from_dict(d: Any, source: str) -> Interference:
    """Inverse of to_dict; a malformed object is a ResultsFileError naming the field."""
    field = "interference"
    try:
        tiers = tuple(
            TierInterference(
                tier=Tier(t["tier"]),
                paths=int(t["paths"]),
                p50_ratio=_opt(t, "p50_ratio"),
                p99_ratio=_opt(t, "p99_ratio"),
                affected=bool(t["affected"]),
            )
            for t in d.get("tiers", ())
        )
        paths = tuple(
            SampledPath(
                src=str(s["src"]),
                dst=str(s["dst"]),
                tier=Tier(s["tier"]),
                run_p50_us=float(s["run_p50_us"]),
                run_p99_us=float(s["run_p99_us"]),
                alone_p50_us=_opt(s, "alone_p50_us"),
                alone_p99_us=_opt(s, "alone_p99_us"),
                run_verdict=Verdict(s["run_verdict"]),
                alone_verdict=None
                if s.get("alone_verdict") is None
                else Verdict(s["alone_verdict"]),
                disturbed=bool(s["disturbed"]),
                error=s.get("error"),
            )
            for s in d.get("paths", ())
        )
        return Interference(
            sample=int(d["sample"]),
            p50_ratio=_opt(d, "p50_ratio"),
            p99_ratio=_opt(d, "p99_ratio"),
            verdict_changes=int(d["verdict_changes"]),
            tolerance=float(d.get("tolerance", TOLERANCE)),
            tiers=tiers,
            paths=paths,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ResultsFileError(source, f"malformed interference record: {err!r}", field) from err
