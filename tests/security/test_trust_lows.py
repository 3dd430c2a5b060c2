"""Round three's lows (issue 38, item 8), each as a user meets it: a hostile run.json
identity under --resume, control characters in a campaign name, an emoji rack from
``inventory from-hosts``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import tomllib
from cli_helpers import Run, run_in_process
from peers import write_inventory

from netqual.base.auth import write_token


@pytest.fixture
def netqual(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Run]:
    """A command through the CLI's entry point in this process (exit code, stdout, stderr):
    each case is a file the command reads, not a process start; an uncaught error would
    fail the test here rather than print a traceback."""

    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


HOSTILE_IDENTITIES = {
    "nodes a string": {"nodes": "gpu01"},
    "a node without a name": {"nodes": [1, {"name": ["x"]}]},
    "policy a list": {"nodes": [], "policy": ["p"], "plan": "x"},
}


@pytest.mark.parametrize("how", list(HOSTILE_IDENTITIES))
def test_resume_reads_a_hostile_identity_without_a_traceback(
    tmp_path: Path, how: str, netqual: Callable[..., Run]
) -> None:
    inventory = tmp_path / "inventory.toml"
    token = tmp_path / "token"
    write_token(token)
    write_inventory(inventory, [("gpu01", 1), ("gpu02", 2)], token)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("")
    ident = {"started_at": "", "fingerprint": "x", "identity": HOSTILE_IDENTITIES[how]}
    (out / "run.json").write_text(json.dumps(ident))
    r = netqual("run", str(inventory), "--out", "out", "--resume", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "different run" in r.stderr, r.stderr


@pytest.mark.parametrize("name", ["two\nlines", "esc\x1b[31mred", "tab\there"])
def test_campaign_init_with_control_characters_in_the_name_is_readable(
    tmp_path: Path, name: str, netqual: Callable[..., Run]
) -> None:
    r = netqual("campaign", "init", "c", "--name", name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads((tmp_path / "c" / "campaign.toml").read_text())
    assert doc["campaign"]["name"] == name
    r = netqual("campaign", "report", "c", cwd=tmp_path)
    assert "Traceback" not in r.stderr and "TOML" not in r.stderr, r.stderr
    assert "no history store here yet" in r.stderr  # read the file, then found no store
    assert "\x1b" not in r.stdout + r.stderr


def test_inventory_from_hosts_writes_an_emoji_rack_its_reader_accepts(
    tmp_path: Path, netqual: Callable[..., Run]
) -> None:
    (tmp_path / "hosts.txt").write_text(
        "198.18.0.1 rack=\U0001f600\n198.18.0.2 rack=\U0001f600\n", encoding="utf-8"
    )
    r = netqual("inventory", "from-hosts", "hosts.txt", "--out", "inv.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "inv.toml").read_text(encoding="utf-8")
    assert "\\ud83d" not in text and '"\U0001f600"' in text
    r = netqual("run", "inv.toml", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_host_path_findings_are_linear_in_the_affinity_rows() -> None:
    """128 GPUs x 128 NICs with every pair's class (16,384 rows, within the caps an agent's
    reply may fill): the findings take a lookup per pair, not a scan of every row (that
    was ~10^8 comparisons here, 69.6 s for the issue's 256 x 256 x 14,400)."""
    import time

    from netqual.analysis.hostpath import findings
    from netqual.model.hostpath import Affinity, HostAudit, HostDevice

    gpus = tuple(HostDevice(f"gpu{i}", f"0000:{i:02x}:00.0") for i in range(128))
    nics = tuple(HostDevice(f"nic{i}", f"0001:{i:02x}:00.0") for i in range(128))
    rows = tuple(Affinity(g.name, n.name, "SYS") for g in gpus for n in nics)
    audit = HostAudit("h", gpus, nics, rows)
    t0 = time.process_time()
    found = findings(audit)
    assert time.process_time() - t0 < 5.0  # ~0.05 s; the scan took minutes of CPU
    assert sum(f.rule == "nic_affinity" for f in found) == 128
    assert audit.cls("gpu3", "nic7") == "SYS" and audit.cls("gpu3", "nope") == "unknown"
