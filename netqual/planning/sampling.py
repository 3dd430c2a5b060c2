"""Which paths the interference check measures again, alone (netqual.analysis.interference).

Planning, not analysis: the estimate needs the sample's size before anything is measured.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from netqual.models import PathResult, Tier

DEFAULT_FRACTION = 0.02
DEFAULT_MINIMUM = 8
# The share never asks for more than this many paths: each is measured alone, one after the
# other (a full ping-pong, ~1 s at the default plan). A larger --interference-sample still wins.
SHARE_CAP = 64


def sample_size(
    total: int, fraction: float = DEFAULT_FRACTION, minimum: int = DEFAULT_MINIMUM
) -> int:
    return min(total, max(minimum, min(SHARE_CAP, math.ceil(fraction * total))))


def choose_sample(
    paths: Sequence[PathResult],
    fraction: float = DEFAULT_FRACTION,
    minimum: int = DEFAULT_MINIMUM,
    seed: int | None = None,
) -> list[PathResult]:
    """A random sample of the measured paths, at least one per tier present."""
    ok = [p for p in paths if p.error is None and p.rtt is not None]
    rng = random.Random(seed)
    by_tier: dict[Tier, list[PathResult]] = {}
    for p in ok:
        by_tier.setdefault(p.tier, []).append(p)
    chosen = [rng.choice(by_tier[t]) for t in sorted(by_tier, key=lambda t: t.value)]
    taken = {p.key for p in chosen}
    rest = [p for p in ok if p.key not in taken]
    rng.shuffle(rest)
    chosen += rest[: max(0, sample_size(len(ok), fraction, minimum) - len(chosen))]
    return chosen
