"""The campaign store under attack from the same host, and broken in every way a file can be.

The store (history.duckdb) is opened by DuckDB by name, as is its write-ahead log: planted
symlinks are refused before DuckDB runs, in a directory nobody else can write; every
failure is one line naming the file, exit 2, never a traceback and never a network fetch
(a foreign file must not make DuckDB download an extension). Store and tokens are 0600;
other outputs take the umask's mode. Writers wait for readers (and each other) instead of
failing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from agentpool import cli_env
from cli_helpers import netqual, run_in_process
from factories import make_results, write_results

from netqual.base.errors import CampaignError
from netqual.campaign.store import open_store
from netqual.model.verdict import Verdict

STORE = "history.duckdb"


@pytest.fixture
def camp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    """A campaign directory (mode 0700) with one run beside it, not yet added."""
    d = tmp_path / "c"
    assert (
        run_in_process(["campaign", "init", str(d)], tmp_path, monkeypatch, capsys).returncode == 0
    )
    d.chmod(0o700)
    _write_run(tmp_path / "run1", make_results(4))
    return d


def _write_run(d: Path, results: object) -> None:
    d.mkdir()
    write_results(d / "results.json", results)  # type: ignore[arg-type]


Cli = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """A command through the CLI's entry point in this process (exit code, stdout, stderr),
    in tmp_path: the store's refusals are the subject, not a process start. The tests that
    need a process of their own (a umask, HOME, writers at once) start one."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        r = run_in_process(list(args), tmp_path, monkeypatch, capsys)
        return subprocess.CompletedProcess(args, r.returncode, r.stdout, r.stderr)

    return run


def _add(cli: Cli, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("campaign", "add", "c", "run1", *extra)


def _one_line_exit_2(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) <= 2, r.stderr  # the error (and at most a hint)
    for needle in needles:
        assert needle in r.stderr, r.stderr


def test_a_planted_wal_symlink_is_not_written_through(camp: Path, tmp_path: Path, cli: Cli) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    assert _add(cli, "--week", "1").returncode == 0
    (camp / f"{STORE}.wal").symlink_to(victim)
    r = cli("campaign", "gate", "c", "--milestone", "week2")
    _one_line_exit_2(r, f"{STORE}.wal", "symlink")
    assert victim.read_text() == "precious\n"


def test_a_dangling_store_symlink_creates_nothing_at_its_target(
    camp: Path, tmp_path: Path, cli: Cli
) -> None:
    target = tmp_path / "elsewhere.duckdb"
    (camp / STORE).symlink_to(target)
    _one_line_exit_2(_add(cli), STORE, "symlink")
    assert not target.exists()


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o1777])
def test_a_directory_others_can_write_is_refused(camp: Path, cli: Cli, mode: int) -> None:
    """Sticky or not: in a sticky directory anyone can still create the log's name first."""
    camp.chmod(mode)
    _one_line_exit_2(_add(cli), "c: is writable by others", "chmod go-w c")
    assert not (camp / STORE).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory away")
def test_a_directory_of_another_user_is_refused(camp: Path, cli: Cli) -> None:
    os.chown(camp, 4321, -1)
    _one_line_exit_2(_add(cli), "belongs to another user (uid 4321)")


def test_the_store_is_private_and_outputs_follow_the_umask(camp: Path, tmp_path: Path) -> None:
    def under_umask(mask: int, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**cli_env(), "NETQUAL_WIDTH": "100"}
        return subprocess.run(
            [sys.executable, "-m", "netqual", *args], cwd=tmp_path, env=env, text=True,
            capture_output=True, check=False, timeout=120, preexec_fn=lambda: os.umask(mask),
        )  # fmt: skip

    assert under_umask(0o022, "campaign", "add", "c", "run1", "--week", "1").returncode == 0
    assert stat.S_IMODE((camp / STORE).stat().st_mode) == 0o600
    assert under_umask(0o077, "report", "run1", "--html", "r77.html").returncode == 0
    assert stat.S_IMODE((tmp_path / "r77.html").stat().st_mode) == 0o600
    assert under_umask(0o022, "report", "run1", "--html", "r22.html").returncode == 0
    assert stat.S_IMODE((tmp_path / "r22.html").stat().st_mode) == 0o644


def _edit(path: Path, sql: str) -> None:
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


BROKEN: dict[str, Callable[[Path], object]] = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:100]),
    "empty": lambda p: p.write_bytes(b""),
    "schema abc": lambda p: _edit(p, "UPDATE meta SET value = 'abc'"),
    "schema 0": lambda p: _edit(p, "UPDATE meta SET value = '0'"),
    "schema -1": lambda p: _edit(p, "UPDATE meta SET value = '-1'"),
    "dropped table": lambda p: _edit(p, "DROP TABLE gates"),
    "changed column": lambda p: _edit(p, "ALTER TABLE paths DROP COLUMN p99_us"),
    "no meta": lambda p: _edit(p, "DROP TABLE meta"),
}


