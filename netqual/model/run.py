"""A run's own records: its metadata, mode, summary and interference check."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from netqual.model.path import Tier
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.verdict import Verdict

SCHEMA_VERSION = "1"  # the results file format (docs/results.md)


class Mode(str, enum.Enum):
    FULL_MESH = "full-mesh"
    BIPARTITE = "bipartite"
    SAMPLED = "sampled"


class RunKind(str, enum.Enum):
    """What a run was, recorded as it runs (results.json ``run.kind``)."""

    CLUSTER = "cluster"  # netqual run over an inventory
    LAB = "lab"  # netqual run over the inventory `netqual lab up` wrote (emulated fabric)
    DEMO = "demo"  # netqual demo: its own agents (loopback or the lab), new each time
    RETEST = "retest"  # netqual retest: an earlier run's paths again (``retest_of``)


# The kinds an inventory may state ([run] kind); demo and retest are their commands' own.
INVENTORY_KINDS = (RunKind.CLUSTER, RunKind.LAB)


@dataclass(frozen=True)
class RunMeta:
    started_at: str
    finished_at: str
    transport: str
    mode: Mode
    policy: Policy
    plan: ProbePlan
    clock: Mapping[str, object]  # time.get_clock_info("perf_counter") and the function used
    host: Mapping[str, object] = field(default_factory=dict)  # coordinator host, python, ...
    inventory: str | None = None
    # How probes were laid out in time (netqual.planning.phases.layout); empty for older files.
    schedule: Mapping[str, object] = field(default_factory=dict)
    complete: bool = True  # False: interrupted (Ctrl-C, SIGTERM) or read from results.jsonl
    pairs_planned: int | None = None  # the pairs the schedule had (None in older files)
    # per node, what the pre-flight saw of its agent: {"version", "clock_offset_s"}
    agents: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    # False: the results file recorded no probe plan (``plan`` is then the default, which
    # no output may present as what was measured)
    plan_recorded: bool = True
    kind: RunKind = RunKind.CLUSTER


@dataclass(frozen=True)
class SampledPath:
    """One path of the interference sample: as measured in the run, and again alone."""

    src: str
    dst: str
    tier: Tier
    run_p50_us: float
    run_p99_us: float
    alone_p50_us: float | None  # None when the alone re-measurement failed
    alone_p99_us: float | None
    run_verdict: Verdict
    alone_verdict: Verdict | None
    disturbed: bool  # run p99 beyond the alone p99's noise and the tolerance
    error: str | None = None

    @property
    def p50_ratio(self) -> float | None:
        return None if not self.alone_p50_us else self.run_p50_us / self.alone_p50_us

    @property
    def p99_ratio(self) -> float | None:
        return None if not self.alone_p99_us else self.run_p99_us / self.alone_p99_us


@dataclass(frozen=True)
class TierInterference:
    tier: Tier
    paths: int
    p50_ratio: float | None  # median over the tier's sampled paths, run / alone
    p99_ratio: float | None
    affected: bool


@dataclass(frozen=True)
class Interference:
    """Run vs the same paths measured alone (netqual.analysis.interference)."""

    sample: int
    p50_ratio: float | None  # median over the sample of run p50 / alone p50
    p99_ratio: float | None
    verdict_changes: int
    tolerance: float
    tiers: tuple[TierInterference, ...]
    paths: tuple[SampledPath, ...]

    @property
    def affected_tiers(self) -> tuple[Tier, ...]:
        return tuple(t.tier for t in self.tiers if t.affected)

    @property
    def exceeds(self) -> bool:
        """The run's numbers exceed the alone numbers beyond noise on at least one tier."""
        return bool(self.affected_tiers)


@dataclass(frozen=True)
class Summary:
    counts: Mapping[Verdict, int]
    worst: tuple[tuple[str, str], ...]  # (src, dst) keys, worst first
