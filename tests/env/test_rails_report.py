"""The report's rail selector in a real browser (docs/rails.md). Skips without chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import chromium, page_errors
from railsdata import rail_results

from netqual.report.html import write_html


@pytest.fixture(scope="module")
def rail_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rails") / "report.html"
    write_html(rail_results(4, slow={("h3", 1): 700.0}), path)
    return path


def test_report_has_a_rail_selector_a_rail_table_and_the_nic_advice(rail_report: Path) -> None:
    html = rail_report.read_text()
    assert (
        '<select id="rail-pick"><option value="">all rails</option>'
        '<option value="0">rail 0</option><option value="1">rail 1</option></select>' in html
    )
    table = html[html.index('<table id="rail-table">') :]
    table = table[: table.index("</table>")]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
    # a number and its unit joined by U+00A0: they never wrap apart
    assert cells == ["rail 0", "6", "30.0\u00a0us", "60.0\u00a0us", "6", "0", "0",
                     "rail 1", "6", "190.0\u00a0us", "700.0\u00a0us", "3", "0", "3"]  # fmt: skip
    assert "Check NIC eth1 of h3 (rail 1)" in html
    assert "while its other rails are fine (eth0: 0 of 3 bad)" in html


def test_rail_view_in_a_browser_shows_only_that_rails_cells(rail_report: Path) -> None:
    r = chromium(rail_report.parent, "--dump-dom", rail_report.as_uri() + "#rail=1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    dom = r.stdout
    assert 'data-ready="1"' in dom
    cells = re.findall(r'<rect class="cell (\w+)" data-x="(\d)" data-y="(\d)"([^>]*)>', dom)
    assert len(cells) == 64
    # rows/columns 0-3 are rail 0 (h1..h4/eth0), 4-7 rail 1: only the rail-1 block shows
    shown = {(int(x), int(y)) for _, x, y, rest in cells if "display: none" not in rest}
    assert shown == {(x, y) for x in range(4, 8) for y in range(4, 8)}
    assert "Rail 1: only its NICs' paths are shown." in dom
