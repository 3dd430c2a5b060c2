"""Whether two runs may be compared (``diff``, ``gate --baseline``, ``campaign add``): they
must share the transport, the ping-pong message size, the policy metric and the bulk chunk
set, else a delta or a "regression" measures the change of setup, not of the network.
pyperf's ``Benchmark.add_run`` refuses the same way. ``--allow-incomparable`` compares
them anyway, and every output of that command then says so (``note``).

A results file of an older version that recorded no plan has no known size or chunk set:
those two are not judged for it (the transport and the metric always are).
"""

from __future__ import annotations

from dataclasses import dataclass

from netqual.base.errors import IncomparableError
from netqual.base.units import format_size
from netqual.model.plan import ProbePlan
from netqual.model.run import RunMeta
from netqual.model.stats import Metric

ALLOW = "--allow-incomparable"


@dataclass(frozen=True)
class Difference:
    """One thing two runs do not share: the field's name in words, each run's value."""

    field: str  # "transport", "ping-pong size", "policy metric", "chunk set"
    new: str
    old: str

    @property
    def text(self) -> str:
        return f"{self.field} ({self.new} vs {self.old})"

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "new": self.new, "old": self.old}


@dataclass(frozen=True)
class Setup:
    """What a run must share with another to be compared with it."""

    transport: str
    metric: Metric
    size_bytes: int | None  # None: not recorded (an older file without its plan)
    chunks_bytes: tuple[int, ...] | None  # the bulk chunk sizes measured; () without bulk

    @classmethod
    def of(cls, run: RunMeta) -> Setup:
        return cls.made(run.transport, run.policy.metric, run.plan if run.plan_recorded else None)

    @classmethod
    def made(cls, transport: str, metric: Metric, plan: ProbePlan | None) -> Setup:
        """``plan`` None: not recorded."""
        return cls(
            transport=transport,
            metric=metric,
            size_bytes=None if plan is None else plan.size_bytes,
            chunks_bytes=None if plan is None else (plan.chunks_bytes if plan.bulk else ()),
        )

    def differences(self, old: Setup) -> tuple[Difference, ...]:
        """What this (the newer) run does not share with ``old``, in a fixed order."""
        out = []
        if self.transport != old.transport:
            out.append(Difference("transport", self.transport, old.transport))
        if None not in (self.size_bytes, old.size_bytes) and self.size_bytes != old.size_bytes:
            assert self.size_bytes is not None and old.size_bytes is not None
            new_size, old_size = format_size(self.size_bytes), format_size(old.size_bytes)
            out.append(Difference("ping-pong size", new_size, old_size))
        if self.metric is not old.metric:
            out.append(Difference("policy metric", self.metric.value, old.metric.value))
        known = self.chunks_bytes is not None and old.chunks_bytes is not None
        if known and set(self.chunks_bytes or ()) != set(old.chunks_bytes or ()):
            out.append(
                Difference("chunk set", _chunks(self.chunks_bytes), _chunks(old.chunks_bytes))
            )
        return tuple(out)


def _chunks(chunks: tuple[int, ...] | None) -> str:
    return ", ".join(format_size(c) for c in sorted(set(chunks or ()))) or "no bulk"


def differ_text(found: tuple[Difference, ...]) -> str:
    """'transport (tcp vs rdma), chunk set (1MiB vs 64KiB, 1MiB)'."""
    return ", ".join(d.text for d in found)


def check(
    new: Setup, old: Setup, new_source: str, old_source: str, *, allow: bool, does: str = "compares"
) -> tuple[Difference, ...]:
    """The differences of two runs; refused (exit 2, naming each field) unless ``allow``."""
    found = new.differences(old)
    if found and not allow:
        raise IncomparableError(
            new_source,
            old_source,
            f"differ in {differ_text(found)}: not comparable; {ALLOW} {does} them anyway",
        )
    return found


def note(found: tuple[Difference, ...], against: str = "the baseline") -> str:
    """What every output of a command that compared anyway says."""
    return (
        f"not comparable with {against}: differ in {differ_text(found)}; compared anyway ({ALLOW})"
    )
