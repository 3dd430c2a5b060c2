"""Lab proof of the fan-in sweep (root): a storage node behind a tbf-shaped 800 Mbit/s port
and four compute hosts in two racks, each pulling at most 480 Mbit/s, through ``netqual
run --mode bipartite --fanin 1,2,4`` as a user runs it, three times on one lab, with
iperf3 on the same links (bench/lab_fanin.py, docs/fanin.md "Lab proof").

What it holds:
- the aggregate at each level never exceeds what the shaping lets through (the readers'
  links, st1's port), and reaches at least 90% of what iperf3 (one stream per reader of
  the level, at once, on the same links) received, for the shaped st1 and the plain st2,
  in at least one of the three sweeps (a loaded host's stall lowers one sweep's; iperf3,
  the reference, can only undershoot the shaping);
- the same shaped port gives the same "safe up to" in the three sweeps: 2 (k x D / C is
  0.6, 1.2, 2.4 at 1, 2, 4 readers: the knee is 4), and st2 (no storage bottleneck) 4;
  a sweep may say less only with a level left undecided (a loaded host's stall), and at
  least one of the three says it;
- the readers share both racks' uplinks at 4, but st2 carried the same readers over the
  same uplinks without a knee: st1's verdict puts the knee on st1's own port.
Measured on the shared 2-vCPU VM at load average 12 (docs/fanin.md): ratios 0.97-1.04,
"safe up to 2" in 3 of 3 sweeps, 80 s including lab up and down.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from paths import REPO

from netqual import lab

sys.path.insert(0, str(REPO / "bench"))
import lab_fanin as bench

REASON = lab.lab_available()
# 500 chunks a reader: level 1's p99 interval reaches its 2nd-slowest chunk, level 2's
# its 6th; with 300 a loaded host's odd slow chunk at 1 or 2 readers left level 2
# "preliminary" (safe up to 1) in simulation (tests/unit/analysis/test_fanin_knee.py)
CHUNKS = 500
SWEEPS = 3
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.slow,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]


def test_aggregate_matches_iperf3_and_three_sweeps_agree_on_safe_up_to(tmp_path: Path) -> None:
    state = tmp_path / "lab"
    exp = bench.experiment(state_dir=state, chunks=CHUNKS, sweeps=SWEEPS)
    assert not lab.status(state).anything  # the lab is gone again
    detail = "\n".join(bench.summary(exp))
    print(detail)  # pytest -s shows every level's numbers
    assert bench.predicted_knee([1, 2, 4], bench.STORAGE_MBIT, bench.READER_MBIT) == 4
    # iperf3 itself sees the shaping: one reader's link, then the storage port
    iperf = exp.iperf3
    assert iperf["st1"][1] == pytest.approx(0.48, rel=0.1), detail
    assert iperf["st1"][4] == pytest.approx(0.8, rel=0.1), detail
    assert iperf["st2"][4] == pytest.approx(4 * 0.48, rel=0.1), detail
    best: dict[tuple[str, int], float] = {}  # each level's ratio to iperf3, its best sweep
    decided: dict[str, int] = {}  # sweeps that said each storage node's "safe up to"
    for doc in exp.docs:
        by = {f["storage"]: f for f in doc["fanin"]}
        shaped, plain = by["st1"], by["st2"]
        for st in (shaped, plain):
            assert [lv["readers"] for lv in st["levels"]] == [1, 2, 4], detail
            for lv in st["levels"]:
                # an undecided level is measured again (up to 3 rounds), its rounds pooled
                n = lv["readers"] * lv["rounds"]
                assert lv["chunk_us"]["samples"] == CHUNKS * n, detail
                # each rank's interval on the coordinator's clock; all read most of the level
                assert len(lv["ranks"]) == n, detail
                assert lv["all_reading_s"] >= 0.5 * lv["busy_s"], detail
                # the storage agent's own window around the level: at least every chunk
                payload_mb = n * CHUNKS * (256 << 10) / 1e6
                assert bench.storage_sent_mb(lv) >= payload_mb, detail
                # never above what the shaping lets through (tbf's bucket: a few per cent
                # over a level of ~2 s). Judged against the shaping, not iperf3, which can
                # only undershoot it: in CI its 2 streams read 0.720 Gbit/s of st1's 0.8,
                # netqual 0.794 in all three sweeps (x1.10 to iperf3, x0.99 to the port)
                ceiling = bench.ceiling_gbps(st["storage"], lv["readers"])
                assert lv["aggregate_gbps"] <= 1.05 * ceiling, (st["storage"], lv, detail)
        for storage, levels in bench.ratios(doc, iperf).items():
            for k, ratio in levels.items():
                best[storage, k] = max(best.get((storage, k), 0.0), ratio)
        # each sweep says the port's "safe up to" (2 shaped, 4 plain), or less only with a
        # level left undecided (preliminary): a stall of the loaded host widens a level's
        # interval, and the rule then claims no more than it measured (under CI's lanes one
        # sweep's 2 readers read p99 26 ms, 95% CI 9-107 ms: "safe up to 1, preliminary")
        for st, truth in ((shaped, 2), (plain, 4)):
            safe = st["safe_up_to"]
            assert safe == truth or (safe < truth and st["undecided"]), detail
            decided[st["storage"]] = decided.get(st["storage"], 0) + (safe == truth)
        assert plain["knee"] is None, detail
        # the knee at 4 is called on the intervals, or left preliminary: never past 2
        assert shaped["knee"] in (4, None), detail
        if shaped["knee"] == 4:
            assert shaped["uplinks_cleared_by"] == "st2", detail
            assert (
                "at 4 readers rack uplinks are shared (r1 (2 readers), r2 (2 readers)), but "
                "st2 was read by the same readers over the same uplinks with no knee: the "
                "knee is st1's own port"
            ) in shaped["verdict"], detail
    # ... and at it in at least one sweep: a stall of the loaded host (one process off the
    # CPU for half a second) can only lower a level's aggregate, as it did once under CI's
    # lanes (x0.82 at 1 reader in one sweep, 60 ms p99, the other two sweeps x1.03); a
    # counting defect lowers every sweep's
    assert sorted(best) == [("st1", 1), ("st1", 2), ("st1", 4), ("st2", 4)], best
    assert all(r >= 0.9 for r in best.values()), (best, detail)
    # ... and at least one sweep decided each (as for the aggregate: the best of three)
    assert decided.get("st1", 0) >= 1 and decided.get("st2", 0) >= 1, (decided, detail)
    # what a user sees, the last sweep: terminal and report say the same, with units
    doc = exp.docs[-1]
    shaped = {f["storage"]: f for f in doc["fanin"]}["st1"]
    assert "fan-in st1 (plain, 256 KiB chunks)" in exp.stdout
    assert f"st1: {shaped['verdict'][:60]}" in " ".join(exp.stdout.split())
    assert "Mbit/s" in exp.stdout and " ms" in exp.stdout
    # after the first screen's answer and "What to do" (and the matrix beside it)
    assert exp.html.index('id="recommendations"') < exp.html.index('id="fanin"')
    assert exp.html.count('class="fanin-chart"') == 2
    assert exp.html.count('class="fanin-table"') == 2
