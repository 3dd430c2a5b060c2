"""Statistics over raw samples. Every metric is defined exactly here.

- Percentiles: numpy's default (linear interpolation between closest ranks, Hyndman &
  Fan type 7) over the kept samples.
- A percentile q is *trusted* when at least 10 samples lie beyond it: n * (1 - q) >= 10.
  So p50 needs 20 samples, p90 100, p99 1,000 and p99.9 10,000 (see docs/results.md).
- stdev is the population standard deviation (ddof=0) of the kept samples.
- The histogram uses one fixed log grid for every path: 10 bins per decade of microseconds.
- A median is ``statistics.median``'s: the middle value, or the mean of the two middle
  ones (``median``); a lower median is the middle value, or the lower of the two
  (``lower_median``: more than half of the values are at least this large).
- ci95 is the distribution-free (order-statistic) 95% confidence interval of a quantile,
  from the normal approximation of the binomial: ranks n*q -/+ 1.96*sqrt(n*q*(1-q)),
  clamped to the samples (so the interval of a percentile with too few samples beyond it
  ends at the maximum). Every percentile of ``Metric`` gets one, whatever the policy judges:
  rules that judge p99 (the interference check) need p99's under a p50 policy too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.ma  # see below
import numpy.typing as npt

from netqual.model.path import RawBulk
from netqual.model.stats import BulkStats, Ci95, Metric, RttStats

# numpy.ma is loaded on its first use (np.percentile and np.unique read np.ma). The run's
# probe threads reduce samples here at once, and two threads' first use of it recursed in
# numpy's lazy loader until the recursion limit (a clean-clone CI, `netqual run` exit 1):
# it is imported above, with this module, under the import lock.

TAIL_SAMPLES_NEEDED = 10
BINS_PER_DECADE = 10
MIN_BIN_US = 1e-3
_Z95 = 1.959963984540054
_PERCENTS = [m.quantile * 100.0 for m in Metric]


def median(values: Iterable[float | None] | npt.NDArray[np.float64]) -> float | None:
    """The middle value, or the mean of the two middle ones (``statistics.median``), of the
    values there are (None: not measured, left out); None when there is none. The one
    median of single values (a tier's, a sample's ratios, a histogram row's)."""
    if isinstance(values, np.ndarray):
        v = np.sort(values.astype(np.float64, copy=False))
    else:
        v = np.sort(np.array([x for x in values if x is not None], dtype=np.float64))
    n = len(v)
    if not n:
        return None
    return float(v[n // 2]) if n % 2 else float((v[n // 2 - 1] + v[n // 2]) / 2)


def lower_median(values: npt.NDArray[np.float64]) -> float:
    """The lower median of the finite values (NaN when there is none)."""
    v = np.sort(values[np.isfinite(values)])
    return float(v[(len(v) - 1) // 2]) if len(v) else float("nan")


def needed_samples(q: float) -> int:
    """Smallest n with n * (1 - q) >= TAIL_SAMPLES_NEEDED."""
    return math.ceil(TAIL_SAMPLES_NEEDED / (1.0 - q) - 1e-9)


def quantile_ci(sorted_us: npt.NDArray[np.float64], q: float) -> tuple[float, float]:
    n = len(sorted_us)
    half = _Z95 * math.sqrt(n * q * (1.0 - q))
    lo = max(0, math.floor(n * q - half) - 1)
    hi = min(n - 1, math.ceil(n * q + half) - 1)
    return float(sorted_us[lo]), float(sorted_us[hi])


def bin_index(value_us: float) -> int:
    """Index of the fixed log grid bin holding value_us (bin i: [10^(i/B), 10^((i+1)/B)))."""
    return math.floor(BINS_PER_DECADE * math.log10(max(value_us, MIN_BIN_US)) + 1e-9)


def bin_edges(first_bin: int, bins: int) -> tuple[float, ...]:
    return tuple(10 ** ((first_bin + k) / BINS_PER_DECADE) for k in range(bins + 1))


def log_histogram(sorted_us: npt.NDArray[np.float64]) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Counts on a fixed log grid (BINS_PER_DECADE per decade), from the bin of the minimum
    to the bin of the maximum. One grid for every path, so histograms compare and merge,
    and the results file needs to store only the first bin index and the counts."""
    first, last = bin_index(float(sorted_us[0])), bin_index(float(sorted_us[-1]))
    edges = bin_edges(first, last - first + 1)
    idx = np.floor(BINS_PER_DECADE * np.log10(np.maximum(sorted_us, MIN_BIN_US)) + 1e-9)
    counts = np.bincount((idx - first).astype(np.int64), minlength=last - first + 1)
    return edges, tuple(counts.tolist())


def ci95_all(sorted_us: npt.NDArray[np.float64]) -> Ci95:
    """The 95% CI of every percentile of ``Metric`` (``quantile_ci``) over sorted samples."""
    return Ci95(**{m.value: quantile_ci(sorted_us, m.quantile) for m in Metric})


def rtt_stats(rtt_ns: npt.NDArray[np.int64]) -> RttStats:
    """Reduce kept RTT samples (ns, warm-up already dropped) to RttStats in microseconds."""
    if len(rtt_ns) == 0:
        raise ValueError("no samples")
    # Reduce in nanoseconds and convert once, so min <= mean <= max holds exactly.
    sorted_ns = np.sort(np.asarray(rtt_ns, dtype=np.float64))
    n = len(sorted_ns)
    # One call for every percentile (one pass of numpy's set-up instead of four: this runs
    # once per probe, half a million times in a 1,024-node run); same values as one by one.
    values = np.percentile(sorted_ns, _PERCENTS).tolist()
    pct = {m: v / 1000.0 for m, v in zip(Metric, values, strict=True)}
    untrusted = tuple(m.value for m in Metric if n < needed_samples(m.quantile))
    mean_ns = min(max(float(sorted_ns.mean()), sorted_ns[0]), sorted_ns[-1])
    us = sorted_ns / 1000.0
    edges, counts = log_histogram(us)
    return RttStats(
        samples=n,
        min_us=float(sorted_ns[0]) / 1000.0,
        p50_us=pct[Metric.P50],
        p90_us=pct[Metric.P90],
        p99_us=pct[Metric.P99],
        p999_us=pct[Metric.P999],
        max_us=float(sorted_ns[-1]) / 1000.0,
        mean_us=float(mean_ns) / 1000.0,
        stdev_us=float(sorted_ns.std()) / 1000.0,
        untrusted=untrusted,
        ci95=ci95_all(us),
        histogram_edges_us=edges,
        histogram_counts=counts,
    )


def bulk_stats(raw: RawBulk) -> BulkStats:
    """Goodput is payload bits over the wall time of the whole cell (first post to last byte)."""
    reads = len(raw.completion_ns)
    if reads == 0 or raw.elapsed_ns <= 0:
        return BulkStats(
            raw.chunk_bytes,
            raw.depth,
            reads,
            0.0,
            0.0,
            0.0,
            0.0,
            error=raw.error or "no completed reads",
        )
    us = np.asarray(raw.completion_ns, dtype=np.float64) / 1000.0
    p50, p99 = np.percentile(us, [50.0, 99.0]).tolist()
    return BulkStats(
        chunk_bytes=raw.chunk_bytes,
        depth=raw.depth,
        reads=reads,
        goodput_gbps=raw.chunk_bytes * reads * 8 / raw.elapsed_ns,
        completion_p50_us=p50,
        completion_p99_us=p99,
        completion_max_us=float(us.max()),
        error=raw.error,
    )
