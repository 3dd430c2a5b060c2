"""Helpers shared by tests (from test_report_browser.py)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


CLASS_RGB = {
    "safe": (0x1A, 0x98, 0x50),
    "marginal": (0xF0, 0xA2, 0x02),
    "unsafe": (0xD7, 0x30, 0x27),
}


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.skip("headless chromium not installed (Debian package `chromium`)")
    profile = tmp / f"chromium-profile-{len(list(tmp.iterdir()))}"
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)


def page_errors(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if "CONSOLE" in line and ("Error" in line or "Uncaught" in line)
    ]


# layout_probe.js, appended to a copy of a page: once its own script ran, it measures what
# a reader would see at the window's width and leaves the measurements where --dump-dom
# shows them (<body data-layout="...">). "broken": a number with its unit, a "->" or a word
# of a table cell that wraps over two lines ("3,5 / 58 / us", "rem/ote"); "clipped": a
# table cell whose text is cut, or an SVG label outside its picture ("r031" above the
# matrix); "tops": where the first screen's parts end or start, in page pixels.
LAYOUT_PROBE = "<script>\n" + (Path(__file__).parent / "layout_probe.js").read_text() + "</script>"


def layout(page: Path, width: int, height: int = 900) -> dict[str, Any]:
    """LAYOUT_PROBE's measurements of ``page`` in a ``width`` x ``height`` window."""
    probed = page.with_name(f"{page.stem}.probed.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", LAYOUT_PROBE + "</body>"))
    r = chromium(page.parent, f"--window-size={width},{height}", "--dump-dom", probed.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert page_errors(r.stderr) == []
    found = re.search(r'data-layout="([^"]*)"', r.stdout)
    assert found is not None, "the layout probe did not run"
    measured: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return measured
