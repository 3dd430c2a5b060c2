"""The hostile node name and error text of tests/security/test_hostile_text.py through the campaign
commands: add, report (terminal, JSON, HTML), gate (terminal, JUnit) and export. Nothing
reaches a terminal, a JUnit file, a page or the OpenMetrics text raw."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from hostile import assert_literal, hostile_results


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hostile-campaign")
    (d / "run1").mkdir()
    hostile_results(d / "run1" / "results.json")
    return d


COMMANDS = [  # run in this order, each in the same directory
    (["campaign", "init", "joint"], 0),
    (["campaign", "add", "joint", "run1", "--week", "2"], 0),
    (["campaign", "report", "joint", "--html", "c.html"], 0),
    (["campaign", "report", "joint", "--json"], 0),
    (["campaign", "gate", "joint", "--milestone", "week2", "--junit", "c.xml"], 1),
    (["export", "joint", "--openmetrics"], 0),
    (["export", "run1", "--openmetrics"], 0),
]


def test_campaign_commands_print_the_hostile_name_literally(
    campaign_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for args, code in COMMANDS:
        r = run_in_process(args, campaign_dir, monkeypatch, capsys)
        assert r.returncode == code, (args, r.stdout, r.stderr)
        assert_literal(r.stdout + r.stderr)
        outputs.append(r.stdout)
    assert "\\x1b" in outputs[-1]  # the name is there, escaped
    junit = (campaign_dir / "c.xml").read_text()
    assert_literal(junit)
    ET.parse(campaign_dir / "c.xml")
    page = (campaign_dir / "c.html").read_text()
    assert "\x1b" not in page and '<a href="https://evil' not in page
    json.loads(outputs[3])
