"""Metrics for Prometheus: a run or a campaign as OpenMetrics gauges (``netqual export
--openmetrics``, ``netqual campaign serve``), through ``prometheus-client``.

Label values come from results files and profiles: control and bidi characters are written
as escapes (``names.visible``), as on the terminal, and a backslash as two (``label``), so
two different names never become one label value (``a`` + LF and a literal ``a\x0a``). Each
label set is written once: a campaign's gates are the latest per milestone and week.
Cardinality is bounded (docs/campaign.md): per-path series (``netqual_path_*``, labels
src, dst, src_rack, dst_rack, tier) only when the run has at most ``PER_PATH_LIMIT`` paths;
rack-pair aggregates (``netqual_rack_pair_*``) always, whose count grows with racks², not nodes².
A campaign exports its latest week (each path's last measurement that week) plus its
per-week verdict counts, milestone outcomes, open suspects and waiver expiries.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from netqual.base.names import visible
from netqual.campaign.store import WEEK_PATHS, guarded, open_store
from netqual.campaign.trend import gate_rows, suspect_ages, week_counts
from netqual.table.paths import TIERS, VERDICTS, verdict_counts
from netqual.table.run import Results

PER_PATH_LIMIT = 2_000  # paths; above it only rack-pair aggregates (a Prometheus series each)
_PATH_LABELS = ("src", "dst", "src_rack", "dst_rack", "tier")
_RACK_SQL = """
    SELECT least(src_rack, dst_rack) AS rack_a, greatest(src_rack, dst_rack) AS rack_b,
           count(*) AS paths, median(p99_us) AS p99_median, max(p99_us) AS p99_max,
           count(*) FILTER (verdict = 2) AS unsafe
    FROM paths_now GROUP BY rack_a, rack_b ORDER BY rack_a, rack_b"""


def label(text: str) -> str:
    """A label value that reads literally and stays unique: backslashes doubled, then
    anything that could act on a terminal or parser escaped (``visible``)."""
    return visible(text.replace("\\", "\\\\"))


@dataclass(frozen=True)
class GateMetric:
    name: str  # milestone or profile name
    passed: bool
    week: int | None = None


def _epoch_s(text: str) -> float | None:
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    return stamp.timestamp()


def run_columns(results: Results) -> dict[str, Any]:
    """The columns the exporter reads, from a run's ``PathTable``."""
    t = results.paths
    names = np.array(t.names, dtype=object)
    racks = {n.name: n.rack or "" for n in results.nodes}
    rack_of = np.array([racks.get(n, "") for n in t.names], dtype=object)
    return {
        "src": names[t.src], "dst": names[t.dst],
        "src_rack": rack_of[t.src], "dst_rack": rack_of[t.dst],
        "tier": np.array([x.value for x in TIERS], dtype=object)[t.tier],
        "verdict": t.verdict.astype(np.int8), "p50_us": t.rtt["p50"], "p99_us": t.rtt["p99"],
    }  # fmt: skip


def _path_families(cols: Mapping[str, Any], con: duckdb.DuckDBPyConnection) -> Iterator[Metric]:
    """Verdict counts, per-path gauges below the limit, rack-pair aggregates."""
    n = len(cols["verdict"])
    counts = verdict_counts(np.asarray(cols["verdict"], dtype=np.int64))
    fam = GaugeMetricFamily("netqual_paths", "Paths per verdict", labels=["verdict"])
    for v in VERDICTS:
        fam.add_metric([v.value], counts[v])
    yield fam
    per_path = n <= PER_PATH_LIMIT
    yield GaugeMetricFamily(
        "netqual_path_series_exported",
        f"1 when per-path series are exported (at most {PER_PATH_LIMIT} paths), else 0",
        value=1 if per_path else 0,
    )
    if per_path:
        p50 = GaugeMetricFamily("netqual_path_rtt_p50_us", "Path RTT p50 (us)", labels=_PATH_LABELS)
        p99 = GaugeMetricFamily("netqual_path_rtt_p99_us", "Path RTT p99 (us)", labels=_PATH_LABELS)
        verdict = GaugeMetricFamily(
            "netqual_path_verdict",
            "Path verdict: 0 offload-safe, 1 marginal, 2 unsafe",
            labels=_PATH_LABELS,
        )
        seen: set[tuple[str, ...]] = set()
        for i in range(n):
            labels = [label(str(cols[k][i] or "")) for k in _PATH_LABELS]
            if (key := tuple(labels)) in seen:
                continue  # one series per label set (a pair measured twice: its first row)
            seen.add(key)
            verdict.add_metric(labels, int(cols["verdict"][i]))
            if not np.isnan(cols["p99_us"][i]):
                p50.add_metric(labels, float(cols["p50_us"][i]))
                p99.add_metric(labels, float(cols["p99_us"][i]))
        yield from (p50, p99, verdict)
    con.register("paths_now", dict(cols))
    try:
        racks = con.execute(_RACK_SQL).fetchall()
    finally:
        con.unregister("paths_now")
    labels = ["src_rack", "dst_rack"]
    median = GaugeMetricFamily(
        "netqual_rack_pair_rtt_p99_median_us",
        "Median path p99 between two racks (us)",
        labels=labels,
    )
    worst = GaugeMetricFamily(
        "netqual_rack_pair_rtt_p99_max_us", "Worst path p99 between two racks (us)", labels=labels
    )
    paths = GaugeMetricFamily("netqual_rack_pair_paths", "Paths between two racks", labels=labels)
    unsafe = GaugeMetricFamily(
        "netqual_rack_pair_unsafe_paths", "Unsafe paths between two racks", labels=labels
    )
    for a, b, count, med, mx, bad in racks:
        pair = [label(a or ""), label(b or "")]
        paths.add_metric(pair, count)
        unsafe.add_metric(pair, bad)
        if med is not None:
            median.add_metric(pair, med)
            worst.add_metric(pair, mx)
    yield from (median, worst, paths, unsafe)


