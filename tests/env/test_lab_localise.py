"""Localisation outside the full mesh, in the real lab (network namespaces; needs root): the
default topology (two racks of three compute hosts, a remote storage site behind a WAN),
every host healthy, so no host may be named anywhere. docs/report.md "Suspects".

- ``--mode bipartite``: every compute -> storage path crosses the WAN and is unsafe alike;
  once every node was a suspect ("node st1: median p99 1,137 us vs 1,137 us over all
  paths") and racks r1, r2 and the remote site were to stay on local NVMe. Compute nodes
  are compared with compute nodes, storage with storage: none stands out; the report says
  the remote site is too far, as the full mesh does.
- ``netqual retest`` of a full-mesh run: once it localised on its subset of bad paths and
  named five healthy nodes ("Keep rack r1 on local NVMe", "Keep rack rs (storage) on
  local NVMe"). It localises on the run it re-tests with its re-measurements in place.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from netqual import lab
from netqual.lab.fabric import LabInfo

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

# 1,000 kept samples, the fewest that make a p99 trustworthy; the default unsafe line, the
# safe line between the lab's tiers as a loaded host reads them: same-rack p99 32-207 us,
# cross-rack 296-446, remote ~1,100 in one clean-clone CI (at 200 two same-rack paths read
# 201 and 207 us, fewer than 75% of same-rack paths were safe, and distance was not named:
# what this module judges is where the blame goes, not where a loaded host's tail sits)
POLICY = """[policy]
metric = "p99"
safe_max_us = 250.0
unsafe_above_us = 500.0
min_samples = 1000
"""
NO_NVME = "on local nvme"  # "Keep rack r1 on local NVMe", "keep r2h3 on local NVMe"


@pytest.fixture(scope="module")
def default_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LabInfo, Path]]:
    tmp = tmp_path_factory.mktemp("lab-localise")
    state = tmp / "lab"
    info = lab.up(lab.load_default(), state)
    policy = tmp / "policy.toml"
    policy.write_text(POLICY)
    try:
        yield info, policy
    finally:
        lab.down(state)


def netqual(info: LabInfo, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", "netns", "exec", info.control_netns, sys.executable, "-m", "netqual", *args]
    env = {**os.environ, "NETQUAL_WIDTH": "100"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)


def what_to_do(html: str) -> list[str]:
    """What report.html's "What to do" says: each ranked fix (its text) and each card's
    title, lower case."""
    todo = html.split('id="recommendations"')[1].split("</section>", maxsplit=1)[0]
    fixes = [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", todo)]
    cards = re.findall(r'<div class="rec [a-z]+"><b>(.*?)</b>', todo)
    return [" ".join(unescape(t).lower().split()) for t in fixes + cards]


def named_nodes(doc: dict[str, Any]) -> list[str]:
    return [f"{s['kind']} {s['subject']}" for s in doc.get("suspects", [])
            if s["kind"] in ("node", "nic", "rack-pair", "rail")]  # fmt: skip


def test_bipartite_compares_like_with_like_and_names_distance_not_nodes(
    default_lab: tuple[LabInfo, Path], tmp_path: Path
) -> None:
    info, policy = default_lab
    out = tmp_path / "bipartite"
    run = netqual(
        info, "run", str(info.inventory_path), "--mode", "bipartite", "--out", str(out),
        "--iterations", "1000", "--warmup", "100", "--no-bulk", "--policy", str(policy),
    )  # fmt: skip
    (tmp_path / "run.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["paths"]) == 12 and all(p["verdict"] == "unsafe" for p in doc["paths"])
    assert doc.get("suspects", []) == [], doc["suspects"]
    (far,) = doc["localisation"]["distance"]
    assert (far["tier"], far["bad_paths"], far["paths"], far["near_paths"]) == ("remote", 12, 12, 0)
    titles = what_to_do((out / "report.html").read_text(encoding="utf-8"))
    assert any("do not offload kv-cache to the remote site" in t for t in titles), titles
    assert not [t for t in titles if NO_NVME in t], titles
    assert "suspects (where" not in run.stdout


def test_retest_localises_on_the_original_run_with_its_remeasurements(
    default_lab: tuple[LabInfo, Path], tmp_path: Path
) -> None:
    info, policy = default_lab
    out = tmp_path / "mesh"
    run = netqual(
        info, "run", str(info.inventory_path), "--out", str(out), "--iterations", "1000",
        "--warmup", "100", "--no-bulk", "--policy", str(policy),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    base = json.loads((out / "results.json").read_text())
    assert named_nodes(base) == [], base["suspects"]
    unsafe = [p for p in base["paths"] if p["verdict"] == "unsafe"]
    assert len(unsafe) >= 12  # every path to the remote site

    again = tmp_path / "retest"
    retest = netqual(
        info, "retest", str(out), "--verdict", "unsafe", "--out", str(again),
        "--iterations", "1000",
    )  # fmt: skip
    (tmp_path / "retest.txt").write_text(retest.stdout + retest.stderr)
    assert retest.returncode == 0, retest.stdout[-3000:] + retest.stderr[-2000:]
    doc = json.loads((again / "results.json").read_text())
    loc = doc["localisation"]
    assert (loc["base"], loc["paths"], loc["retested"]) == (str(out), 28, len(unsafe))
    assert "retest" in {m["source"] for m in loc["repeatability"]["measures"]}
    assert named_nodes(doc) == [], doc["suspects"]
    assert [d["tier"] for d in loc["distance"]][-1] == "remote"
    titles = what_to_do((again / "report.html").read_text(encoding="utf-8"))
    assert any("do not offload kv-cache to the remote site" in t for t in titles), titles
    assert not [t for t in titles if NO_NVME in t], titles
