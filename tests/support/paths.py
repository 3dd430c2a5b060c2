"""Where the tests find the repository and their data, from any folder."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
# The folders of tests by kind, each its own pytest marker (set in tests/conftest.py): the
# fast lane first, then the lanes with real processes, then the environment's.
KINDS = ("unit", "cli", "e2e", "security", "bench", "env")
