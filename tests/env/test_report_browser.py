"""The HTML report in a real browser (Debian `chromium`, headless): the page script runs
without errors, the first screen shows the verdict sentence and the heatmap in class colours.

Needs chromium and Pillow (to decode the screenshot); skips with the reason otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import CLASS_RGB, chromium, page_errors
from factories import make_results

from netqual.report import build, write_html

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report_4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report4")
    path = tmp / "report.html"
    write_html(
        make_results(4, slow_paths=[("gpu03", "stor01", 812.0), ("gpu01", "gpu02", 300.0)]), path
    )
    return path


def test_dom_after_script_has_verdict_heatmap_and_drilldown(report_4: Path) -> None:
    r = chromium(report_4.parent, "--dump-dom", report_4.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    dom = r.stdout
    assert 'data-ready="1"' in dom  # the page script ran to its end
    sentence = re.search(r'<h1 class="verdict" id="verdict">(.*?)</h1>', dom)
    assert sentence is not None
    assert (
        sentence.group(1)
        == '4 of 6 paths offload-safe; 1 unsafe: gpu03 <span class="nw">-&gt;</span> stor01, '
        'p99 812.0&nbsp;us; 1 marginal: gpu01 <span class="nw">-&gt;</span> gpu02, '
        "p99 300.0&nbsp;us"
    )
    assert len(re.findall(r'<rect class="cell (?:safe|marginal|unsafe|self)"', dom)) == 16
    # the script draws the worst path's drill-down: RTT table, histogram, bulk by chunk size
    drill = dom[dom.index('id="drill"') :]
    assert "gpu03 → stor01" in drill[:400] or "gpu03 &rarr; stor01" in drill[:400]
    assert "RTT distribution" in drill
    assert "Bulk read by chunk size" in drill
    assert "8MiB" in drill


def test_screenshot_first_screen_shows_class_colours(report_4: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image", reason="Pillow not installed (pip install pillow)")
    shot = report_4.parent / "first-screen.png"
    r = chromium(
        report_4.parent, f"--screenshot={shot}", "--window-size=1280,900", report_4.as_uri()
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    img = image_mod.open(shot).convert("RGB")
    assert img.size == (1280, 900)
    top = img.crop((0, 0, 1280, 600))
    colours = {rgb for _, rgb in top.getcolors(maxcolors=1 << 20) or []}
    for name, rgb in CLASS_RGB.items():
        near = [c for c in colours if all(abs(a - b) <= 6 for a, b in zip(c, rgb, strict=True))]
        assert near, f"no {name} colour {rgb} in the first screen"
    # the heatmap sits in the first screen: unsafe red appears below the header chips
    heat = img.crop((0, 250, 700, 600))
    reds = sum(
        n
        for n, c in heat.getcolors(maxcolors=1 << 20) or []
        if all(abs(a - b) <= 6 for a, b in zip(c, CLASS_RGB["unsafe"], strict=True))
    )
    assert reds > 500


@pytest.mark.slow
def test_512_node_report_loads_and_draws_node_view(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    write_html(make_results(512, slow_nodes=["gpu03"], histogram=False, bulk=False), path)
    r = chromium(tmp_path, "--dump-dom", path.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    assert 'data-ready="1"' in r.stdout
    canvas = re.search(r'<canvas id="node-canvas" width="(\d+)" height="(\d+)"', r.stdout)
    assert canvas is not None
    assert canvas.groups() == ("512", "512")  # every node drawn, one pixel each


def test_first_screen_carries_the_decision(tmp_path: Path) -> None:
    """Through the CLI: `report --profile --html`, then the DOM after the page script."""
    from cli_helpers import netqual
    from factories import write_results

    results = make_results(4, slow_paths=[("gpu03", "stor01", 812.0), ("gpu01", "gpu02", 300.0)])
    write_results(tmp_path / "r.json", results)
    (tmp_path / "gate.toml").write_text(
        '[profile]\nname = "preflight"\nmetric = "p99"\n[limits]\nmax_unsafe = 0\n'
    )
    r = netqual("report", "r.json", "--profile", "gate.toml", "--html", "r.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page = tmp_path / "r.html"
    d = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert d.returncode == 0, d.stderr[-2000:]
    assert page_errors(d.stderr) == []
    dom = d.stdout
    # the gate's decision: profile, FAIL, the failed rule
    gate = re.search(r'<div class="gate fail" id="gate">(.*?)</div>', dom)
    assert gate is not None, dom[:3000]
    assert "preflight" in gate.group(1) and "FAIL" in gate.group(1)
    assert "max_unsafe" in gate.group(1)
    # values in the cells, not only on hover (a printout carries them)
    values = re.findall(r'<text class="cellval"[^>]*>([^<]+)</text>', dom)
    assert "812.0" in values and "300.0" in values  # the terminal matrix's digits
    assert len(values) == 12  # every measured cell of the 4 x 4 matrix
    # one measurement per pair, drawn twice: the page says so
    kind = re.search(r'<div class="muted" id="matrix-kind">(.*?)</div>', dom, re.S)
    assert kind is not None and kind.group(1).startswith("symmetric: one measurement per pair")
    # the drill-down's selectors name the path its panel shows
    drill = dom[dom.index('id="drill"') :][:400]
    assert "gpu03 &rarr; stor01" in drill or "gpu03 → stor01" in drill
    for select, name in (("pick-src", "gpu03"), ("pick-dst", "stor01")):
        block = dom[dom.index(f'id="{select}"') :].split("</select>")[0]
        chosen = re.findall(r'<option value="\d+" selected="">([^<]+)</option>', block)
        assert chosen == [name], block
    # one coherent piece of advice: no "go live" beside failing paths
    todo = dom[dom.index('id="recommendations"') :].split("</section>")[0]
    assert "can go live" not in todo


def amber_pixels(shot: Path) -> int:
    image_mod = pytest.importorskip("PIL.Image", reason="Pillow not installed (pip install pillow)")
    img = image_mod.open(shot).convert("RGB")
    rgb = CLASS_RGB["marginal"]
    return sum(
        n
        for n, c in img.getcolors(maxcolors=1 << 22) or []
        if all(abs(a - b) <= 6 for a, b in zip(c, rgb, strict=True))
    )


def test_summarised_page_draws_every_node_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large run's page (here: the bound lowered to 1,000 paths) carries values for a few
    paths only; its node view still paints every node pair in its class, from the grid."""
    monkeypatch.setattr(build, "EMBED_ALL_MAX", 1000)
    monkeypatch.setattr(build, "EMBED_WORST", 40)
    page = tmp_path / "report.html"
    write_html(make_results(80, slow_rack_pairs=[("r02", "r04")], histogram=False), page)
    r = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    assert 'data-ready="1"' in r.stdout
    assert '<div class="note" id="summarised">Summarised: 3,160 paths' in r.stdout
    canvas = re.search(r'<canvas id="node-canvas" width="(\d+)" height="(\d+)"', r.stdout)
    assert canvas is not None and canvas.groups() == ("480", "480")  # 80 nodes, 6 px each
    # the same page without the grid: only the embedded paths' cells would be amber
    html = page.read_text()
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r',"grid":"[^"]*"', "", html))
    shots = []
    for name, source in (("grid", page), ("bare", bare)):
        shot = tmp_path / f"{name}.png"
        s = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1100", source.as_uri())
        assert s.returncode == 0, s.stderr[-2000:]
        assert page_errors(s.stderr) == []
        shots.append(amber_pixels(shot))
    # 2 x 16 x 16 marginal node pairs of 5 x 5 px: 12,800 px, less the few embedded
    assert shots[0] - shots[1] > 5_000, shots
