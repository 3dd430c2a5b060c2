"""One vocabulary across gate, report and terminal: rule names are the profile's keys,
a waiver that names a node or path the run lacks is a warning everywhere, and the
terminal tables fit 80 columns."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from cli_helpers import netqual
from factories import make_results, write_results

PROFILE = """
[profile]
name = "typo-test"
metric = "p99"

[limits]
max_metric_us = 500
max_unsafe = 0

[[waiver]]
src = "gpu09"
dst = "stor01"
until = "2099-01-01"
reason = "cable swap scheduled"
owner = "netops"
"""


def _case(tmp_path: Path) -> None:
    write_results(tmp_path / "r.json", make_results(4, slow_paths=[("gpu03", "stor01", 812.0)]))
    (tmp_path / "gate.toml").write_text(PROFILE)


def test_rule_names_are_profile_keys(tmp_path: Path) -> None:
    _case(tmp_path)
    r = netqual("gate", "r.json", "--profile", "gate.toml", cwd=tmp_path)
    assert r.returncode == 1
    assert "max_metric_us" in r.stdout and "max_p99_us" not in r.stdout
    assert "1 path above 500 us p99" in r.stdout
    # The table has a top border.
    table_top = next(ln for ln in r.stdout.splitlines() if "rule" in ln and "result" in ln)
    above = r.stdout.splitlines()[r.stdout.splitlines().index(table_top) - 1]
    assert above.startswith("┏"), r.stdout


def test_waiver_for_an_unknown_node_warns_everywhere(tmp_path: Path) -> None:
    _case(tmp_path)
    r = netqual("gate", "r.json", "--profile", "gate.toml", "--junit", "g.xml", cwd=tmp_path)
    warning = "waiver gpu09 -> stor01 names 'gpu09', not a node of this run"
    assert warning in " ".join(r.stdout.split())
    root = ET.parse(tmp_path / "g.xml").getroot()
    texts = [e.text or "" for e in root.iter()] + [
        v for e in root.iter() for v in e.attrib.values()
    ]
    assert any(warning in t for t in texts)
    rep = netqual("report", "r.json", "--profile", "gate.toml", "--html", "r.html", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Waiver gpu09 -&gt; stor01 excuses nothing" in html
    assert "names &#39;gpu09&#39;, not a node of this run" in html


def test_group_tables_fit_80_columns(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from cli_helpers import ROOT

    write_results(tmp_path / "r.json", make_results(4, slow_paths=[("gpu03", "stor01", 812.0)]))
    env = {**os.environ, "NETQUAL_WIDTH": "80", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "netqual", "report", "r.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("by hops"))
    # title, top rule, ONE header line, then the header's bottom rule
    assert "hops" in lines[header + 2] and "unsafe" in lines[header + 2]
    assert lines[header + 3].startswith("┡"), "\n".join(lines[header : header + 5])
