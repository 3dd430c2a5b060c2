"""Which offload-safe paths are unstable enough to re-test before sign-off.

pyperf's rule of thumb (``RttStats.unstable``: stdev >= 10% of the mean) is kept per path
in results.json. On its own it is a property of the host as much as of the path: on a
shared machine every path trips it, and a warning that names every path names nothing.
So a safe path is *unstable* only when it trips the rule **and** its coefficient of
variation (stdev / mean) exceeds its peers' at the same tier (the lower median over the
tier's measured paths) by more than the run's repeatability
(``localise.run_localisation``): noisier than the paths beside it, beyond what the run's
own numbers move.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from netqual.analysis import localise
from netqual.model.verdict import Verdict
from netqual.table.paths import TIERS
from netqual.table.run import Results

STDEV_SHARE = 0.1  # pyperf: stdev >= 10% of the mean


def unstable(results: Results) -> npt.NDArray[np.bool_]:
    """Per path: offload-safe, unstable by pyperf's rule and beyond its tier's peers."""
    table = results.paths
    mean, stdev = table.rtt["mean"], table.rtt["stdev"]
    with np.errstate(invalid="ignore", divide="ignore"):
        cv = np.where(table.has_rtt & (mean > 0), stdev / mean, np.nan)
        rule = (table.verdict == Verdict.SAFE.rank) & (cv >= STDEV_SHARE)
    if not rule.any():
        return np.asarray(rule, dtype=np.bool_)
    threshold = localise.run_localisation(results).repeatability.ratio
    measured = np.isfinite(cv)
    peers = localise.lower_medians(
        table.tier[measured], cv[measured], len(TIERS)
    )  # the tier's typical path
    with np.errstate(invalid="ignore"):
        beyond = cv > threshold * peers[table.tier]
    return np.asarray(rule & beyond, dtype=np.bool_)


def unstable_paths(results: Results) -> int:
    """How many offload-safe paths are unstable (``unstable``)."""
    return int(unstable(results).sum())
