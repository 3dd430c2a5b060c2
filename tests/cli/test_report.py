"""The HTML report and CSV export: content derived from data, self-contained, bounded size."""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import string
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Run, run_in_process
from factories import make_results, write_results

from netqual.gate import Waiver
from netqual.model.stats import Metric
from netqual.model.verdict import Verdict
from netqual.report import build, render_html, write_csv
from netqual.report.build import build_view
from netqual.results import summarize
from netqual.table.paths import PathTable
from netqual.table.run import Results

EXTERNAL = [
    re.compile(r"https?://", re.I),
    re.compile(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*//""", re.I),
    re.compile(r"""(?:src|href)\s*=\s*["'](?!#|data:)[^"']+""", re.I),
    re.compile(r"@import", re.I),
    re.compile(r"url\(\s*['\"]?(?!#|data:)", re.I),
    re.compile(r"<link\b", re.I),
    re.compile(r"<(?:iframe|object|embed)\b", re.I),
    re.compile(r"\b(?:fetch|XMLHttpRequest|importScripts)\s*\(", re.I),
]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def grab(pattern: str, text: str, group: int = 0) -> str:
    m = re.search(pattern, text, re.S)
    assert m is not None, f"{pattern!r} not found"
    return m.group(group)


def external_references(html: str) -> list[str]:
    return [m.group(0) for rx in EXTERNAL for m in rx.finditer(html)]


def test_first_screen_sentence_counts_policy_date_transport_size() -> None:
    res = make_results(4, slow_paths=[("gpu03", "stor01", 812.0)])
    html = render_html(res)
    # a number keeps its unit and the arrow its two characters on one line (U+00A0, span.nw)
    assert (
        '<h1 class="verdict" id="verdict">5 of 6 paths offload-safe; 1 unsafe: '
        'gpu03 <span class="nw">-&gt;</span> stor01, p99 812.0\u00a0us</h1>' in html
    )
    for text in ("<b>5</b>offload-safe", "<b>0</b>marginal", "<b>1</b>unsafe"):
        assert text in html
    assert "p99 RTT &lt;= 200\u00a0us offload-safe, &gt; 500\u00a0us unsafe" in html
    assert "2026-11-29 12:00 UTC" in html
    assert "Transport: <b>tcp</b>" in html
    assert "4 nodes in 1 rack, 6 paths (full-mesh)" in html


def test_small_cluster_heatmap_has_a_cell_per_node_pair_with_value_and_verdict() -> None:
    res = make_results(6, slow_paths=[("gpu03", "stor01", 812.0)])
    html = render_html(res)
    cells = re.findall(r'<rect class="cell (\w+)"[^>]*><title>([^<]*)</title>', html)
    assert len(cells) == 36
    assert ("unsafe", "gpu03 -&gt; stor01, p99 812.0\u00a0us: unsafe") in cells
    assert sum(1 for cls, _ in cells if cls == "self") == 6
    # ordered by rack: rack r01 (4 nodes) before r02 (2), storage after compute inside a rack
    view = build_view(res)
    assert [n.name for n in view.nodes] == ["gpu01", "gpu02", "gpu03", "stor01", "gpu04", "gpu05"]


def test_large_cluster_aggregates_per_rack_and_keeps_node_data() -> None:
    res = make_results(80, slow_nodes=["gpu03"], histogram=False, bulk=False)
    html = render_html(res)
    cells = re.findall(
        r'<rect class="cell (\w+)"[^>]*data-ra="(\d+)" data-rb="(\d+)"[^>]*><title>([^<]*)</title>',
        html,
    )
    assert len(cells) == 25  # 5 racks of 16
    r01 = next(t for _, a, b, t in cells if a == b == "0")
    assert r01.startswith("rack r01 -&gt; r01: 120 paths;")
    data = json.loads(grab(r'<script type="application/json" id="nq-data">(.*?)</script>', html, 1))
    assert len(data["src"]) == len(data["dst"]) == len(data["cls"]) == len(res.paths) == 3160
    assert data["racks"][0] == ["r01", 0, 16]


def test_recommendations_follow_the_verdicts() -> None:
    slow_node = build_view(make_results(32, slow_nodes=["gpu05"]))
    titles = [r.title for r in slow_node.recommendations]
    assert titles[0] == "Keep gpu05 on local NVMe"
    racks = build_view(make_results(48, slow_rack_pairs=[("r01", "r03")]))
    assert "Do not offload KV between racks r01 and r03" in [r.title for r in racks.recommendations]
    safe = build_view(make_results(8, all_safe=True))
    assert [r.title for r in safe.recommendations] == ["Offload can go live on every measured path"]
    errors = build_view(make_results(8, all_safe=False, error_paths=1))
    assert "1 path could not be measured" in [r.title for r in errors.recommendations]


def test_worst_paths_reasons_and_methodology() -> None:
    res = make_results(8, slow_paths=[("gpu02", "gpu05", 640.0)], samples=5000)
    html = render_html(res)
    worst = grab(r'<table id="worst-table">.*?</table>', html, 0)
    first_row = grab(r'<tr class="pick"[^>]*>(.*?)</tr>', worst, 1)
    assert '<td class="num">1</td><td>gpu02 &rarr; gpu05</td>' in first_row
    assert "p99 RTT 640.0\u00a0us &gt; 500.0\u00a0us: the offload gain is gone" in worst
    meth = grab(r'<dl class="meth">.*?</dl>', html, 0)
    for text in (
        "5,000 kept iterations after 1,000 warm-up",
        "chunks 64KiB, 1MiB, 8MiB",
        "time.perf_counter_ns",
        "resolution_s=1e-09",
        "measured with netqual 0.1.0",
    ):
        assert text in meth


def test_a_results_file_without_a_plan_does_not_claim_the_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: the methodology of a file that records no plan showed the default plan."""
    f = write_results(tmp_path / "r.json", make_results(4, samples=5000))
    doc = json.loads(f.read_text())
    del doc["run"]["plan"]
    f.write_text(json.dumps(doc))
    r = run_in_process(["report", str(f), "--html", "r.html"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    meth = grab(r'<dl class="meth">.*?</dl>', (tmp_path / "r.html").read_text(), 0)
    assert "10,000 kept iterations" not in meth and "chunks 64KiB" not in meth
    assert meth.count("not recorded in the results file") == 3  # ping-pong, bulk, timeout
    # and a re-written document does not gain the default plan either
    r = run_in_process(["report", str(f), "--json"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert "plan" not in json.loads(r.stdout)["run"]


def test_waivers_appear_in_the_report() -> None:
    res = make_results(4, slow_paths=[("gpu03", "stor01", 812.0)])
    waivers = [
        Waiver("gpu03", "stor01", dt.date(2026, 12, 31), "optic ordered", "netops"),
        Waiver("gpu01", "gpu02", dt.date(2026, 1, 1), "old", "alice"),
    ]
    html = render_html(res, waivers=waivers, today=dt.date(2026, 11, 29))
    section = grab(r'<h2 id="waivers">.*?</table>', html, 0)
    assert (
        "gpu03 -&gt; "
        "stor01</td><td>2026-12-31</td><td>active</td><td>unsafe</td>"
        "<td>netops</td><td>optic ordered" in section
    )
    assert "expired, no longer applies" in section
    assert "waived until 2026-12-31, netops: optic ordered" in html


@pytest.mark.parametrize("n_nodes", [4, 40, 80])
def test_no_external_references(n_nodes: int) -> None:
    html = render_html(make_results(n_nodes, slow_nodes=["gpu02"], error_paths=1))
    assert external_references(html) == []


def test_external_reference_scan_catches_what_it_should() -> None:
    bad = (
        '<img src="//cdn.example/x.png"><style>@import "a.css"; b{background:url(x.png)}</style>'
        '<a href="https://x">'
    )
    assert len(external_references(bad)) >= 4


def test_embedded_json_cannot_close_the_script(tmp_path: Path) -> None:
    res = make_results(4, error_paths=1)
    evil = replace(res.paths[0], error="</script><script>alert(1)</script>", reasons=("</script>",))
    res = replace(res, paths=PathTable.from_paths([evil, *res.paths[1:]]))
    html = render_html(res)
    assert html.count("</script>") == 2  # the data block and the page script, nothing injected


def test_csv_has_one_row_per_path_with_units(tmp_path: Path) -> None:
    res = make_results(5, slow_paths=[("gpu01", "gpu02", 700.0)])
    write_csv(res, tmp_path / "r.csv")
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(rows) == 10
    row = next(r for r in rows if (r["src"], r["dst"]) == ("gpu01", "gpu02"))
    assert row["verdict"] == "unsafe"
    assert float(row["p99_us"]) == 700.0
    assert row["src_rack"] == "r01"
    assert "bulk_8MiB_d8_goodput_gbps" in row


def test_report_command_writes_html_and_csv(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_results(
        tmp_path / "results.json", make_results(4, slow_paths=[("gpu03", "stor01", 812.0)])
    )
    r = cli("report", "results.json", "--html", "out.html", "--csv", "out.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "5 of 6 paths offload-safe; 1 unsafe: gpu03 -> stor01, p99 812.0 us" in r.stdout
    assert "wrote out.html" in r.stdout
    assert (tmp_path / "out.html").read_text().startswith("<!DOCTYPE html>")
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 7


def test_report_command_shows_profile_waivers(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_results(
        tmp_path / "results.json", make_results(4, slow_paths=[("gpu03", "stor01", 812.0)])
    )
    (tmp_path / "p.toml").write_text(
        '[limits]\nmax_unsafe = 0\n[[waiver]]\nsrc = "stor01"\ndst = "gpu03"\nuntil = 2099-01-01\n'
        'reason = "known"\nowner = "ops"\n'
    )
    r = cli("report", "results.json", "--html", "out.html", "--profile", "p.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '<h2 id="waivers">' in (tmp_path / "out.html").read_text()


def test_report_command_rejects_bad_results(tmp_path: Path, cli: Callable[..., Run]) -> None:
    (tmp_path / "results.json").write_text('{"schema_version": "1"}')
    r = cli("report", "results.json", "--html", "out.html", cwd=tmp_path)
    assert r.returncode == 2
    assert "results.json: tool: missing required key" in r.stderr
    assert not (tmp_path / "out.html").exists()


@pytest.mark.slow
def test_512_nodes_render_small_and_self_contained() -> None:
    # How fast is bench/report_scale's to say (medians, docs/report.md), never a timing here.
    res = make_results(512, slow_nodes=["gpu03"], slow_rack_pairs=[("r01", "r02")], error_paths=2)
    html = render_html(res)
    size_mb = len(html.encode()) / 1e6
    assert size_mb < 20, f"{size_mb:.1f} MB"
    assert html.count('<rect class="cell') == 32 * 32
    assert external_references(html) == []


def test_renders_odd_but_valid_inputs() -> None:
    res = make_results(4)
    empty = replace(res, paths=PathTable.empty(), summary=summarize((), Metric.P99))
    assert "No paths were measured." in render_html(empty)
    unracked = replace(res, nodes=tuple(replace(n, rack=None) for n in res.nodes))
    assert "Cluster: <b>4 nodes, 6 paths (full-mesh)</b>" in render_html(unracked)
    # paths whose endpoints are missing from the node list still get matrix rows
    partial = replace(res, nodes=res.nodes[:2])
    assert render_html(partial).count('<rect class="cell') == 16


def test_csv_neutralises_formulas_in_names_and_errors(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """A results file is input too (it may come from anywhere): a node name that is not one
    (a formula) is refused as the inventory refuses it; free text (racks, errors, reasons)
    is neutralised in the CSV."""
    res = make_results(3, error_paths=3)
    nodes = tuple(replace(n, rack="-2+3") for n in res.nodes)
    paths = tuple(
        replace(p, error="=cmd|' /C calc'!A0", reasons=("\tsneaky", "\rsneaky")) for p in res.paths
    )
    evil = replace(res.nodes[0], name='=HYPERLINK("http://x","y")')
    write_results(tmp_path / "named.json", replace(res, nodes=(evil, *res.nodes[1:])))
    named = cli("report", "named.json", "--csv", "named.csv", cwd=tmp_path)
    assert named.returncode == 2 and "nodes[0].name" in named.stderr, named.stderr
    write_results(
        tmp_path / "results.json", replace(res, nodes=nodes, paths=PathTable.from_paths(paths))
    )
    r = cli("report", "results.json", "--csv", "out.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader((tmp_path / "out.csv").open(newline="")))
    cells = [c for row in rows[1:] for c in row]
    assert any("calc" in c for c in cells) and any("sneaky" in c for c in cells)
    for cell in cells:
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        if cell.lstrip("'") != cell:
            assert cell[1] in "=+-@\t\r"


def page_data(html: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        grab(r'<script type="application/json" id="nq-data">(.*?)</script>', html, 1)
    )
    return data


def decode_grid(text: str, n: int) -> list[int]:
    """The page script's decoding of the class grid: two bits a cell, three a letter."""
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
    cells = []
    for letter in text:
        bits = alphabet.index(letter)
        cells += [bits >> 4, (bits >> 2) & 3, bits & 3]
    return cells[: n * n]


@pytest.fixture
def small_page_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Summarise above 1,000 paths and embed the 40 worst: the large-run page, small."""
    monkeypatch.setattr(build, "EMBED_ALL_MAX", 1000)
    monkeypatch.setattr(build, "EMBED_WORST", 40)


def test_small_run_embeds_every_path_and_says_nothing_of_summaries() -> None:
    res = make_results(80, slow_nodes=["gpu03"], histogram=False, bulk=False)
    html = render_html(res)
    data = page_data(html)
    assert len(data["src"]) == len(res.paths)
    assert "summary" not in data and "grid" not in data
    assert 'id="summarised"' not in html


@pytest.mark.usefixtures("small_page_bound")
def test_large_run_page_is_summarised_and_says_where_the_rest_is() -> None:
    res = make_results(
        80, slow_nodes=["gpu03"], slow_rack_pairs=[("r02", "r04")], error_paths=3, bulk=False
    )
    html = render_html(res)
    note = grab(r'<div class="note" id="summarised">(.*?)</div>', html, 1)
    assert note.startswith("Summarised: 3,160 paths")
    assert "results.json" in note and "--csv" in note
    data = page_data(html)
    embedded = data["summary"]["embedded"]
    assert data["summary"]["paths"] == 3160
    assert 40 < embedded < 3160
    for column in ("src", "dst", "cls", "p50x10", "metricx10", "p999x10"):
        assert len(data[column]) == embedded
    # the embedded columns carry the right values: join them back to the run by name
    t = res.paths
    shown = {
        (data["nodes"][a], data["nodes"][b]): (c, m)
        for a, b, c, m in zip(data["src"], data["dst"], data["cls"], data["metricx10"], strict=True)
    }
    worst = t.ranked(res.run.policy.metric)[:40].tolist()
    for i in worst:
        p = t.row(i)
        value = p.rtt.p99_us if p.rtt else None
        assert shown[p.key] == (p.verdict.rank + 1, -1 if value is None else round(value * 10))
    # every node's worst path and every rack pair's worst path are there
    for node in res.nodes:
        mine = [i for i in range(len(t)) if node.name in t.key(i)]
        assert t.key(min(mine, key=worst_first(res).index)) in shown
    titles = re.findall(r'data-ra="\d+" data-rb="\d+"[^>]*><title>([^<]*)</title>', html)
    assert len(titles) == 25
    for title in titles:
        pair = grab(r"worst (\S+ -&gt; \S+),", title, 1).split(" -&gt; ")
        assert (pair[0], pair[1]) in shown
    # the worst table and the drill-down point at embedded columns, not at path numbers
    for i, src, dst in re.findall(
        r'<tr class="pick" data-i="(\d+)"><td>\d+</td><td>(\S+) &rarr; (\S+)</td>', html
    ):
        assert (data["nodes"][data["src"][int(i)]], data["nodes"][data["dst"][int(i)]]) == (
            src,
            dst,
        )
    first = data["detail"][re.findall(r'data-i="(\d+)"', html)[0]]
    assert first["error"] is not None  # the worst path: an error (unsafe, no value)


@pytest.mark.usefixtures("small_page_bound")
def test_summarised_page_has_the_class_of_every_node_pair() -> None:
    res = make_results(60, slow_nodes=["gpu07"], marginal_fraction=0.1, histogram=False)
    rev = [replace(p, src=p.dst, dst=p.src, verdict=Verdict.UNSAFE) for p in res.paths[:30]]
    res = replace(res, paths=PathTable.from_paths([*res.paths, *rev]))
    data = page_data(render_html(res))
    nodes, n = data["nodes"], len(data["nodes"])
    grid = decode_grid(data["grid"], n)
    by_key = {p.key: p.verdict.rank + 1 for p in res.paths}
    for y, a in enumerate(nodes):
        for x, b in enumerate(nodes):
            want = 0 if a == b else by_key.get((a, b), by_key.get((b, a), 0))
            assert grid[y * n + x] == want, (a, b)
    assert grid.count(3) > 2 * 59  # gpu07's row and column, and the reversed unsafe paths


@pytest.mark.usefixtures("small_page_bound")
def test_summarised_page_keeps_waived_paths() -> None:
    res = make_results(60, slow_nodes=["gpu03"], histogram=False)
    safe = next(p for p in res.paths if p.verdict is Verdict.SAFE and "gpu03" not in p.key)
    waiver = Waiver(safe.dst, safe.src, dt.date(2099, 1, 1), "known", "ops")
    data = page_data(render_html(res, waivers=[waiver]))
    (index, text), *_ = data["waived"].items()
    assert len(data["waived"]) == 1 and text == "until 2099-01-01, ops: known"
    i = int(index)
    assert (data["nodes"][data["src"][i]], data["nodes"][data["dst"][i]]) == safe.key


def worst_first(res: Results) -> list[int]:
    order: list[int] = res.paths.ranked(res.run.policy.metric).tolist()
    return order


def test_rack_cells_count_every_path_of_the_pair_both_ways() -> None:
    """Rack-pair aggregates (bincounts) against a count of the paths one by one."""
    res = make_results(
        70, slow_nodes=["gpu09"], slow_rack_pairs=[("r01", "r03")], error_paths=2, bulk=False
    )
    rev = [replace(p, src=p.dst, dst=p.src) for p in res.paths[::7]]
    res = replace(res, paths=PathTable.from_paths([*res.paths, *rev]))
    view = build_view(res)
    rack = {n.name: n.rack or "-" for n in res.nodes}
    expected: dict[tuple[str, str], list[int]] = {}
    for p in res.paths:
        pairs = {(rack[p.src], rack[p.dst]), (rack[p.dst], rack[p.src])}
        for pair in pairs:
            expected.setdefault(pair, [0, 0, 0])[p.verdict.rank] += 1
    names = [s.name for s in view.racks]
    seen = 0
    for c in view.cells:
        a, b = names[c.y], names[c.x]
        safe, marginal, unsafe = expected[(a, b)]
        assert f"{safe + marginal + unsafe:,} paths; {safe:,} offload-safe, " in c.title
        assert f"{marginal:,} marginal, {unsafe:,} unsafe; worst " in c.title
        assert c.text == (str(marginal + unsafe) if marginal + unsafe else "")
        seen += 1
    assert seen == len(names) ** 2
    assert view.directional


def test_distribution_rows_hold_every_path_once() -> None:
    res = make_results(40, slow_nodes=["gpu02"], error_paths=2, marginal_fraction=0.1)
    view = build_view(res)
    assert [r.label for r in view.dist] == ["same-rack, 2 hops", "cross-rack, 4 hops"]
    assert sum(r.count for r in view.dist) == len(res.paths)
    drawn = sum(
        int(grab(r": ([\d,]+) paths? ", r.title, 1).replace(",", ""))
        for row in view.dist
        for r in row.rects
    )
    assert drawn == len(res.paths) - 2  # the two failed paths have no value to draw
    assert not view.directional


@pytest.mark.parametrize(
    ("counts", "fill", "mark"),
    [
        ((1024, 0, 0), "safe", ""),
        ((1022, 2, 0), "safe", "marginal"),  # 0.2% marginal: green, an amber corner
        ((990, 2, 32), "safe", "unsafe"),  # 3% unsafe: still not the cell's colour
        ((900, 0, 124), "unsafe", ""),  # 12% unsafe: a red cell
        ((0, 1024, 0), "marginal", ""),
        ((0, 1000, 24), "marginal", "unsafe"),
    ],
)
def test_rack_cell_is_coloured_by_a_material_class_and_marks_a_rarer_worse_one(
    counts: tuple[int, int, int], fill: str, mark: str
) -> None:
    # issue: 0.2% marginal paths painted a rack pair pale amber, the whole 1,024-node
    # matrix read as "everything is marginal"
    from netqual.report.view import rack_cell_classes

    assert rack_cell_classes(counts) == (fill, mark)


def test_rack_matrix_marks_one_bad_path_without_painting_its_rack_pair() -> None:
    res = make_results(80, slow_paths=[("gpu02", "gpu20", 900.0)], histogram=False, bulk=False)
    html = render_html(res)
    cells = re.findall(
        r'<rect class="cell (\w+)"([^>]*)><title>rack (\S+) -&gt; (\S+): ([^<]*)</title></rect>'
        r'(<polygon class="(\w+) mark")?',
        html,
    )
    assert len(cells) == 25 and "fill-opacity" not in html
    marked = {(a, b): (cls, mark) for cls, _, a, b, _, _, mark in cells if mark}
    racks = {n.name: n.rack for n in res.nodes}
    pair = racks["gpu02"], racks["gpu20"]
    assert marked == {pair: ("safe", "unsafe"), pair[::-1]: ("safe", "unsafe")}
    assert all(cls == "safe" for cls, *_ in cells)


def test_a_rare_bad_class_is_drawn_visible_and_labelled_with_its_count() -> None:
    # issue: 2,128 marginal and 1,025 unsafe of 523,776 paths drew as invisible slivers
    from netqual.report.dist import MIN_BAD_H

    res = make_results(
        200, slow_paths=[("gpu02", "gpu05", 900.0)], marginal_fraction=0.002, histogram=False,
        bulk=False,
    )  # fmt: skip
    view = build_view(res)
    counts = {cls: 0 for cls in ("marginal", "unsafe")}
    for row in view.dist:
        labels = {lb.cls: lb.text for lb in row.labels}
        for cls in counts:
            n = row.counts.get(cls, 0)
            counts[cls] += n
            bars = [r for r in row.rects if r.cls == cls]
            assert all(r.h >= MIN_BAD_H for r in bars)
            assert labels.get(cls) == (f"{n:,} {cls}" if n else None), (row.label, labels)
        assert all(r.y >= 0 and r.y + r.h <= 56.0 + 1e-9 for r in row.rects)  # within the row
    assert counts["unsafe"] == 1 and counts["marginal"] > 0
    html = render_html(res)
    assert '<text class="count unsafe"' in html and ">1 unsafe</text>" in html


@pytest.mark.usefixtures("small_page_bound")
def test_report_command_names_the_results_file_in_a_summarised_page(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    write_results(tmp_path / "big run.json", make_results(48, histogram=False, bulk=False))
    r = cli("report", "big run.json", "--html", "out.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    note = grab(r'id="summarised">(.*?)</div>', (tmp_path / "out.html").read_text(), 1)
    assert "Every path is in big run.json; netqual report &#39;big run.json&#39; " in note
    assert "paths.csv writes one row per path" in note


def test_no_literal_backticks_in_the_page_commands_read_as_code() -> None:
    # issue: "`netqual gate` judges the RTT verdict" showed its backticks in the HTML
    from netqual.workload import load_workload
    from netqual.workload.judge import apply

    res = apply(make_results(4, all_safe=True), load_workload("llama-3.1-70b-tp8"))
    html = render_html(res)
    shown = re.sub(r"<script.*?</script>", "", html, flags=re.S)
    assert "`" not in shown
    assert "<code>netqual gate</code> judges it" in shown
