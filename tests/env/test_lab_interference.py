"""Lab proof of the phase-aligned schedule (root): a rate-limited spine, the unaligned
schedule against the aligned one, judged by netqual's own interference check.

The lab and the runs are bench/lab_interference.py's (docs/performance.md, "Schedules and
interference"). The machine is shared and loaded, so the comparison uses ratios (run p99
over the same path's p99 measured alone, minutes apart), medians over three interleaved
runs per schedule (one run disturbed by a neighbour's burst does not decide), and lines
well away from the measured medians (unaligned 2.2-2.8x,
aligned 0.9-1.2x on a 2-core VM at load 90-130).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
from paths import REPO

from netqual import lab
from netqual.planning.phases import Timing

sys.path.insert(0, str(REPO / "bench"))
import lab_interference as bench

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.slow,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]


def test_unaligned_schedule_inflates_cross_rack_p99_and_the_check_says_so(tmp_path: Path) -> None:
    state = tmp_path / "lab"
    outcomes = bench.experiment([Timing.UNALIGNED, Timing.ALIGNED], 3, state_dir=state)
    assert not lab.status(state).anything  # the lab is gone again
    by = {s: [o for o in outcomes if o.schedule == s.value] for s in Timing}
    unaligned = statistics.median(o.cross_p99_ratio or 0.0 for o in by[Timing.UNALIGNED])
    aligned = statistics.median(o.cross_p99_ratio or 0.0 for o in by[Timing.ALIGNED])
    detail = "\n".join(str(o) for o in outcomes)
    assert unaligned >= 1.5, detail  # cross-rack ping-pong queued behind another pair's bulk
    assert aligned <= 1.6, detail  # no bulk while ping-pong runs: as alone, within noise
    assert unaligned >= 1.3 * aligned, detail
    # the interference check itself flags the unaligned runs' cross-rack tier
    assert any("cross-rack" in o.affected for o in by[Timing.UNALIGNED]), detail
