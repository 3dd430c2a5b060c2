"""RTT percentiles (the Metric registry), their confidence intervals, and bulk statistics."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass


class Metric(str, enum.Enum):
    """An RTT percentile: the statistic a policy judges and paths are ranked by.

    The one registry of percentiles: its quantile (what stats computes), its RttStats field
    (``p99`` -> ``p99_us``), and its name in files and options (the value)."""

    P50 = "p50"
    P90 = "p90"
    P99 = "p99"
    P999 = "p999"

    @property
    def quantile(self) -> float:
        return _QUANTILE[self]

    @property
    def field(self) -> str:
        """The RttStats attribute holding this percentile."""
        return RTT_FIELDS[self.value]


_QUANTILE = {Metric.P50: 0.50, Metric.P90: 0.90, Metric.P99: 0.99, Metric.P999: 0.999}


# Every RTT statistic a path carries, in the order tables, exports and the results file use,
# and the RttStats attribute (and PathTable column, CSV header) holding each.
RTT_STATISTICS = ("min", "p50", "p90", "p99", "p999", "max", "mean", "stdev")
RTT_FIELDS: Mapping[str, str] = {name: f"{name}_us" for name in RTT_STATISTICS}


@dataclass(frozen=True)
class Ci95:
    """The distribution-free 95% confidence interval (low_us, high_us) of each percentile,
    one field per ``Metric`` (named by its value). None where it was not computed: files of
    older versions kept only the policy metric's interval."""

    p50: tuple[float, float] | None = None
    p90: tuple[float, float] | None = None
    p99: tuple[float, float] | None = None
    p999: tuple[float, float] | None = None

    def of(self, metric: Metric) -> tuple[float, float] | None:
        got: tuple[float, float] | None = getattr(self, metric.value)
        return got


NO_CI95 = Ci95()


@dataclass(frozen=True)
class RttStats:
    """Small-message round trip statistics, microseconds, full RTT at the initiator."""

    samples: int
    min_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    p999_us: float
    max_us: float
    mean_us: float
    stdev_us: float  # population standard deviation (ddof=0) of the kept samples
    untrusted: tuple[str, ...] = ()  # e.g. ("p999",) when n < 10,000
    # Distribution-free 95% confidence interval of every percentile (netqual.analysis.stats)
    ci95: Ci95 = NO_CI95
    # Compact distribution for plots: log-spaced bin edges (len = len(counts) + 1)
    histogram_edges_us: tuple[float, ...] = ()
    histogram_counts: tuple[int, ...] = ()

    def value(self, metric: Metric) -> float:
        value: float = getattr(self, metric.field)
        return value

    def statistic(self, name: str) -> float:
        """One of RTT_STATISTICS by name ("p99", "stdev", ...), in microseconds."""
        value: float = getattr(self, RTT_FIELDS[name])
        return value

    @property
    def histogram_bins(self) -> tuple[float, float] | None:
        """(first_bin, bins_per_decade) of the log-spaced histogram; None without one."""
        edges = self.histogram_edges_us
        if len(edges) < 2:
            return None
        per_decade = round(1 / math.log10(edges[1] / edges[0]))
        return (float(round(math.log10(edges[0]) * per_decade)), float(per_decade))

    def summary_values(self) -> tuple[float, ...]:
        """samples, then RTT_STATISTICS: the order tables and exports use."""
        return (self.samples, *(self.statistic(n) for n in RTT_STATISTICS))

    @property
    def unstable(self) -> bool:
        """pyperf's rule of thumb: stdev >= 10% of the mean."""
        return self.mean_us > 0 and self.stdev_us >= 0.1 * self.mean_us


@dataclass(frozen=True)
class BulkStats:
    """Bulk read of chunk_bytes with depth requests outstanding."""

    chunk_bytes: int
    depth: int
    reads: int
    goodput_gbps: float  # payload bits / wall time of the whole cell, 10^9 bit/s
    completion_p50_us: float  # request posted -> last byte of that chunk received
    completion_p99_us: float
    completion_max_us: float
    error: str | None = None
