"""A run's paths read back from the history store as a ``PathTable`` (``stored_paths``):
the gate's baseline rules compare with the baseline run as the store keeps it, so a
milestone gate reads one half-million-path results file, not two."""

from __future__ import annotations

import numpy as np

from netqual.campaign.store import Store
from netqual.model.stats import RTT_STATISTICS, Metric
from netqual.table.columns import DetailsColumn
from netqual.table.paths import NO_HOPS, TIERS, BulkColumns, PathTable


def stored_paths(store: Store, seq: int) -> PathTable:
    """Run ``seq``'s paths back as a ``PathTable`` of the columns the store keeps: names,
    tier, verdict, samples, p50/p99/p999 (other statistics NaN, no histogram, no bulk
    cell, no reasons; an error is only known to have happened). Enough for the gate's
    baseline rules, without reading that run's results file again."""
    names = [
        n for (n,) in store.con.execute(
            "SELECT DISTINCT name FROM (SELECT src AS name FROM paths WHERE seq = $seq"
            " UNION SELECT dst FROM paths WHERE seq = $seq) ORDER BY name",
            {"seq": seq},
        ).fetchall()
    ]  # fmt: skip
    store.con.register(
        "_names", {"code": np.arange(len(names)), "name": np.array(names, dtype=object)}
    )
    store.con.register(
        "_tiers",
        {
            "code": np.arange(len(TIERS)),
            "name": np.array([t.value for t in TIERS], dtype=object),
        },
    )
    try:
        cols = store.con.execute(
            "SELECT ns.code AS s, nd.code AS d, tr.code AS tier, p.verdict, p.samples,"
            " coalesce(p.p50_us, 'NaN') AS p50, coalesce(p.p99_us, 'NaN') AS p99,"
            " coalesce(p.p999_us, 'NaN') AS p999, p.error"
            " FROM paths p JOIN _names ns ON ns.name = p.src JOIN _names nd ON nd.name = p.dst"
            " JOIN _tiers tr ON tr.name = p.tier WHERE p.seq = ? ORDER BY ns.code, nd.code",
            [seq],
        ).fetchnumpy()
    finally:
        store.con.unregister("_names")
        store.con.unregister("_tiers")
    n = len(cols["s"])
    nan = np.full(n, np.nan)
    rtt = {name: nan for name in RTT_STATISTICS}
    rtt |= {"p50": np.asarray(cols["p50"], float), "p99": np.asarray(cols["p99"], float),
            "p999": np.asarray(cols["p999"], float)}  # fmt: skip
    none: tuple[None, ...] = (None,) * n
    empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
    return PathTable(
        names=tuple(names),
        src=np.asarray(cols["s"], dtype=np.int64),
        dst=np.asarray(cols["d"], dtype=np.int64),
        transports=("stored",),
        transport=np.zeros(n, dtype=np.int64),
        verdict=np.asarray(cols["verdict"], dtype=np.int64),
        tier=np.asarray(cols["tier"], dtype=np.int64),
        hops=np.full(n, NO_HOPS, dtype=np.int64),
        reasons=((),) * n,
        error=tuple("error" if e else None for e in np.asarray(cols["error"]).tolist()),
        has_rtt=~np.isnan(rtt["p99"]),
        samples=np.asarray(cols["samples"], dtype=np.int64),
        rtt=rtt,
        untrusted=((),) * n,
        ci95_low_us=dict.fromkeys(Metric, nan),
        ci95_high_us=dict.fromkeys(Metric, nan),
        hist_first_bin=nan,
        hist_bins_per_decade=nan,
        hist_offsets=np.zeros(n + 1, dtype=np.int64),
        hist_counts=empty_i,
        bulk=BulkColumns(
            offsets=np.zeros(n + 1, dtype=np.int64),
            chunk_bytes=empty_i,
            depth=empty_i,
            reads=empty_i,
            goodput_gbps=empty_f,
            p50_us=empty_f,
            p99_us=empty_f,
            max_us=empty_f,
            error=(),
        ),
        started_at=none,
        duration_s=nan,
        details=DetailsColumn((None,) * n),
        workload=None,
    )
