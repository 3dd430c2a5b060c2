"""The summarised HTML report of a 1,024-node full mesh in headless Chromium: at 800 and
1,400 px the page never scrolls sideways (the node view scrolls inside its own box),
"What to do" is on the first screen at 1,400 x 900, and the headline groups its numbers.

Needs chromium; skips otherwise (test_report_browser.chromium).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import chromium, page_errors

pytestmark = pytest.mark.browser

# Appended to a copy of the report: after the page's own script ran, record the layout
# where --dump-dom shows it.
PROBE = """<script>
window.addEventListener("load", function () {
  var d = document.documentElement, todo = document.getElementById("recommendations");
  var box = document.querySelector("#nodeview .canvas-box");
  document.body.setAttribute("data-probe", JSON.stringify({
    scroll: d.scrollWidth, client: d.clientWidth,
    todo: Math.round(todo.getBoundingClientRect().top),
    box: box ? Math.round(box.getBoundingClientRect().right) : null}));
});
</script>"""


@pytest.fixture(scope="module")
def probed_1024(tmp_path_factory: pytest.TempPathFactory, report_1024: Path) -> Path:
    """The session's 1,024-node report.html (tests/env/conftest.py) with the probe."""
    probed = tmp_path_factory.mktemp("probed1024") / "probed.html"
    probed.write_text(report_1024.read_text().replace("</body>", PROBE + "</body>"))
    return probed


def layout(page: Path, width: int) -> tuple[dict[str, int], str]:
    r = chromium(page.parent, f"--window-size={width},900", "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    found = re.search(r"data-probe=\"([^\"]*)\"", r.stdout)
    assert found is not None, "the probe script did not run"
    return json.loads(found.group(1).replace("&quot;", '"')), r.stdout


@pytest.mark.parametrize("width", [800, 1400])
def test_no_page_level_horizontal_scroll(probed_1024: Path, width: int) -> None:
    probe, dom = layout(probed_1024, width)
    assert probe["scroll"] <= probe["client"], probe  # nothing wider than the window
    assert probe["box"] is None or probe["box"] <= probe["client"], probe
    assert 'data-ready="1"' in dom
    if width == 1400:
        assert probe["todo"] < 900 - 60, probe  # "What to do" starts on the first screen
    sentence = re.search(r'<h1 class="verdict[^"]*" id="verdict">(.*?)</h1>', dom)
    assert sentence is not None
    assert sentence.group(1).startswith("520,623 of 523,776 paths offload-safe; 1,025 unsafe")
    assert "1,024 nodes in 32 racks, 523,776 paths" in dom