@pytest.mark.parametrize("how", list(BROKEN))
def test_a_broken_store_is_one_line_naming_the_file(camp: Path, cli: Cli, how: str) -> None:
    assert cli("campaign", "add", "c", "run1", "--week", "1").returncode == 0
    BROKEN[how](camp / STORE)
    for args in (
        ["campaign", "report", "c"],
        ["campaign", "add", "c", "run1"],
        ["campaign", "gate", "c", "--milestone", "week2"],
        ["export", "c", "--openmetrics"],
    ):
        _one_line_exit_2(cli(*args), STORE)


def test_an_sqlite_file_named_history_duckdb_fetches_nothing(camp: Path, tmp_path: Path) -> None:
    """Refused from its header, before DuckDB reads it (DuckDB would try to download its
    sqlite extension); the extension directory stays empty."""
    con = sqlite3.connect(camp / STORE)
    con.execute("CREATE TABLE meta (key, value)")
    con.commit()
    con.close()
    home = tmp_path / "home"
    home.mkdir()
    env_home = {"HOME": str(home)}
    r = subprocess.run(
        [sys.executable, "-m", "netqual", "campaign", "report", "c"], cwd=tmp_path,
        env={**cli_env(), **env_home}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    _one_line_exit_2(r, STORE, "an SQLite database")
    assert not (home / ".duckdb").exists()


def test_an_absurd_week_is_refused_before_the_store(camp: Path, cli: Cli) -> None:
    _one_line_exit_2(_add(cli, "--week", "2147483648"), "--week", "1-10,000")
    r = cli("campaign", "init", "c2", "--weeks", "2147483648")
    _one_line_exit_2(r, "--weeks")


def test_a_full_disk_at_commit_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's own failures inside a command (here DuckDB's at COMMIT, as a full disk
    makes it) become a CampaignError naming the file (``guarded``)."""
    from netqual.campaign import store as store_mod

    s = open_store(tmp_path / STORE, create=True)

    class FullDisk:
        def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
            self.con = con

        def execute(self, sql: str, *args: object) -> object:
            if sql == "COMMIT":
                raise duckdb.IOException("Could not write file: No space left on device")
            return self.con.execute(sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self.con, name)

    real = s.con
    s.con = FullDisk(real)  # type: ignore[assignment]
    try:
        with pytest.raises(CampaignError) as err, store_mod.guarded(tmp_path / STORE):
            s.add(make_results(4), source=tmp_path, week=1)
    finally:
        s.con = real
        s.close()
    assert STORE in str(err.value) and "No space left" in str(err.value)
    assert "\n" not in str(err.value)


def test_writers_wait_for_a_reader_and_for_each_other(camp: Path, tmp_path: Path) -> None:
    """A reader holding the store (a scrape, another user's session) delays `campaign add`
    instead of failing it; two adds at once both land (each in a process of its own)."""
    assert netqual("campaign", "add", "c", "run1", "--week", "1", cwd=tmp_path).returncode == 0
    hold = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], "
         "read_only=True); print('held', flush=True); time.sleep(3); c.close()",
         str(camp / STORE)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert hold.stdout is not None and hold.stdout.readline().strip() == "held"
    _write_run(tmp_path / "run2", make_results(4, seed=8, started_at="2026-12-01T00:00:00+00:00"))
    _write_run(tmp_path / "run3", make_results(4, seed=9, started_at="2026-12-02T00:00:00+00:00"))
    results: dict[str, int] = {}

    def add(run: str, week: str) -> None:
        results[run] = netqual("campaign", "add", "c", run, "--week", week, cwd=tmp_path).returncode

    threads = [threading.Thread(target=add, args=a) for a in (("run2", "2"), ("run3", "3"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    hold.wait(timeout=30)
    assert results == {"run2": 0, "run3": 0}
    s = open_store(camp / STORE, read_only=True)
    assert sorted(r.week for r in s.runs()) == [1, 2, 3]  # in whichever order they won
    s.close()


def test_stored_verdicts_are_judged_again_from_the_values(
    camp: Path, tmp_path: Path, cli: Cli
) -> None:
    """A results file calling a 900 ms p99 offload-safe: the trend report and the exporter
    say unsafe (the campaign's policy judges every path as it enters the store)."""
    doc = json.loads((tmp_path / "run1" / "results.json").read_text())
    first = doc["paths"][0]
    first["rtt_us"]["p99"] = first["rtt_us"]["p999"] = first["rtt_us"]["max"] = 900_000.0
    first["verdict"] = Verdict.SAFE.value
    (tmp_path / "run1" / "results.json").write_text(json.dumps(doc))
    assert _add(cli, "--week", "1").returncode == 0
    trend = json.loads(cli("campaign", "report", "c", "--json").stdout)
    week = trend["weeks"][0]
    want_unsafe = sum(p["verdict"] == "unsafe" for p in doc["paths"]) + 1
    assert week["unsafe"] == want_unsafe, week
    text = cli("export", "c", "--openmetrics").stdout
    src, dst = first["src"], first["dst"]
    line = next(x for x in text.splitlines() if x.startswith("netqual_path_verdict{")
                and f'src="{src}"' in x and f'dst="{dst}"' in x)  # fmt: skip
    assert line.endswith(" 2.0"), line
