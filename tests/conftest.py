"""Shared fixtures for every folder: real agent processes on 127.0.0.1 (always stopped
after the test), tokens, and artefact lines for the CI log.

Where a test goes: unit/<package> (one layer, in-process), cli/ (one command as a user
runs it), e2e/ (real agents), security/ (hostile peers and files), env/ (root, qemu,
Slurm, a browser, an RDMA device), bench/ (bench scripts at tiny sizes). Helpers shared by
tests live in support/ (importable by module name: ``from factories import ...``).
Fast lane while developing: ``pytest tests/unit tests/cli``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from agentpool import AgentPool, new_token_file
from paths import KINDS, TESTS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test carries the marker of its folder's kind, wherever it is collected from:
    ``pytest -m unit``, ``-m "e2e or security"``, ``-m "not env"``."""
    for item in items:
        try:
            kind = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return new_token_file(tmp_path)


@pytest.fixture
def token(token_file: Path) -> bytes:
    return token_file.read_bytes().strip()


@pytest.fixture
def agents(tmp_path: Path, token_file: Path) -> Iterator[AgentPool]:
    pool = AgentPool(tmp_path, token_file)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def artefact(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``artefact(line)``: a line printed in the run's summary (CI logs), passed or not.

    Carried in the test's report (``user_properties``), so that a line written on an
    xdist worker reaches the summary the controller prints."""

    def add(line: str) -> None:
        request.node.user_properties.append(("artefact", line))

    return add


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for key, value in getattr(report, "user_properties", ())
        if key == "artefact"
    ]
    if lines:
        terminalreporter.section("artefacts")
        for line in lines:
            terminalreporter.write_line(line)
