"""Compare two runs: paths that changed class, metric deltas, new and missing paths.

"Worse" means what the re-qualification gate fails: a path that dropped a class, or whose
p99 rose by more than ``increase_pct`` percent and at least ``min_delta_us`` (the gate's
``max_p99_increase_pct`` and ``min_delta_us``; ``p99_increase`` is the one test both use).
A change whose old and new 95% confidence intervals overlap lies within the run-to-run
noise of the two runs and is marked so.

Paths match by (src, dst) in either direction, so a re-run that measured a pair from the
other end still lines up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.models import Metric, PathResult, Results, RttStats, Verdict
from netqual.units import format_us

# The re-qualification example profile's numbers (docs/gate-profiles/requalify.toml):
# what `diff` calls worse when no --profile says otherwise.
DEFAULT_INCREASE_PCT = 25.0
DEFAULT_MIN_DELTA_US = 5.0


def p99_increase(old: PathResult, new: PathResult, pct: float, min_delta_us: float) -> str | None:
    """'p99 a -> b us (+n%)' when new's p99 rose by more than pct and min_delta_us."""
    if old.rtt is None or new.rtt is None or old.rtt.p99_us <= 0:
        return None
    delta = new.rtt.p99_us - old.rtt.p99_us
    rise = 100.0 * delta / old.rtt.p99_us
    if rise > pct and delta >= min_delta_us:
        return f"p99 {format_us(old.rtt.p99_us)} -> {format_us(new.rtt.p99_us)} us (+{rise:.0f}%)"
    return None


def _ci(r: RttStats | None, metric: Metric) -> tuple[float, float] | None:
    if r is None or r.ci95_metric != metric.value:
        return None
    if r.ci95_low_us is None or r.ci95_high_us is None:
        return None
    return r.ci95_low_us, r.ci95_high_us


@dataclass(frozen=True)
class PathChange:
    old: PathResult
    new: PathResult
    metric: Metric

    @property
    def label(self) -> str:
        return f"{self.new.src} -> {self.new.dst}"

    @property
    def old_us(self) -> float | None:
        return self.old.rtt.value(self.metric) if self.old.rtt else None

    @property
    def new_us(self) -> float | None:
        return self.new.rtt.value(self.metric) if self.new.rtt else None

    @property
    def delta_us(self) -> float | None:
        if self.old_us is None or self.new_us is None:
            return None
        return self.new_us - self.old_us

    @property
    def delta_pct(self) -> float | None:
        if self.delta_us is None or not self.old_us:
            return None
        return 100.0 * self.delta_us / self.old_us

    @property
    def class_change(self) -> int:
        """> 0: worse class now, < 0: better, 0: same."""
        return self.new.verdict.rank - self.old.verdict.rank

    @property
    def within_noise(self) -> bool | None:
        """Both runs' 95% CIs of the metric overlap (None: a run has no CI for it)."""
        a, b = _ci(self.old.rtt, self.metric), _ci(self.new.rtt, self.metric)
        if a is None or b is None:
            return None
        return a[0] <= b[1] and b[0] <= a[1]


@dataclass(frozen=True)
class RunDiff:
    metric: Metric
    old_source: str
    new_source: str
    old_started_at: str
    new_started_at: str
    old_counts: Mapping[Verdict, int]
    new_counts: Mapping[Verdict, int]
    changed_class: tuple[PathChange, ...]  # worse first, then better; each by delta
    deltas: tuple[PathChange, ...]  # every common path, largest absolute metric change first
    new_paths: tuple[PathResult, ...]
    missing_paths: tuple[PathResult, ...]
    increase_pct: float = DEFAULT_INCREASE_PCT
    min_delta_us: float = DEFAULT_MIN_DELTA_US
    worse_p99: tuple[PathChange, ...] = ()  # same class, but p99 up beyond the thresholds

    @property
    def worse(self) -> tuple[PathChange, ...]:
        """What the re-qualification gate fails: a class drop or a p99 rise."""
        return tuple(c for c in self.changed_class if c.class_change > 0) + self.worse_p99

    @property
    def noise(self) -> tuple[PathChange, ...]:
        """Changes whose two 95% confidence intervals overlap."""
        return tuple(c for c in self.deltas if c.within_noise)

    @property
    def better(self) -> tuple[PathChange, ...]:
        return tuple(c for c in self.changed_class if c.class_change < 0)


