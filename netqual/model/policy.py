"""The RTT policy's lines and waivers."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from netqual.base.choices import choices_text
from netqual.model.path import path_label
from netqual.model.plan import FieldError, PlanFieldError, check_int
from netqual.model.stats import Metric


class PolicyFieldError(FieldError):
    """A Policy field out of its range, or thresholds in the wrong order."""


def _check_policy_int(field: str, value: object) -> None:
    try:
        check_int(field, value, 1, 10**12)
    except PlanFieldError as err:
        raise PolicyFieldError(err.field, err.problem) from None


@dataclass(frozen=True)
class Policy:
    """How paths are judged. Validated on construction (PolicyFieldError naming the field),
    wherever it comes from: a policy file, a results file, the defaults."""

    metric: Metric = Metric.P99
    safe_max_us: float = 200.0
    unsafe_above_us: float = 500.0
    min_samples: int = 10_000
    # --fanin: the knee is the first level whose chunk p99 exceeds level 1's by more
    # than this factor (docs/fanin.md)
    fanin_knee_factor: float = 2.0
    # Loss that makes a path unsafe (docs/policy.md "Loss"): retransmitted segments, RDMA
    # retries / NAKs / sequence errors, per 100 packets sent. RoCE is built for no loss at
    # all; 0.1% is well above what a healthy host's own tail-loss probes retransmit (0.03%
    # on a loaded loopback) and a fifth of the 0.5% that took a field path out.
    max_loss_pct: float = 0.1
    # --engine: a fetch engine whose completion p50 is more than this many times netqual's
    # own bulk cell's (same path, chunk, depth) is a finding (docs/engines.md: a healthy
    # engine on the transport the probe measured costs 1-2x the probe; 3x means it took
    # another transport or NIC, or split the chunk)
    max_engine_vs_probe: float = 3.0

    def __post_init__(self) -> None:
        if not isinstance(self.metric, Metric):
            raise PolicyFieldError(
                "metric", f"must be one of {choices_text(Metric)}, got {self.metric!r}"
            )
        for name in ("safe_max_us", "unsafe_above_us"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PolicyFieldError(name, f"must be a number, got {type(value).__name__}")
            if not 0 < value < math.inf:
                raise PolicyFieldError(name, f"must be a positive finite number, got {value}")
        if self.unsafe_above_us < self.safe_max_us:
            raise PolicyFieldError(
                "unsafe_above_us",
                f"must be >= safe_max_us ({self.safe_max_us:g}), got {self.unsafe_above_us:g}",
            )
        _check_policy_int("min_samples", self.min_samples)
        loss = self.max_loss_pct
        if isinstance(loss, bool) or not isinstance(loss, (int, float)) or not 0 <= loss <= 100:
            raise PolicyFieldError("max_loss_pct", f"must be a number from 0 to 100, got {loss!r}")
        k = self.fanin_knee_factor
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not 1 < k < math.inf:
            raise PolicyFieldError("fanin_knee_factor", f"must be a number > 1, got {k!r}")
        r = self.max_engine_vs_probe
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 1 <= r < math.inf:
            raise PolicyFieldError("max_engine_vs_probe", f"must be a number >= 1, got {r!r}")


@dataclass(frozen=True)
class Waiver:
    """A known-bad path accepted until a date (inclusive), with a reason and an owner.

    The gate decides what a waiver excuses; the report only shows them."""

    src: str
    dst: str
    until: dt.date
    reason: str
    owner: str

    def covers(self, key: tuple[str, str]) -> bool:
        return key in ((self.src, self.dst), (self.dst, self.src))

    def expired(self, today: dt.date) -> bool:
        return today > self.until

    @property
    def label(self) -> str:
        return f"{path_label(self.src, self.dst)}"
