"""Helpers shared by tests (from test_hostile_text.py)."""

from __future__ import annotations

import json
from pathlib import Path

from factories import make_results, write_results

HOSTILE = (
    "[/x][link=https://evil.example/]click[/link][bold]"
    "\x1b]0;owned\x07\x1b[2J\u2028forged line\u2029\u202eevil\u202c\u2066\x00\x08\x7f\r:smile:"
)


# What must never reach a terminal, a log or an XML file raw.
RAW = ("\x1b", "\x07", "\u2028", "\u2029", "\u202e", "\u202c", "\u2066", "\x00", "\x08", "\x7f")


def assert_literal(text: str) -> None:
    assert "Traceback" not in text, text[-2000:]
    for c in RAW:
        assert c not in text, f"raw {c!r} in output"


def hostile_results(path: Path) -> Path:
    """A run whose node 'gpu02' is named HOSTILE, and one failed path whose error is HOSTILE."""
    results = make_results(4, error_paths=1)
    write_results(path, results)
    doc = json.loads(path.read_text())
    text = json.dumps(doc).replace('"gpu02"', json.dumps(HOSTILE))
    doc = json.loads(text)
    for p in doc["paths"]:
        if p.get("error"):
            p["error"] = HOSTILE
    path.write_text(json.dumps(doc))
    return path
