"""Which paths the interference check measures again, alone (netqual.analysis.interference).

Planning, not analysis: the estimate needs the sample's size before anything is measured.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np

from netqual.model.path import PathResult, Tier
from netqual.table.paths import TIERS, PathTable

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
    paths: PathTable | Sequence[PathResult],
    fraction: float = DEFAULT_FRACTION,
    minimum: int = DEFAULT_MINIMUM,
    seed: int | None = None,
) -> list[PathResult]:
    """A random sample of the measured paths, at least one per tier present. Picks rows of
    the table (a run's half a million paths are never all records at once); the same
    paths, in any form, give the same sample for a seed."""
    table = paths if isinstance(paths, PathTable) else PathTable.from_paths(paths)
    no_error = np.fromiter((e is None for e in table.error), np.bool_, len(table))
    ok: list[int] = np.flatnonzero(no_error & table.has_rtt).tolist()
    rng = random.Random(seed)
    by_tier: dict[Tier, list[int]] = {}
    for i, code in zip(ok, table.tier[ok].tolist(), strict=True):
        by_tier.setdefault(TIERS[code], []).append(i)
    chosen = [rng.choice(by_tier[t]) for t in sorted(by_tier, key=lambda t: t.value)]
    taken = set(chosen)
    rest = [i for i in ok if i not in taken]
    rng.shuffle(rest)
    chosen += rest[: max(0, sample_size(len(ok), fraction, minimum) - len(chosen))]
    return [table.row(i) for i in chosen]
