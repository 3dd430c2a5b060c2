"""Lab proof of the fan-in sweep (root): a storage node behind a tbf-shaped 1 Gbit/s link
and eight compute hosts each pulling at most 333 Mbit/s, through ``netqual run --mode
bipartite --fanin 1,2,4,8`` as a user runs it (bench/lab_fanin.py, docs/fanin.md).

Prediction: the knee is the first level with k x 333 / 1000 > fanin_knee_factor (2.0),
i.e. past k* = 6 readers: level 8 of 1,2,4,8 (k*D/C 0.33, 0.67, 1.33, 2.67). Tolerance:
the knee is the level right after k* and no other; the level before it stays below the
factor. The storage link runs full at 4 readers (aggregate within 15% of 1 Gbit/s). If the
shaped queue dropped segments at 4 readers (a loaded host), a knee at 4 is allowed when the
verdict names the loss, and the aggregate there only has to stay within 0.6-1.15x. The
same sweep against a storage node behind a plain veth: no knee. Measured on the shared
2-vCPU VM at load 22-27 (docs/fanin.md): st1 p99 x1.00, 0.99, 1.71, 36.5 (TCP
retransmission timeouts once the shaped queue overflows at 8), st2 x0.67-1.00.
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
# p99 from 1,000 chunks a level at least (below that the verdict itself says
# "preliminary"): with bench/lab_fanin.py's 300, one reader's p99 is the 3rd-slowest chunk,
# and on a loaded host it ranged 6.5-15.5 ms between runs, so the 2x factor fell anywhere
CHUNKS = 1000
pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]


def test_knee_lands_where_capacity_over_demand_says_and_not_without_the_bottleneck(
    tmp_path: Path,
) -> None:
    state = tmp_path / "lab"
    doc, stdout, html = bench.experiment("1,2,4,8", state_dir=state, chunks=CHUNKS)
    assert not lab.status(state).anything  # the lab is gone again
    by = {f["storage"]: f for f in doc["fanin"]}
    detail = "\n".join(bench.summary(doc))
    shaped, plain = by["st1"], by["st2"]
    assert [lv["readers"] for lv in shaped["levels"]] == [1, 2, 4, 8], detail
    assert all(lv["chunk_us"]["samples"] == CHUNKS * lv["readers"] for lv in shaped["levels"])
    predicted = bench.predicted_knee([1, 2, 4, 8], bench.STORAGE_MBIT, bench.READER_MBIT)
    assert predicted == 8
    capacity = bench.STORAGE_MBIT / 1000
    four, eight = shaped["levels"][2], shaped["levels"][3]
    p99 = [lv["chunk_us"]["p99"] for lv in shaped["levels"]]
    assert 2.0 * p99[0] < p99[3], detail  # 8 readers always cross the factor
    if four["storage_tcp_retrans"] == 0:
        # rises with k, crosses at the knee only
        assert shaped["knee"] == predicted and shaped["safe_up_to"] == 4, detail
        assert p99[2] < 2.0 * p99[0], detail
        # 4 readers want 1.33x the link: it runs full
        assert four["aggregate_gbps"] == pytest.approx(capacity, rel=0.15), detail
    else:
        # The senders find the link's rate by filling its 5 ms queue. On a loaded host the
        # queue dropped a burst at 4 readers already; the senders backed off (CI: 0.83 of
        # capacity, 146 segments retransmitted) and, beside a busy core, the level's p99
        # reached 2.06x one reader's once (4 retransmitted). A knee there is the loss's,
        # and the verdict must say so; before the link is oversubscribed (2 readers want
        # 0.67 of it) there is never one
        assert shaped["knee"] in (4, predicted), detail
        assert shaped["safe_up_to"] == {4: 2, 8: 4}[shaped["knee"]], detail
        if shaped["knee"] == 4:
            assert (
                f"retransmitted {four['storage_tcp_retrans']} TCP segments at 4"
                in (shaped["verdict"])
            ), detail
        assert 0.6 * capacity <= four["aggregate_gbps"] <= 1.15 * capacity, detail
    # at 8 the queue overflows and TCP waits out retransmission timeouts, idling the link
    # part of the time (never above capacity)
    assert 0.6 * capacity <= eight["aggregate_gbps"] <= 1.05 * capacity, detail
    # behind a plain veth there is no bottleneck: every level's chunk p50 is one reader's
    # and the aggregate grows with the readers
    base = plain["levels"][0]
    for lv in plain["levels"]:
        assert lv["chunk_us"]["p50"] <= 1.1 * base["chunk_us"]["p50"], detail
        assert lv["aggregate_gbps"] >= 0.8 * lv["readers"] * base["aggregate_gbps"], detail
    # ... so no knee, unless a level lost packets (a reader's shaped link dropped a burst:
    # CI once saw 12 retransmitted segments at 4 readers move that level's p99 to 2.1x,
    # with 8 readers back at 1.16x), and then the verdict names the loss at that level
    if plain["knee"] is None:
        assert plain["safe_up_to"] == 8, detail
    else:
        (at,) = [lv for lv in plain["levels"] if lv["readers"] == plain["knee"]]
        assert at["storage_tcp_retrans"] > 0, detail
        assert (
            f"retransmitted {at['storage_tcp_retrans']} TCP segments at {plain['knee']}"
            in (plain["verdict"])
        ), detail
    # the agents count retransmissions per level (loss at 8 readers comes and goes between
    # runs: 36x with retransmission timeouts once, 3.8x with none another time)
    assert all(isinstance(lv.get("storage_tcp_retrans"), int) for lv in shaped["levels"])
    # the storage agent's own window around each level: its NIC sent at least every chunk
    for st in (shaped, plain):
        for lv in st["levels"]:
            payload_mb = lv["readers"] * CHUNKS * (256 << 10) / 1e6
            assert bench.storage_sent_mb(lv) >= payload_mb, detail
    safe = f"safe up to {shaped['safe_up_to']} concurrent readers (knee at {shaped['knee']}"
    assert f"fan-in st1 (plain, 256KiB chunks): {safe}" in stdout
    # the report: both storage nodes' verdicts and chunk curves on the first screen
    assert html.index('id="fanin"') < html.index('id="heatmap"')
    assert f"st1: {safe}" in html
    assert "st2: safe up to 8 concurrent readers (no knee" in html or plain["knee"] is not None
    assert html.count('class="fanin-chart"') == 2
