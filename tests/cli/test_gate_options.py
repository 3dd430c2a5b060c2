"""`report` and `run` take --profile and --baseline: the run's report.html carries the
gate's verdict on its first screen, and a profile that compares with an earlier run
without --baseline is a clear exit 2 (before anything is measured), not a missing line."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import netqual
from factories import make_results, write_results

REQUALIFY = """[profile]
name = "requalify"
[limits]
max_unsafe = 0
[baseline]
required = true
no_class_drop = true
"""


def test_report_judges_against_the_baseline(tmp_path: Path) -> None:
    write_results(tmp_path / "old.json", make_results(6))
    write_results(tmp_path / "new.json", make_results(6, slow_nodes=["gpu03"]))
    (tmp_path / "requalify.toml").write_text(REQUALIFY)
    missing = netqual(
        "report", "new.json", "--profile", "requalify.toml", "--html", "r.html", cwd=tmp_path
    )
    assert missing.returncode == 2
    assert (
        "--baseline" in missing.stderr
        and "'requalify' compares with an earlier run" in missing.stderr
    )
    assert not (tmp_path / "r.html").exists()
    r = netqual(
        "report", "new.json", "--profile", "requalify.toml", "--baseline", "old.json",
        "--html", "r.html", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "r.html").read_text()
    assert '<div class="gate fail" id="gate">Gate <b>requalify</b>: <b>FAIL</b>' in page
    assert "no_class_drop" in page and "max_unsafe" in page
    alone = netqual("report", "new.json", "--baseline", "old.json", cwd=tmp_path)
    assert alone.returncode == 2 and "only used with --profile" in alone.stderr


def test_run_checks_profile_and_baseline_before_measuring(tmp_path: Path) -> None:
    (tmp_path / "inventory.toml").write_text(
        '[[node]]\nname = "a"\naddress = "127.0.0.1"\nport = 1\n'
        '[[node]]\nname = "b"\naddress = "127.0.0.1"\nport = 2\n'
    )
    (tmp_path / "requalify.toml").write_text(REQUALIFY)
    r = netqual(
        "run", "inventory.toml", "--out", "run1", "--insecure", "--profile", "requalify.toml",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--baseline" in r.stderr
    gone = netqual(
        "run", "inventory.toml", "--out", "run1", "--insecure", "--profile", "requalify.toml",
        "--baseline", "nowhere", cwd=tmp_path,
    )  # fmt: skip
    assert gone.returncode == 2 and "nowhere" in gone.stderr
    assert not (tmp_path / "run1").exists()  # nothing was started
