"""The bend in the lab (root; docs/workload.md "The bend in the lab"): bench/ttft_bend --quick
injects 0, 400 and 800 us of round trip on lab paths to a storage host, measures them with
netqual's probe and projects the field report's workload through the one TTFT model. The
measured round trips grow with the injection, and the projected TTFT change crosses zero
between them: offload shortens TTFT on a short path and lengthens it at 800 us."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from paths import REPO

from netqual import lab

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]


def test_projected_ttft_change_crosses_zero_as_the_round_trip_grows() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ttft_bend"), "--quick", "--json"],
        capture_output=True, text=True, timeout=240, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["connector"] == "lmcache-layerwise" and doc["round_trips_per_chunk"] == 62
    assert 190 < doc["safe_line_us"] < 210 and 480 < doc["gone_line_us"] < 510
    points = doc["points"]
    assert [p["injected_us"] for p in points] == [0, 400, 800]
    rtts = [p["rtt_p50_us"] for p in points]
    # the injected round trip arrives (the lab's relay adds it, the stacks their own cost)
    assert rtts[1] >= 0.9 * 400 and rtts[2] >= 0.9 * 800 and rtts[0] < rtts[1] < rtts[2]
    changes = [p["ttft_change"] for p in points]
    assert changes[0] < -0.15, points  # a short path keeps most of the -31%
    assert changes[2] > 0, points  # past the break-even line offload loses
    assert changes == sorted(changes)
