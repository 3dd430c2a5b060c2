"""The import direction check (python -m netqual.devtools.layers) passes on the tree and
fails, naming file and line, when a lower layer imports a higher one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

from netqual.devtools.layers import check

ROOT = REPO


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = tmp_path / "netqual" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    return tmp_path


def _run_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "netqual.devtools.layers", str(root)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_tree_keeps_the_layer_order() -> None:
    proc = _run_check(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imports point one way; 0 import cycles" in proc.stdout


@pytest.mark.parametrize(
    ("rel", "text", "expected"),
    [
        # statistics must not know how samples travelled
        ("analysis/stats.py", "from netqual.transports.interface import RawBulk\n",
         "netqual.analysis.stats imports netqual.transports.interface: "
         "analysis may not import measure"),
        # the coordinator returns results; the commands write the report
        ("run/coordinator.py", "def f():\n    from netqual.report import write_html\n",
         "netqual.run.coordinator imports netqual.report: run may not import report"),
        # the report shows waivers without importing the gate
        ("report/build.py", "from ..gate.model import Finding\n",
         "netqual.report.build imports netqual.gate.model: report may not import gate"),
        # "from netqual import X" names the submodule X; a package's own layer applies
        ("planning/estimate.py", "from netqual.analysis import interference\n",
         "netqual.planning.estimate imports netqual.analysis: planning may not import analysis"),
        ("agent/wire/protocol.py", "from netqual.agent import server\n",
         "netqual.agent.wire.protocol imports netqual.agent: wire may not import measure"),
        ("model/path.py", "from netqual import results\n",
         "netqual.model.path imports netqual.results: model may not import analysis"),
        # records know nothing of the columns built from them
        ("model/path.py", "from netqual.table.paths import PathTable\n",
         "netqual.model.path imports netqual.table.paths: model may not import table"),
        ("analysis/stats.py", "import rich.console\n",
         "netqual.analysis.stats imports rich.console: rich is for cli, render only"),
        ("fresh/__init__.py", "x = 1\n",
         "netqual.fresh imports netqual.fresh: module has no layer"),
        # the top level keeps __init__ and __main__ only: a new module goes in a room
        ("fresh.py", "x = 1\n",
         "netqual.fresh imports netqual.fresh: a module at the top level of netqual"),
    ],
)  # fmt: skip
def test_a_wrong_import_is_named(tmp_path: Path, rel: str, text: str, expected: str) -> None:
    rooms = ("report", "analysis", "run", "planning", "agent", "model")
    packages = {f"{d}/__init__.py": "" for d in rooms}
    root = _tree(tmp_path, {"__init__.py": "", "agent/wire/__init__.py": "", **packages, rel: text})
    found = [str(v) for v in check(root)]
    assert len(found) == 1, found
    assert expected in found[0]
    assert found[0].startswith(f"{root / 'netqual' / rel}:")


def test_allowed_imports_pass(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "cli/__init__.py": "import typer\nfrom netqual.run.coordinator import run\n",
            "run/__init__.py": "",
            "run/coordinator.py": "from netqual.analysis import stats\n"
            "from .probes import request_probe\n",
            "run/probes.py": "from netqual.agent.wire import protocol\n",
            "agent/__init__.py": "",
            "agent/wire/__init__.py": "",
            "agent/wire/protocol.py": "from netqual.base.errors import X\n",
            "analysis/__init__.py": "",
            "render/terminal.py": "from rich.table import Table\nfrom netqual.gate import x\n",
            "analysis/stats.py": "from netqual.model.path import RawBulk\n",
            "model/__init__.py": "",
            "model/path.py": "from netqual.base.units import KIB\n",
            "table/paths.py": "from netqual.model.path import PathResult\n",
        },
    )
    assert check(root) == []


def test_the_command_fails_on_a_violation(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "analysis/__init__.py": "",
            "analysis/stats.py": "import netqual.agent\n",
        },
    )
    proc = _run_check(root)
    assert proc.returncode == 1
    assert "stats.py:1: netqual.analysis.stats imports netqual.agent" in proc.stdout


@pytest.mark.parametrize(
    "files",
    [
        {  # plain imports
            "table/columns.py": "from netqual.table.paths import PathTable\n",
            "table/paths.py": "from netqual.table.columns import Column\n",
        },
        {  # one side only for the type checker: still a cycle
            "table/columns.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from netqual.table.paths import PathTable\n",
            "table/paths.py": "from netqual.table.columns import Column\n",
        },
        {  # three modules, one lazy import
            "report/view.py": "from netqual.report.grid import pair_rows\n",
            "report/grid.py": "from netqual.report.workload import WorkloadView\n",
            "report/workload.py": "def f():\n    from netqual.report import view\n",
        },
    ],
)
def test_an_import_cycle_fails_the_check(tmp_path: Path, files: dict[str, str]) -> None:
    rooms = {"report/__init__.py": "", "table/__init__.py": ""}
    root = _tree(tmp_path, {"__init__.py": "", **rooms, **files})
    found = [str(v) for v in check(root)]
    assert len(found) == 1, found
    assert "import cycle netqual." in found[0]
    proc = _run_check(root)
    assert proc.returncode == 1
    assert "import cycle" in proc.stdout


def test_a_submodule_importing_its_own_package_is_no_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "results/__init__.py": "from netqual.results.encode import write\n",
            "results/encode.py": "from netqual.results import summary\n",
            "results/summary.py": "x = 1\n",
        },
    )
    assert check(root) == []
