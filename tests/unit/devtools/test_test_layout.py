"""The test tree keeps its layout (README, Development): every test file in a folder of its
kind, basenames unique across folders (pytest imports test modules by basename, so two
``test_x.py`` in different folders fail the session with an import file mismatch), and no
test importing another test module or a conftest (shared helpers live in tests/support)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
import tomllib
from paths import KINDS, TESTS


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_file_sits_in_a_folder_of_its_kind() -> None:
    misplaced = [
        str(p.relative_to(TESTS))
        for p in _test_files()
        if p.relative_to(TESTS).parts[0] not in KINDS
    ]
    assert misplaced == [], f"move these into tests/<kind>/: {misplaced}"
    unit = [p for p in _test_files() if p.relative_to(TESTS).parts[0] == "unit"]
    assert all(len(p.relative_to(TESTS).parts) == 3 for p in unit), "tests/unit/<package>/"


def test_test_basenames_are_unique() -> None:
    counts = Counter(p.name for p in _test_files())
    assert [name for name, n in counts.items() if n > 1] == []


def test_no_test_imports_another_test_module_or_a_conftest() -> None:
    bad = []
    for path in [*_test_files(), *sorted((TESTS / "support").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            bad += [
                f"{path.relative_to(TESTS)}: {n}"
                for n in names
                if n.split(".")[0].startswith("test_") or n.split(".")[0] == "conftest"
            ]
    assert bad == [], bad


def test_each_test_carries_the_marker_of_its_folder(request: pytest.FixtureRequest) -> None:
    """One hook (tests/conftest.py) marks every folder's tests: ``pytest -m unit`` is the
    folder tests/unit, the lanes of .ci/run select by it."""
    assert request.node.get_closest_marker("unit") is not None
    assert [k for k in KINDS if k != "unit" and request.node.get_closest_marker(k)] == []


def test_pytest_collects_every_kind_the_fast_lane_first() -> None:
    """``pytest -q`` (README's command) collects testpaths in order: unit and cli first, so
    a unit regression shows in minutes, not after the environment's tests."""
    config = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    testpaths = config["tool"]["pytest"]["ini_options"]["testpaths"]
    assert testpaths == [f"tests/{kind}" for kind in KINDS]
    assert KINDS[:2] == ("unit", "cli")
    on_disk = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.rglob("test_*.py"))}
    assert on_disk == set(KINDS)
