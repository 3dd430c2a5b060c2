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
    """A run whose node 'gpu02' sits in a rack named HOSTILE and carries HOSTILE labels, and
    one failed path whose error and reasons are HOSTILE. Node names themselves meet the
    inventory's rules when a results file is read (a hostile name is refused at the door:
    tests/unit/results/test_results_nodes.py); everything free-form reaches the outputs."""
    results = make_results(4, error_paths=1)
    write_results(path, results)
    doc = json.loads(path.read_text())
    for n in doc["nodes"]:
        if n["name"] == "gpu02":
            n["rack"] = HOSTILE
            n["labels"] = {"site": HOSTILE}
    for p in doc["paths"]:
        if p.get("error"):
            p["error"] = HOSTILE
            p["reasons"] = [HOSTILE]
    path.write_text(json.dumps(doc))
    return path


def hostile_named(path: Path) -> Path:
    """A run whose node 'gpu02' is named HOSTILE."""
    write_results(path, make_results(4))
    path.write_text(path.read_text().replace('"gpu02"', json.dumps(HOSTILE)))
    return path
