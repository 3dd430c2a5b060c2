"""Helpers shared by tests (from test_report_browser.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

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
