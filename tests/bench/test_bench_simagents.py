"""bench/simagents.py runs its coordinator from a frozen copy of the package that has the
report's templates (a copy without them once failed a 1,024-agent run's HTML step after
results.json, exit 1), and says so in its exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from paths import REPO

sys.path.insert(0, str(REPO / "bench"))
from simagents import freeze  # bench/simagents.py


def test_the_frozen_copy_imports_from_itself_and_renders_every_template(tmp_path: Path) -> None:
    dest = freeze(tmp_path / "package")
    probe = (
        "import netqual; from netqual.report.html import environment, templates_dir; "
        "print(netqual.__file__); print(templates_dir()); "
        "print(environment().get_template('report.html.j2').name)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(dest)},
        cwd=dest,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    module, templates, loaded = proc.stdout.splitlines()
    assert loaded == "report.html.j2"
    assert Path(module).is_relative_to(dest) and Path(templates) == dest / "netqual/templates"
    shipped = {p.name for p in (REPO / "templates").glob("*.j2")}
    assert "report.html.j2" in shipped
    assert {p.name for p in Path(templates).glob("*.j2")} == shipped


def test_simagents_run_writes_the_html_report_and_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench/simagents.py"), "--agents", "4", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,  # the checkout first on sys.path: the coordinator must still use the copy
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    frozen = next(ln for ln in proc.stdout.splitlines() if ln.startswith("coordinator runs from"))
    assert not Path(frozen.split()[3]).is_relative_to(REPO), frozen
    assert "last run finished with exit 0: True" in proc.stdout
    assert "every pair exactly once in results.json and results.jsonl: True (6, 6)" in proc.stdout
    assert (out / "report.html").stat().st_size > 0
