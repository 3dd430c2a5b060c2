"""What a reader sees of report.html in headless Chromium at 800 and 1,400 px, for the lab
demo's run, a 1,024-node run and a run with a fan-in sweep (issue: numbers broken
mid-digit, "3,5 / 58 / us", "rem/ote", ranks "1/0"; the headline's "->" split; the rack
matrix's column names clipped, "r031"; "What to do" 1,900 px down at 800 px):

- no number is broken from its digits or its unit, no "->" split, no word of a table cell
  broken, wherever it sits on the page (the DOM: each one's text range covers one line);
- nothing is clipped: no table cell cuts its text, no SVG label leaves its picture, and
  the page never scrolls sideways (wide tables scroll inside their own box);
- the answer and "What to do" with its first fix lie within the first 900 px;
- the page's own script runs to its end, and a 1,024-node run's node view scrolls inside
  its own box; its headline groups its numbers.

Needs chromium; skips otherwise (tests/support/browser.py).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from browser import layout
from factories import make_results, write_results
from paths import REPO

from netqual.analysis import fanin
from netqual.model.fanin import ChunkStats, FaninLevel
from netqual.model.node import Role
from netqual.report import write_html
from netqual.results import load
from netqual.workload.load import load_workload

pytestmark = pytest.mark.browser

FIRST_SCREEN_PX = 900
# `netqual demo` as root (the emulated fabric: two racks of three hosts, two storage nodes
# at a remote site), as it wrote its results: same-rack, cross-rack and remote paths, bulk
# reasons, host path audits.
DEMO_RESULTS = REPO / "tests" / "data" / "demo-lab" / "results.json"


def _fanin_run(path: Path) -> Path:
    """Eight nodes and a fan-in sweep of one storage node: safe up to 4 readers, the knee
    at 8 (chunk p99 4.5, 5.4, 21.1, 60 ms at 1, 4, 8, 16 readers)."""
    chunk = load_workload("qwen3-coder-480b-tp8").chunk_bytes

    def level(k: int, p99_ms: float) -> FaninLevel:
        p99 = p99_ms * 1000
        stats = ChunkStats(1000 * k, p99 * 0.8, p99, p99 * 1.3, (), (p99 * 0.97, p99 * 1.03))
        gbps = 8.0 * min(k, 4)
        return FaninLevel(k, stats, gbps / k, gbps, nodes=tuple(f"gpu{i:02d}" for i in range(k)))

    res = make_results(8, slow_paths=[("gpu03", "stor01", 812.0)])
    storage = next(n.name for n in res.nodes if n.role is Role.STORAGE)
    levels = [level(k, p) for k, p in zip((1, 4, 8, 16), (4.5, 5.4, 21.1, 60.0), strict=True)]
    sweep = fanin.judge(storage, "lmcache", chunk, 2.0, levels)
    return write_results(path, dataclasses.replace(res, fanin=(sweep,)))


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, report_1024: Path) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("layout")
    out = {"1024": report_1024}
    for name, source in (("demo", DEMO_RESULTS), ("fanin", _fanin_run(tmp / "fanin.json"))):
        page = tmp / f"{name}.html"
        write_html(load(source), page)
        out[name] = page
    return out


@pytest.fixture(scope="module")
def measured(pages: dict[str, Path]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(name, width): layout(page, width) for name, page in pages.items()
            for width in (800, 1400)}  # fmt: skip


CASES = [(name, width) for name in ("demo", "1024", "fanin") for width in (800, 1400)]


@pytest.mark.parametrize(("name", "width"), CASES)
def test_no_number_unit_arrow_or_word_is_broken_across_lines(
    measured: dict[tuple[str, int], dict[str, Any]], name: str, width: int
) -> None:
    assert measured[name, width]["broken"] == []


@pytest.mark.parametrize(("name", "width"), CASES)
def test_nothing_is_clipped_and_the_page_never_scrolls_sideways(
    measured: dict[tuple[str, int], dict[str, Any]], name: str, width: int
) -> None:
    got = measured[name, width]
    assert got["clipped"] == []
    assert got["page"]["scroll"] <= got["page"]["client"], got["page"]


@pytest.mark.parametrize(("name", "width"), CASES)
def test_the_answer_and_the_first_fix_are_on_the_first_screen(
    measured: dict[tuple[str, int], dict[str, Any]], name: str, width: int
) -> None:
    tops = measured[name, width]["tops"]
    assert tops["answer"] is not None and tops["answer"] <= FIRST_SCREEN_PX, tops
    assert tops["todo"] is not None and tops["todo"] < FIRST_SCREEN_PX, tops
    assert tops["first_fix"] is not None and tops["first_fix"] <= FIRST_SCREEN_PX, tops


@pytest.mark.parametrize(("name", "width"), CASES)
def test_the_pages_script_runs_and_the_node_view_stays_in_its_box(
    measured: dict[tuple[str, int], dict[str, Any]], name: str, width: int
) -> None:
    page = measured[name, width]["page"]
    assert page["ready"] == "1", page
    assert page["box"] is None or page["box"] <= page["client"], page
    if name == "1024":
        assert page["box"] is not None, page  # a large run's node view is a canvas


def test_a_large_runs_headline_groups_its_numbers(pages: dict[str, Path]) -> None:
    text = pages["1024"].read_text(encoding="utf-8")
    sentence = re.search(r'<h1 class="verdict[^"]*" id="verdict">(.*?)</h1>', text)
    assert sentence is not None
    assert sentence.group(1).startswith("520,623 of 523,776 paths offload-safe; 1,025 unsafe")
    assert "1,024 nodes in 32 racks, 523,776 paths" in text
