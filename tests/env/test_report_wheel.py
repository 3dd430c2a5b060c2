"""The templates and the results schema ship inside the wheel: build it, install it into a
scratch directory and render a report from there, away from the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cli_helpers import ROOT
from factories import make_results, write_results

pytestmark = pytest.mark.slow

SCRIPT = """
import sys
from pathlib import Path
import netqual
from netqual.report import html
from netqual.results import load
from netqual.report import write_html
assert netqual.__file__.startswith(sys.argv[1]), netqual.__file__
assert str(html.templates_dir()).startswith(sys.argv[1]), html.templates_dir()
write_html(load(Path(sys.argv[2])), Path(sys.argv[3]))
print("templates from", html.templates_dir())
"""


def test_wheel_contains_templates_and_schema_and_renders(tmp_path: Path) -> None:
    pytest.importorskip("hatchling", reason="hatchling not installed (pip install hatchling)")
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(dist), str(ROOT)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("netqual-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("report.html.j2", "base.html.j2", "diff.html.j2", "_style.css", "_report.js"):
        assert f"netqual/templates/{name}" in names
    assert "netqual/files/schema/results.schema.json" in names
    assert "netqual/gate/default.toml" in names
    assert "netqual/workload/presets/llama-3.1-70b-tp8.toml" in names
    assert "netqual/workload/models/llama-3.1-70b.json" in names

    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
         "--target", str(target), str(wheel)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    results = write_results(
        tmp_path / "results.json", make_results(4, slow_paths=[("gpu03", "stor01", 812.0)])
    )
    out = tmp_path / "report.html"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(target), str(results), str(out)],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert str(target) in run.stdout
    page = out.read_text()
    assert '1 unsafe: gpu03 <span class="nw">-&gt;</span> stor01, p99 812.0\u00a0us' in page
