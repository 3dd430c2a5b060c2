"""A results file whose ``fleet`` key carries hostile text (terminal escapes, bidi
overrides, rich markup, a forged line) in a snapshot value and an outlier: the gate's
terminal and JUnit output, the run's terminal summary and the report show it literally."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results
from hostile import HOSTILE, assert_literal

PROFILE = "[limits]\nfleet_consistent = true\nfleet_expected = true\n"


@pytest.fixture
def hostile_fleet(tmp_path: Path) -> Path:
    results = make_results(3, samples=2000, all_safe=True)
    path = write_results(tmp_path / "results.json", results)
    doc = json.loads(path.read_text())
    names = [n["name"] for n in doc["nodes"]]
    doc["fleet"] = {
        "snapshot": {n: {"mtu": "9000", "os": HOSTILE} for n in names},
        "outliers": [
            {"node": names[0], "key": "mtu", "value": HOSTILE, "role": "any",
             "majority": "9000", "majority_nodes": names[1:]},
            {"node": names[1], "key": "os", "value": "x", "role": "any", "expected": HOSTILE},
        ],
    }  # fmt: skip
    path.write_text(json.dumps(doc))
    (tmp_path / "profile.toml").write_text(PROFILE)
    return tmp_path


def test_hostile_fleet_text_stays_literal_everywhere(
    hostile_fleet: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["gate", "results.json", "--profile", "profile.toml", "--junit", "j.xml"]
    gate = run_in_process(args, hostile_fleet, monkeypatch, capsys)
    assert gate.returncode == 1, gate.stderr
    assert_literal(gate.stdout + gate.stderr)
    assert "fleet_consistent" in gate.stdout and "fleet_expected" in gate.stdout
    assert "[/x][link=https://evil.example/]click[/link]" in gate.stdout  # text, not markup
    assert_literal((hostile_fleet / "j.xml").read_text())
    ET.parse(hostile_fleet / "j.xml")
    shown = run_in_process(["report", "results.json"], hostile_fleet, monkeypatch, capsys)
    assert shown.returncode == 0, shown.stderr
    assert_literal(shown.stdout + shown.stderr)
    assert "configuration: 2 outliers:" in shown.stdout
    html = run_in_process(
        ["report", "results.json", "--html", "r.html"], hostile_fleet, monkeypatch, capsys
    )
    assert html.returncode == 0, html.stderr
    page = (hostile_fleet / "r.html").read_text()
    assert "\x1b" not in page and "\u202e" not in page and '<a href="https://evil' not in page
    assert 'id="fleet-outliers"' in page
