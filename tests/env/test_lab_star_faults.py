"""Localisation in the real lab (network namespaces; needs root): the shipped star-faults
topology, five hosts on two rails with faults planted on three of them (h2's rail-1 NIC
shaped, h3's rail-0 cable lossy, h4's main interface at MTU 1,400), measured NIC to NIC
as a new user would (``netqual run --rails same``, the default interference sample).

The planted faults are named: h3's rail-0 NIC a suspect whose bad paths show loss, h4's
MTU a configuration outlier on its main interface. The healthy hosts h1 and h5 are named
nowhere: no suspect, outlier or not-measured pair names them. Runs once named them from
the relay's scheduling noise (``nic h1/...``, ``node h5``); what keeps this robust on a
loaded host is the run's own repeatability (a suspect must stand out from its peers by
more than it), not a looser assertion: the suspect's evidence must say it did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from netqual import lab
from netqual.planning.rails import split_endpoint

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

TOPOLOGY = Path(lab.default_topology_path()).parent / "star-faults.toml"
HEALTHY = {"h1", "h5"}
# 1,000 kept round trips a path, the fewest that make a p99 trustworthy (ten samples
# beyond it): a round trip that crosses the lossy cable twice loses a packet ~2% of the
# time, so the lossy paths' p99 sits on retransmission timeouts (200 ms each; they spend
# most of the run in them, and the test stays near a minute).
POLICY = """[policy]
metric = "p99"
safe_max_us = 200.0
unsafe_above_us = 500.0
min_samples = 1000
"""


def netqual(*args: str, netns: str) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", "netns", "exec", netns, sys.executable, "-m", "netqual", *args]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)


def named(doc: dict[str, Any]) -> set[str]:
    """Every host the results name as a problem: suspects (their subjects and the nodes
    their evidence points at), configuration outliers, pairs not measured."""
    out: set[str] = set()
    for s in doc.get("suspects", []):
        ev = s["evidence"]
        ends = [s["subject"]] if s["kind"] in ("node", "nic") else []
        ends += [ev[k] for k in ("src", "dst", "node") if isinstance(ev.get(k), str)]
        ends += list(ev.get("bad_nics", []))
        out |= {split_endpoint(e)[0] for e in ends}
        if s["kind"] == "asymmetry":
            out |= {
                split_endpoint(ev[d][k])[0] for d in ("forward", "reverse") for k in ("src", "dst")
            }
    out |= {o["node"] for o in doc.get("fleet", {}).get("outliers", [])}
    out |= {split_endpoint(m[k])[0] for m in doc.get("not_measured", []) for k in ("src", "dst")}
    return out


def test_planted_faults_are_named_and_healthy_hosts_nowhere(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state_dir = tmp_path / "lab"
    info = lab.up(lab.load(TOPOLOGY), state_dir)
    request.addfinalizer(lambda: lab.down(state_dir))
    inventory = str(info.inventory_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    out = tmp_path / "run"
    run = netqual(
        "run", inventory, "--rails", "same", "--out", str(out), "--iterations", "1000",
        "--warmup", "100", "--no-bulk", "--timeout", "60", "--policy", str(policy),
        netns=info.control_netns,
    )  # fmt: skip
    (tmp_path / "run.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["paths"]) == 20 and "not_measured" not in doc  # 10 host pairs x 2 rails

    # h3's lossy rail-0 NIC: a suspect, against its peers beyond the repeatability, and
    # most of its bad paths show the loss
    nics = {s["subject"]: s["evidence"] for s in doc["suspects"] if s["kind"] == "nic"}
    assert "h3/to-rail0" in nics, doc["suspects"]
    ev = nics["h3/to-rail0"]
    contrast = ev["contrast"]
    assert contrast["ratio"] is None or contrast["ratio"] > contrast["threshold"], ev
    assert contrast["threshold"] == doc["localisation"]["repeatability"]["ratio"]
    cause = ev["counters"]
    assert cause["cause"] == "loss" and 2 * cause["paths"] > cause["of"], ev

    # h4's MTU, on the interface its address uses
    outliers = [o for o in doc["fleet"]["outliers"] if o["node"] == "h4"]
    assert [(o["key"], o["value"], o.get("nic")) for o in outliers] == [
        ("mtu[main]", "1400", "to-mgmt")
    ], doc["fleet"]["outliers"]

    # the healthy hosts: named nowhere, in the results or on the terminal
    assert not named(doc) & HEALTHY, (named(doc), doc["suspects"], doc["fleet"]["outliers"])
    suspect_lines = run.stdout.split("suspects (where the problem sits", 1)[-1]
    for host in HEALTHY:
        assert f"node {host}" not in suspect_lines and f"nic {host}/" not in suspect_lines
