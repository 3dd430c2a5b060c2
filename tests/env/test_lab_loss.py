"""2% loss on one lab link: the paths across it carry TCP retransmission counts and the
report attributes their tail to loss (root; real namespaces, relay, agents and run).

The kernel has no netem: the link goes through the lab's relay, which drops 2% of the
packets each way at random (``loss_percent``). docs/evidence.md "Counters".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from netqual import lab

REASON = lab.lab_available()
pytestmark = [
    pytest.mark.root,
    pytest.mark.timing,
    pytest.mark.slow,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]

LOSSY = "h3"
# Three hosts behind one router; only h3's cable loses packets.
TOPOLOGY = f"""
[lab]
name = "loss"
control = "r0"
[[router]]
name = "r0"
[[host]]
name = "h1"
rack = "r0"
[[host]]
name = "h2"
rack = "r0"
[[host]]
name = "{LOSSY}"
rack = "r0"
[[link]]
a = "h1"
b = "r0"
[[link]]
a = "h2"
b = "r0"
[[link]]
a = "{LOSSY}"
b = "r0"
loss_percent = 2
"""


@pytest.fixture(scope="module")
def lossy_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """One run over the lossy lab: (its output directory, its terminal output)."""
    tmp = tmp_path_factory.mktemp("lab-loss")
    topo = tmp / "loss.toml"
    topo.write_text(TOPOLOGY)
    state = tmp / "lab"
    try:
        info = lab.up(lab.load(topo), state)
        out = tmp / "out"
        done = subprocess.run(
            ["ip", "netns", "exec", info.control_netns, sys.executable, "-m", "netqual", "run",
             str(info.inventory_path), "--out", str(out), "--iterations", "500",
             "--warmup", "100", "--no-bulk", "--allow-short-plan", "--timeout", "60",
             # each lost packet costs a 200 ms retransmission timeout: re-measuring the
             # paths alone would double the test's 40 s, and it checks no interference
             "--interference-sample", "0"],
            capture_output=True, text=True, timeout=600, check=False,
            env={"NETQUAL_WIDTH": "100", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        yield out, done.stdout
    finally:
        lab.down(state)


def test_paths_across_the_lossy_link_carry_retransmissions(lossy_run: tuple[Path, str]) -> None:
    out, _ = lossy_run
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["paths"]) == 3  # full mesh: one direction per pair
    for p in doc["paths"]:
        c = p["details"]["counters"]
        retrans = c["src"]["tcp_retrans"] + c["dst"]["tcp_retrans"]
        if LOSSY in (p["src"], p["dst"]):
            # 600 round trips at 2% each way: about 24 packets lost, each a 200 ms
            # retransmission timeout (1,100 lost 45-56 and spent ~18 s of the test in them)
            assert retrans >= 5, (p["src"], p["dst"], c)
            assert p["verdict"] != "offload-safe", p
        carried = p["details"]["carried_by"]
        # The probe's bytes leave through each host's cable to r0 (lab interface names).
        assert carried["src"] is not None and carried["dst"] is not None, carried
        assert carried["problem"] is None


def test_the_report_and_terminal_attribute_the_tail_to_loss(lossy_run: tuple[Path, str]) -> None:
    out, terminal = lossy_run
    doc = json.loads((out / "results.json").read_text())
    lossy = {(p["src"], p["dst"]) for p in doc["paths"] if LOSSY in (p["src"], p["dst"])}
    html = (out / "report.html").read_text(encoding="utf-8")
    # "What to do" (the decision's fixes, each once): the lossy node, by its loss
    text = " ".join(re.sub(r"<[^>]+>", " ", html.split("<body", 1)[1]).split())
    head = f"{LOSSY} (loss, {len(lossy)} paths) : {len(lossy)} of its paths lose packets (e.g. "
    assert head in text, text[:3000]
    item = text.split(head, 1)[1].split(" then re-test", 1)[0]
    assert any(f"{src} -&gt; {dst}:" in item for src, dst in lossy), item
    assert "TCP retransmissions" in item and "h1 -&gt; h2" not in item, item
    # The suspect (h3, whose every path fails) says what its counters saw.
    suspects = [s for s in doc["suspects"] if s["subject"] == LOSSY]
    assert suspects and suspects[0]["evidence"]["counters"]["cause"] == "loss", doc["suspects"]
    assert f"node {LOSSY}:" in terminal and "counters: loss (" in terminal, terminal
