"""The files of a run directory, named in one place: every command that writes or reads a
run (run, retest, demo, report, gate, diff, resume) goes through ``RunDir``.

    results.jsonl   each measurement the moment it exists (netqual.results.journal)
    run.json        what was asked (inventory, plan, policy): --resume checks it
    results.json    the finished (or interrupted) run
    report.html     the report written beside it
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RESULTS_JSON = "results.json"
RESULTS_JSONL = "results.jsonl"
IDENTITY_JSON = "run.json"
REPORT_HTML = "report.html"
# what makes a directory a run's: a results file, finished or in progress
RESULT_FILES = (RESULTS_JSON, RESULTS_JSONL)


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def results_json(self) -> Path:
        return self.path / RESULTS_JSON

    @property
    def results_jsonl(self) -> Path:
        return self.path / RESULTS_JSONL

    @property
    def identity(self) -> Path:
        return self.path / IDENTITY_JSON

    @property
    def report_html(self) -> Path:
        return self.path / REPORT_HTML
