"""README's "Qualifying a real cluster" runs as written: the script between its markers,
pasted into bash on this machine (four agents on 127.0.0.1), must produce every file it
promises and no error. The agents' fixed ports (18515-18518) are the README's own."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ROOT

START, END = "<!-- qualify-script:start -->", "<!-- qualify-script:end -->"


def readme_script() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index(START) + len(START) : text.index(END)].strip()
    assert block.startswith("```sh\n") and block.endswith("\n```"), block[:40]
    return block.removeprefix("```sh\n").removesuffix("\n```") + "\n"


ACTIVATE = "source .venv/bin/activate"  # the README's line between ./setup.sh and the script
# What a new user's shell has: the system's PATH, no venv, no netqual.
FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def fresh_env(home: Path) -> dict[str, str]:
    """A new login's environment (issue 36: the test used to put the venv on PATH itself,
    and pasted after ./setup.sh the script printed `netqual: command not found`). Only
    PYTHONPATH points the venv's netqual at this checkout, and the width is pinned."""
    return {
        "PATH": FRESH_PATH, "HOME": str(home), "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT), "NETQUAL_WIDTH": "100",
    }  # fmt: skip


def test_without_the_readmes_activation_netqual_is_not_found(tmp_path: Path) -> None:
    """The fresh environment really lacks netqual: the activation line is what adds it."""
    r = subprocess.run(
        ["bash", "-c", "command -v netqual || echo missing"],
        env=fresh_env(tmp_path), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.stdout.strip() == "missing", r.stdout
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```sh\n{ACTIVATE}" in text  # pasted as the README shows it


@pytest.mark.slow
def test_readme_qualifying_steps_run_verbatim(tmp_path: Path) -> None:
    script = tmp_path / "qualify.sh"
    # The README's activation, run in the clone (the venv running these tests is that
    # clone's .venv), then its script, verbatim, in an empty directory.
    venv = Path(sys.prefix)
    activate = ACTIVATE.replace(".venv", str(venv))
    script.write_text(f"{activate}\ncd {tmp_path / 'work'}\n{readme_script()}")
    (tmp_path / "work").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        env=fresh_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the agents are in this process group: stopped below
    )
    try:
        output, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    assert "Traceback" not in output, output
    assert "error:" not in output and "command not found" not in output, output
    assert "all 4 agents ready for tcp probes" in output, output
    tmp_path = tmp_path / "work"
    assert (tmp_path / "netqual.token").stat().st_mode & 0o777 == 0o600
    for name in ("run1", "run2"):
        doc = json.loads((tmp_path / name / "results.json").read_text())
        assert len(doc["paths"]) == 6
        assert all(p["error"] is None for p in doc["paths"])
        assert doc["run"]["preliminary"] is False
        assert (tmp_path / name / "report.html").is_file()
    assert "<testsuites" in (tmp_path / "gate.xml").read_text()
    # The README's gate (no errors, no unsafe path, >= 10,000 samples) judged run1: what
    # it printed must be what run1's own paths say, whichever way loopback under load went.
    run1 = json.loads((tmp_path / "run1" / "results.json").read_text())
    passes = all(
        p["verdict"] != "unsafe" and p["rtt_us"]["samples"] >= 10_000 for p in run1["paths"]
    )
    assert ("GATE PASSED" if passes else "GATE FAILED") in output, output
    assert ("GATE FAILED" if passes else "GATE PASSED") not in output, output
    assert len((tmp_path / "run2.csv").read_text().splitlines()) == 7  # header + 6 paths


def test_every_doc_the_readme_names_exists() -> None:
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"docs/[\w./-]+\.md", text))
    assert {"docs/inventory.md", "docs/policy.md", "docs/results.md"} <= named
    assert [n for n in sorted(named) if not (ROOT / n).is_file()] == []
    results_doc = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert "netqual/files/schema/results.schema.json" in results_doc
    assert (ROOT / "netqual" / "files" / "schema" / "results.schema.json").is_file()