def _abs_delta(c: PathChange) -> float:
    d = c.delta_us
    return float("inf") if d is None else abs(d)


def diff_runs(
    old: Results,
    new: Results,
    *,
    old_source: str = "old",
    new_source: str = "new",
    increase_pct: float = DEFAULT_INCREASE_PCT,
    min_delta_us: float = DEFAULT_MIN_DELTA_US,
) -> RunDiff:
    """Judge with the new run's policy metric (the one its verdicts came from)."""
    metric = new.run.policy.metric
    old_by_key = {p.key: p for p in old.paths}
    matched: set[tuple[str, str]] = set()
    changes: list[PathChange] = []
    new_paths: list[PathResult] = []
    for p in new.paths:
        o = old_by_key.get(p.key) or old_by_key.get((p.dst, p.src))
        if o is None:
            new_paths.append(p)
            continue
        matched.add(o.key)
        changes.append(PathChange(o, p, metric))
    # A re-test measures only the suspects: the other paths are not missing, just not
    # re-tested, and "before" counts only the re-tested ones.
    missing = [] if new.retest_of else [p for p in old.paths if p.key not in matched]
    before = [old_by_key[k] for k in matched] if new.retest_of else old.paths
    changed = [c for c in changes if c.class_change != 0]
    changed.sort(key=lambda c: (-c.class_change, -_abs_delta(c), c.label))
    changes.sort(key=lambda c: (-_abs_delta(c), c.label))
    return RunDiff(
        metric=metric,
        old_source=old_source,
        new_source=new_source,
        old_started_at=old.run.started_at,
        new_started_at=new.run.started_at,
        old_counts=Counter(p.verdict for p in before),
        new_counts=Counter(p.verdict for p in new.paths),
        changed_class=tuple(changed),
        deltas=tuple(changes),
        new_paths=tuple(new_paths),
        missing_paths=tuple(missing),
        increase_pct=increase_pct,
        min_delta_us=min_delta_us,
        worse_p99=tuple(
            c
            for c in changes
            if c.class_change <= 0 and p99_increase(c.old, c.new, increase_pct, min_delta_us)
        ),
    )


def _change_dict(c: PathChange) -> dict[str, Any]:
    return {
        "src": c.new.src,
        "dst": c.new.dst,
        "old_verdict": c.old.verdict.value,
        "new_verdict": c.new.verdict.value,
        "old_us": c.old_us,
        "new_us": c.new_us,
        "delta_us": c.delta_us,
        "within_noise": c.within_noise,
    }


def diff_to_dict(d: RunDiff) -> dict[str, Any]:
    return {
        "metric": d.metric.value,
        "old": d.old_source,
        "new": d.new_source,
        "counts": {v.value: [d.old_counts.get(v, 0), d.new_counts.get(v, 0)] for v in Verdict},
        "worse": [_change_dict(c) for c in d.worse],
        "worse_rule": {"max_p99_increase_pct": d.increase_pct, "min_delta_us": d.min_delta_us},
        "changed_class": [_change_dict(c) for c in d.changed_class],
        "deltas": [_change_dict(c) for c in d.deltas],
        "new_paths": [
            {"src": p.src, "dst": p.dst, "verdict": p.verdict.value} for p in d.new_paths
        ],
        "missing_paths": [
            {"src": p.src, "dst": p.dst, "verdict": p.verdict.value} for p in d.missing_paths
        ],
    }
