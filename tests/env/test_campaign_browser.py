"""The campaign trend report in headless Chromium: the first screen carries the week's
milestone verdict, the verdict chart in class colours and the new suspect; no page error;
no external URL. Skips without chromium (as tests/env/test_report_browser.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from browser import CLASS_RGB, chromium, page_errors
from factories import make_results

from netqual.analysis import localise
from netqual.campaign import config
from netqual.campaign.milestone import judge, runs_to_judge
from netqual.campaign.store import open_store
from netqual.campaign.trend import trend
from netqual.gate import load_profile
from netqual.report.campaign import write_campaign_html

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import datetime as dt

    tmp = tmp_path_factory.mktemp("campaign")
    config.init_campaign(
        tmp / "c", name="joint", start=dt.date(2027, 1, 4), weeks=10, inventory=None
    )
    camp = config.load_campaign(tmp / "c")
    store = open_store(camp.store_path, create=True)
    for week, slow in ((1, []), (2, ["gpu03"])):
        r = make_results(
            8, slow_nodes=slow, started_at=f"2027-01-{4 + 7 * (week - 1):02d}T10:00:00+00:00"
        )
        r = dataclasses.replace(r, suspects=localise.suspects(r))
        store.add(r, source=tmp / f"w{week}", week=week)
    stone = camp.milestone("week2")
    chosen = runs_to_judge(store, stone)
    assert chosen is not None  # week 2 has a run: due
    target, _ = chosen
    latest = make_results(8, slow_nodes=["gpu03"], started_at="2027-01-11T10:00:00+00:00")
    report = judge(camp, store, stone, load_profile(stone.profile), target, latest,
                   baseline=None, baseline_source=None, today=dt.date(2027, 1, 12))  # fmt: skip
    store.record_gate(
        target.seq,
        stone.name,
        "preflight",
        report.passed,
        [o.rule for o in report.failed],
        dt.date(2027, 1, 12),
    )
    out = tmp / "campaign.html"
    write_campaign_html(trend(store, camp), out)
    store.close()
    return out


def test_dom_has_verdict_chart_and_suspect(page: Path) -> None:
    text = page.read_text()
    assert not re.search(r'(?:src|href)="(?:https?:)?//', text)  # self-contained
    r = chromium(page.parent, "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    head = re.search(r'<h1 class="verdict" id="verdict">(.*?)</h1>', r.stdout)
    assert head is not None and head.group(1) == "Week 2: milestone week2 FAILED"
    assert "history: no path worse than its best week" in r.stdout
    assert len(re.findall(r'<g class="week" data-week="\d+">', r.stdout)) == 2
    assert "node gpu03" in r.stdout and "open: first seen week 2" in r.stdout


def test_first_screen_shows_class_colours(page: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image", reason="Pillow not installed (pip install pillow)")
    shot = page.parent / "shot.png"
    r = chromium(page.parent, f"--screenshot={shot}", "--window-size=1280,800", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    img = image_mod.open(shot).convert("RGB")
    colours = {rgb for _, rgb in img.crop((0, 0, 700, 450)).getcolors(maxcolors=1 << 20) or []}
    for name in ("safe", "unsafe"):
        rgb = CLASS_RGB[name]
        assert any(all(abs(a - b) <= 6 for a, b in zip(c, rgb, strict=True)) for c in colours), name
