"""Where the tests find the repository and their data, from any folder."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
