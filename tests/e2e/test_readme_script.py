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


@pytest.mark.slow
def test_readme_qualifying_steps_run_verbatim(tmp_path: Path) -> None:
    script = tmp_path / "qualify.sh"
    script.write_text(readme_script())
    bin_dir = str(Path(sys.executable).parent)  # the venv's `netqual` and `python3`
    env = {k: v for k, v in os.environ.items() if k != "NETQUAL_TOKEN"}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", NETQUAL_WIDTH="100")
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        env=env,
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
    assert "error:" not in output, output
    assert "all 4 agents ready for tcp probes" in output, output
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