def _gate_family(gates: Sequence[GateMetric]) -> Iterator[Metric]:
    if not gates:
        return
    fam = GaugeMetricFamily(
        "netqual_gate_passed", "1 when the gate passed, 0 when it failed", labels=["gate", "week"]
    )
    latest: dict[tuple[str, str], GateMetric] = {}
    for g in gates:  # in the order judged: a later gate of a milestone and week wins
        latest[(label(g.name), "" if g.week is None else str(g.week))] = g
    for (name, week), g in latest.items():
        fam.add_metric([name, week], int(g.passed))
    yield fam


class RunCollector(Collector):
    def __init__(self, results: Results, gates: Sequence[GateMetric] = ()) -> None:
        self.results = results
        self.gates = tuple(gates)

    def collect(self) -> Iterator[Metric]:
        stamp = _epoch_s(self.results.run.finished_at or self.results.run.started_at)
        if stamp is not None:
            yield GaugeMetricFamily(
                "netqual_run_timestamp_seconds", "When the run finished (Unix time)", value=stamp
            )
        con = duckdb.connect()
        try:
            yield from _path_families(run_columns(self.results), con)
        finally:
            con.close()
        yield from _gate_family(self.gates)


class CampaignCollector(Collector):
    """Reads the store (read-only) whenever collected, all at once and closed before the
    first metric is handed on: the store's lock is held for that read only. A writer
    holding it makes the read wait up to ``wait_s``. ``campaign serve`` collects once per
    snapshot (campaign/serve.py)."""

    def __init__(
        self,
        store_path: Path,
        milestone_weeks: Mapping[str, int] | None = None,
        wait_s: float = 10.0,
    ) -> None:
        self.store_path = store_path
        self.milestone_weeks = dict(milestone_weeks or {})  # name -> week (campaign.toml)
        self.wait_s = wait_s

    def collect(self) -> Iterator[Metric]:
        with guarded(self.store_path):
            store = open_store(self.store_path, read_only=True, wait_s=self.wait_s)
            try:
                metrics = [*self._collect(store.con), *self._history(store)]
            finally:
                store.close()
        yield from metrics

    def _collect(self, con: duckdb.DuckDBPyConnection) -> Iterator[Metric]:
        latest = con.execute("SELECT max(week) FROM runs").fetchone()
        if latest is None or latest[0] is None:
            return
        week = int(latest[0])
        yield GaugeMetricFamily(
            "netqual_campaign_week", "The campaign week of the latest run", value=week
        )
        stamp = con.execute(
            "SELECT finished_at, started_at FROM runs ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        when = _epoch_s(stamp[0] or stamp[1]) if stamp else None
        if when is not None:
            yield GaugeMetricFamily(
                "netqual_run_timestamp_seconds",
                "When the latest run finished (Unix time)",
                value=when,
            )
        cols = con.execute(
            "SELECT src, dst, coalesce(src_rack, '') AS src_rack,"
            " coalesce(dst_rack, '') AS dst_rack, tier, verdict,"
            " coalesce(p50_us, 'NaN') AS p50_us, coalesce(p99_us, 'NaN') AS p99_us"
            f" FROM {WEEK_PATHS} WHERE week = ? ORDER BY src, dst",
            [week],
        ).fetchnumpy()
        yield from _path_families({k: np.asarray(v) for k, v in cols.items()}, con)

    def _history(self, store: Any) -> Iterator[Metric]:
        weeks = GaugeMetricFamily(
            "netqual_week_paths",
            "Paths per verdict in each campaign week",
            labels=["week", "verdict"],
        )
        for w in week_counts(store):
            for verdict, count in zip(VERDICTS, (w.safe, w.marginal, w.unsafe), strict=True):
                weeks.add_metric([str(w.week), verdict.value], count)
        yield weeks
        # never passed before its week; in the order judged, so the latest of a week wins
        judged = gate_rows(store, self.milestone_weeks)
        yield from _gate_family([GateMetric(g.milestone, g.passed, g.week) for g in judged])
        latest = max((w.week for w in week_counts(store)), default=0)
        if self.milestone_weeks:
            due = GaugeMetricFamily(
                "netqual_milestone_due",
                "1 once the campaign has a run of the milestone's week or later, else 0 (not due)",
                labels=["milestone", "week"],
            )
            for name, week in sorted(self.milestone_weeks.items(), key=lambda kv: kv[1]):
                due.add_metric([label(name), str(week)], int(latest >= week))
            yield due
        ages = suspect_ages(store)
        yield GaugeMetricFamily(
            "netqual_open_suspects",
            "Localisation suspects still open",
            value=sum(1 for s in ages if s.open),
        )
        due = GaugeMetricFamily(
            "netqual_waiver_expiry_timestamp_seconds",
            "When a milestone's waiver expires (Unix time, end of its last day)",
            labels=["milestone", "src", "dst", "owner"],
        )
        for m, src, dst, until, owner in store.con.execute(
            "SELECT milestone, src, dst, until, owner FROM waivers"
        ).fetchall():
            end = dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), dt.timezone.utc)
            due.add_metric([label(x) for x in (m, src, dst, owner)], end.timestamp())
        yield due


def openmetrics_text(collector: Collector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text: bytes = generate_latest(registry)  # type: ignore[no-untyped-call]
    return text.decode("utf-8")


def registry_of(collector: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
