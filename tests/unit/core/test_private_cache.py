"""The per-user cache (files.cachedir) and the report's compiled templates kept in it:
a folder is used only when it is this user's own, and a report read back from the cache
is the report compiled afresh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from netqual.files.cachedir import cache_root, private_dir
from netqual.report.html import TEMPLATE_CACHE_ENV, template_cache

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "tests" / "data" / "demo-lab" / "results.json"


def test_a_missing_folder_is_made_private(tmp_path: Path) -> None:
    got = private_dir(tmp_path / "a" / "templates")
    assert got == tmp_path / "a" / "templates"
    assert got.stat().st_mode & 0o777 == 0o700


def test_a_folder_others_can_write_to_is_no_cache(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert private_dir(shared) is None
    shared.chmod(0o700)
    assert private_dir(shared) == shared


def test_a_link_or_a_file_is_no_cache(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "file").write_text("x")
    assert private_dir(tmp_path / "link") is None
    assert private_dir(tmp_path / "file") is None
    assert private_dir(tmp_path / "file" / "below") is None  # cannot be made


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder owned by another user needs root")
def test_a_folder_of_another_user_is_no_cache(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    assert private_dir(theirs) is None


def test_the_template_cache_follows_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(TEMPLATE_CACHE_ENV, raising=False)
    assert cache_root() == tmp_path / "xdg" / "netqual"
    default = template_cache()
    assert isinstance(default, jinja2.FileSystemBytecodeCache)
    assert default.directory == str(tmp_path / "xdg" / "netqual" / "templates")
    monkeypatch.setenv(TEMPLATE_CACHE_ENV, str(tmp_path / "mine"))
    mine = template_cache()
    assert isinstance(mine, jinja2.FileSystemBytecodeCache)
    assert mine.directory == str(tmp_path / "mine")
    monkeypatch.setenv(TEMPLATE_CACHE_ENV, "off")
    assert template_cache() is None


def test_a_report_from_cached_templates_is_the_report_compiled_afresh(tmp_path: Path) -> None:
    """Three processes: without a cache, then filling one, then reading it back."""
    cache = tmp_path / "cache"
    pages = {}
    filled: dict[str, int] = {}
    for name, where in (("fresh", "off"), ("filled", str(cache)), ("cached", str(cache))):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NETQUAL_WIDTH": "100"}
        env[TEMPLATE_CACHE_ENV] = where
        out = tmp_path / f"{name}.html"
        r = subprocess.run(
            [sys.executable, "-m", "netqual", "report", str(RESULTS), "--html", str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert r.returncode == 0, r.stderr
        pages[name] = out.read_text()
        entries = {p.name: p.stat().st_mtime_ns for p in cache.glob("*")}
        if name == "fresh":
            assert entries == {}
        else:
            assert entries and all(n.startswith("__jinja2_") for n in entries), entries
        if name == "cached":  # read back, not compiled and written again
            assert entries == filled, (entries, filled)
        filled = entries
    assert pages["fresh"] == pages["filled"] == pages["cached"]
