"""Shared scenario for gate tests: a small run with one unsafe, one marginal and one
failed path, a profile that exercises every rule kind, and a baseline."""

from __future__ import annotations

from pathlib import Path

from factories import make_results, write_results

from netqual.table.run import Results

PROFILE = """\
[profile]
name = "signoff-test"
description = "every rule kind once"
metric = "p99"

[limits]
max_unsafe = 0
max_marginal = 1
min_safe_fraction = 0.9
max_metric_us = 500
min_samples = 10000
no_errors = true

[[scope]]
name = "storage"
roles = ["storage"]
max_unsafe = 0
max_metric_us = 150

[[scope]]
name = "rack r02"
racks = ["r02"]
max_unsafe = 0

[baseline]
max_p99_increase_pct = 50
min_delta_us = 5
no_class_drop = true
no_missing_paths = true

[[waiver]]
src = "gpu02"
dst = "gpu04"
until = 2026-12-31
reason = "cable replacement scheduled"
owner = "netops@example.org"

[[waiver]]
src = "gpu01"
dst = "gpu03"
until = 2026-11-01
reason = "old firmware"
owner = "alice"
"""


def current() -> Results:
    return make_results(
        6,
        slow_paths=[
            ("gpu03", "stor01", 812.0),
            ("gpu02", "gpu04", 320.0),
            ("gpu01", "gpu03", 260.0),
        ],
        error_paths=0,
    )


def baseline() -> Results:
    return make_results(6, seed=3, all_safe=True)


def write_case(tmp: Path) -> tuple[Path, Path, Path]:
    results = write_results(tmp / "results.json", current())
    base = write_results(tmp / "baseline.json", baseline())
    profile = tmp / "profile.toml"
    profile.write_text(PROFILE)
    return results, base, profile
