"""The campaign's history store: one DuckDB file (``history.duckdb``) holding every run
added to the campaign, one row per path per run, for the trend report, the milestone gates
and the exporter. Schema and versions: docs/campaign.md.

DuckDB is a columnar, embedded analytic database: 10 runs of a 1,024-node mesh are five
million path rows, and the questions asked of them (per week, per tier, per rack pair,
best week per path) are scans and group-bys, which it runs vectorised on all cores. Paths
go in straight from the ``PathTable`` columns (numpy arrays registered as a relation), not
row by row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import functools
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from netqual.analysis import comparable
from netqual.analysis.comparable import Difference, Setup
from netqual.analysis.plausible import rejudge
from netqual.base.errors import CampaignError, OutputError
from netqual.campaign.stored import insert_paths
from netqual.codec.plan import plan_from_dict, plan_to_dict
from netqual.files.outfiles import check_own_file, check_private_dir
from netqual.model.policy import Policy, PolicyFieldError, Waiver
from netqual.model.stats import Metric
from netqual.results import policy_to_dict
from netqual.results.decode import policy_from_dict
from netqual.table.paths import verdict_counts
from netqual.table.run import Results

SCHEMA_VERSION = 4

# The state of a path in a week: its last measurement that week (a retest overrides the
# run it re-measured). ``a``/``b`` is the pair in name order: a re-run that measured the
# pair from the other end lines up. Kept as a table (``week_paths``), refreshed for the
# week a run is added to, so that the report, the gate and the exporter read one row per
# path and week instead of ranking every row of every run each time.
WEEK_PATHS = "week_paths"
_LATEST_OF_WEEKS = """
    SELECT * EXCLUDE (rn) FROM (
        SELECT p.*, r.week,
               row_number() OVER (PARTITION BY r.week, p.a, p.b ORDER BY p.seq DESC) AS rn
        FROM paths p JOIN runs r USING (seq) {where})
    WHERE rn = 1"""
# Each older version's upgrade to the next, in order: a newer netqual reads an older store.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 1 -> 2: the week view became a table, built here from the runs already stored
    1: (f"CREATE TABLE week_paths AS {_LATEST_OF_WEEKS.format(where='')} ORDER BY week",),
    # 2 -> 3: paths keep their transport and their 95% intervals (the gate's noise note on
    # a stored baseline). A stored path's transport is its run's (the only one a run of
    # these versions measured with); older paths have no intervals (NULL, as before).
    2: (
        "ALTER TABLE paths ADD COLUMN transport VARCHAR",
        "UPDATE paths SET transport = runs.transport FROM runs WHERE runs.seq = paths.seq",
        *(
            f"ALTER TABLE paths ADD COLUMN ci95_{m}_{end}_us DOUBLE"
            for m in ("p50", "p90", "p99", "p999")
            for end in ("low", "high")
        ),
        "DROP TABLE week_paths",
        f"CREATE TABLE week_paths AS {_LATEST_OF_WEEKS.format(where='')} ORDER BY week",
    ),
    # 3 -> 4: each run's probe plan (JSON, as results.json has it), so that a later run can
    # be held to the same ping-pong size and chunk set; NULL for runs added before (or a
    # file that recorded no plan): not judged on those two.
    3: ("ALTER TABLE runs ADD COLUMN plan VARCHAR",),
}

_SCHEMA = (
    "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
    """CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, seq INTEGER NOT NULL, week INTEGER NOT NULL,
        source VARCHAR NOT NULL, started_at VARCHAR NOT NULL, finished_at VARCHAR NOT NULL,
        complete BOOLEAN NOT NULL, preliminary BOOLEAN NOT NULL, transport VARCHAR NOT NULL,
        metric VARCHAR NOT NULL, policy VARCHAR NOT NULL, nodes VARCHAR NOT NULL,
        n_nodes INTEGER NOT NULL, n_paths INTEGER NOT NULL, n_safe INTEGER NOT NULL,
        n_marginal INTEGER NOT NULL, n_unsafe INTEGER NOT NULL,
        interference_p99_ratio DOUBLE, interference_exceeds BOOLEAN,
        retest_of VARCHAR, forced BOOLEAN NOT NULL, added_at VARCHAR NOT NULL)""",
    """CREATE TABLE paths (
        seq INTEGER NOT NULL, a VARCHAR NOT NULL, b VARCHAR NOT NULL,
        src VARCHAR NOT NULL, dst VARCHAR NOT NULL, src_rack VARCHAR, dst_rack VARCHAR,
        tier VARCHAR NOT NULL, verdict TINYINT NOT NULL, workload_verdict TINYINT,
        samples BIGINT NOT NULL, p50_us DOUBLE, p99_us DOUBLE, p999_us DOUBLE,
        goodput_gbps DOUBLE, error BOOLEAN NOT NULL)""",
    "CREATE TABLE suspects (seq INTEGER NOT NULL, kind VARCHAR NOT NULL, subject VARCHAR NOT NULL)",
    """CREATE TABLE gates (
        seq INTEGER NOT NULL, milestone VARCHAR NOT NULL, profile VARCHAR NOT NULL,
        passed BOOLEAN NOT NULL, failed_rules VARCHAR NOT NULL, judged_on DATE NOT NULL,
        PRIMARY KEY (seq, milestone))""",
    """CREATE TABLE waivers (
        milestone VARCHAR NOT NULL, src VARCHAR NOT NULL, dst VARCHAR NOT NULL,
        until DATE NOT NULL, owner VARCHAR NOT NULL, reason VARCHAR NOT NULL)""",
)


@dataclass(frozen=True)
class RunRow:
    run_id: str
    seq: int
    week: int
    source: str
    started_at: str
    complete: bool
    n_paths: int
    counts: tuple[int, int, int]  # offload-safe, marginal, unsafe
    retest_of: str | None  # run_id


@dataclass(frozen=True)
class Added:
    run: RunRow
    new: bool  # False: the store already had this run (nothing changed)
    # added anyway (--allow-incomparable): what it does not share with the campaign's first run
    incomparable: tuple[Difference, ...] = ()


def run_id_of(results: Results) -> str:
    """What makes a run the same run when added twice: its start, its coordinator, its
    nodes, how many paths it has and whether it finished."""
    ident = {
        "started_at": results.run.started_at,
        "finished_at": results.run.finished_at,
        "host": dict(results.run.host),
        "nodes": [n.name for n in results.nodes],
        "paths": len(results.paths),
        "complete": results.run.complete,
    }
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


class Store:
    def __init__(
        self, con: duckdb.DuckDBPyConnection, path: Path, umask: int | None = None
    ) -> None:
        self.con = con
        self.path = path
        self._umask = umask  # the process's own, restored on close (a writer's: 077)

    # -- runs -------------------------------------------------------------------------

    def runs(self) -> tuple[RunRow, ...]:
        rows = self.con.execute(
            "SELECT run_id, seq, week, source, started_at, complete, n_paths, n_safe,"
            " n_marginal, n_unsafe, retest_of FROM runs ORDER BY seq"
        ).fetchall()
        return tuple(
            RunRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], (r[7], r[8], r[9]), r[10])
            for r in rows
        )

    def policy(self) -> Policy | None:
        """The campaign's policy: its first run's (every run added without --force has it)."""
        row = self.con.execute("SELECT policy FROM runs ORDER BY seq LIMIT 1").fetchone()
        if row is None:
            return None
        try:
            return policy_from_dict(json.loads(row[0]))
        except (PolicyFieldError, ValueError, TypeError, OverflowError, AttributeError) as err:
            raise CampaignError(
                str(self.path), f"the first run's stored policy is unusable: {err}", "runs.policy"
            ) from err

    def run_by_source(self, source: Path) -> RunRow | None:
        return next((r for r in self.runs() if Path(r.source) == source), None)

    def add(
        self,
        results: Results,
        *,
        source: Path,
        week: int,
        retest_of: str | None = None,
        force: bool = False,
        allow_incomparable: bool = False,
        added_at: dt.datetime | None = None,
    ) -> Added:
        """Ingest one run. Adding the same run again changes nothing (``Added.new`` False);
        a run of other nodes or another policy than the campaign's first run is refused
        unless ``force``, one that differs from it in transport, ping-pong size, policy
        metric or chunk set (``netqual.analysis.comparable``) unless ``allow_incomparable``."""
        run_id = run_id_of(results)
        known = next((r for r in self.runs() if r.run_id == run_id), None)
        if known is not None:
            return Added(known, new=False)
        policy = json.dumps(policy_to_dict(results.run.policy), sort_keys=True)
        nodes = sorted(n.name for n in results.nodes)
        if not force:
            self._check_belongs(str(source), policy, nodes, retest=retest_of is not None)
        found = self._check_comparable(results, source, allow_incomparable)
        seq = int(self.con.execute("SELECT coalesce(max(seq), 0) + 1 FROM runs").fetchone()[0])  # type: ignore[index]
        # The file's verdicts are not taken on trust: each path keeps the worse of its own
        # and the campaign's policy's judgement of its values (a forced run of another
        # policy too), so the trend and the exporter show what the values say.
        results = dataclasses.replace(
            results, paths=rejudge(results.paths, self.policy() or results.run.policy)
        )
        counts = list(verdict_counts(results.paths.verdict).values())  # in VERDICTS order
        inter = results.interference
        with self._transaction():
            self.con.execute(
                f"INSERT INTO runs VALUES ({', '.join('?' * 23)})",
                [
                    run_id, seq, week, str(source), results.run.started_at,
                    results.run.finished_at, results.run.complete, results.preliminary,
                    results.run.transport, results.run.policy.metric.value, policy,
                    json.dumps(nodes), len(results.nodes), len(results.paths), *counts,
                    inter.p99_ratio if inter else None, inter.exceeds if inter else None,
                    retest_of, force, (added_at or dt.datetime.now(dt.timezone.utc)).isoformat(),
                    json.dumps(plan_to_dict(results.run.plan), sort_keys=True)
                    if results.run.plan_recorded else None,
                ],
            )  # fmt: skip
            insert_paths(self.con, seq, results.paths, {n.name: n.rack for n in results.nodes})
            self._refresh_week(seq, week)
            if results.suspects:
                self.con.executemany(
                    "INSERT INTO suspects VALUES (?, ?, ?)",
                    [[seq, s.kind.value, s.subject] for s in results.suspects],
                )
        return Added(next(r for r in self.runs() if r.seq == seq), new=True, incomparable=found)

    def _check_comparable(
        self, results: Results, source: Path, allow: bool
    ) -> tuple[Difference, ...]:
        """The run against the campaign's first run (its setup as the store kept it)."""
        first = self.con.execute(
            "SELECT transport, metric, plan, source FROM runs ORDER BY seq LIMIT 1"
        ).fetchone()
        if first is None:
            return ()
        transport, metric, plan_json, first_source = first
        plan = None if plan_json is None else plan_from_dict(json.loads(plan_json))
        old = Setup.made(transport, Metric(metric), plan)
        return comparable.check(
            Setup.of(results.run), old, str(source), f"the campaign's first run ({first_source})",
            allow=allow, does="adds",
        )  # fmt: skip

    def _refresh_week(self, seq: int, week: int) -> None:
        """week_paths of ``week`` after run ``seq`` was added to it. The first run of a week
        is its state as it is; a later one (a retest, a second run) overrides per pair."""
        alone = self.con.execute("SELECT count(*) FROM runs WHERE week = ?", [week]).fetchone()
        # a run that measured a pair from both ends holds two rows of it: rank those
        twice = self.con.execute(
            "SELECT count(*) > count(DISTINCT (a, b)) FROM paths WHERE seq = ?", [seq]
        ).fetchone()
        if alone == (1,) and twice == (False,):
            self.con.execute(
                "INSERT INTO week_paths SELECT *, ? FROM paths WHERE seq = ?", [week, seq]
            )
            return
        self.con.execute("DELETE FROM week_paths WHERE week = ?", [week])
        self.con.execute(
            f"INSERT INTO week_paths {_LATEST_OF_WEEKS.format(where='WHERE r.week = ?')}", [week]
        )

    def _check_belongs(self, source: str, policy: str, nodes: list[str], *, retest: bool) -> None:
        first = self.con.execute("SELECT policy, nodes FROM runs ORDER BY seq LIMIT 1").fetchone()
        if first is None:
            return
        if first[0] != policy:
            raise CampaignError(
                source,
                f"judged by another policy than the campaign's runs ({first[0]});"
                " --force adds it anyway",
                "run.policy",
            )
        campaign_nodes = set(json.loads(first[1]))
        extra = sorted(set(nodes) - campaign_nodes)
        missing = sorted(campaign_nodes - set(nodes))
        if extra or (missing and not retest):
            parts = []
            if extra:
                parts.append(f"{len(extra)} not in it ({_few(extra)})")
            if missing:
                parts.append(f"{len(missing)} of it missing ({_few(missing)})")
            raise CampaignError(
                source,
                f"another inventory than the campaign's: {'; '.join(parts)};"
                " --force adds it anyway",
                "nodes",
            )

    # -- gate outcomes and waivers ----------------------------------------------------

    def record_gate(
        self,
        seq: int,
        milestone: str,
        profile: str,
        passed: bool,
        failed_rules: Sequence[str],
        judged_on: dt.date,
    ) -> None:
        with self._transaction():
            self.con.execute("DELETE FROM gates WHERE seq = ? AND milestone = ?", [seq, milestone])
            self.con.execute(
                "INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?)",
                [seq, milestone, profile, passed, json.dumps(list(failed_rules)), judged_on],
            )

    def set_waivers(self, milestone: str, waivers: Sequence[Waiver]) -> None:
        """The waivers a milestone's profile has now (they live in the profile; the store
        keeps the last copy for the report and the exporter)."""
        with self._transaction():
            self.con.execute("DELETE FROM waivers WHERE milestone = ?", [milestone])
            if waivers:
                self.con.executemany(
                    "INSERT INTO waivers VALUES (?, ?, ?, ?, ?, ?)",
                    [[milestone, w.src, w.dst, w.until, w.owner, w.reason] for w in waivers],
                )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            if self._umask is not None:
                os.umask(self._umask)
                self._umask = None


def _few(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


# Nothing a store file says may make DuckDB fetch or load code: a foreign file (SQLite named
# history.duckdb) would otherwise have it download an extension.
_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}
_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file
_MAGIC_AT = 8
# How long a writer waits for another process's lock (a scrape, another `campaign add`).
LOCK_WAIT_S = 30.0


def store_files(path: Path) -> tuple[Path, ...]:
    """The files DuckDB opens by name beside the store: the database and its log."""
    return path, path.with_name(path.name + ".wal")


def _check_files(path: Path, *, write: bool) -> None:
    """No symlink, no other user's or non-regular file among the store's files; a writer's
    directory writable by nobody else (outfiles.check_private_dir): DuckDB opens the files
    by name, following links, so this is checked before it does."""
    try:
        if write:
            check_private_dir(path.parent)
        for f in store_files(path):
            check_own_file(f)
    except OutputError as err:
        raise CampaignError(err.source, err.problem) from None


def _check_header(path: Path) -> None:
    """A file that is not a DuckDB database (truncated, SQLite, anything) is refused before
    DuckDB reads it: nothing it holds can make DuckDB load or fetch an extension."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except OSError as err:
        raise CampaignError(str(path), f"cannot open: {err.strerror or err}") from err
    try:
        head = os.read(fd, 16)
    finally:
        os.close(fd)
    if head[_MAGIC_AT : _MAGIC_AT + len(_MAGIC)] != _MAGIC:
        what = "an SQLite database" if head.startswith(b"SQLite format 3") else "something else"
        if len(head) < _MAGIC_AT + len(_MAGIC):
            what = f"a file of {len(head)} bytes"
        raise CampaignError(
            str(path), f"not a netqual history store: not a DuckDB database ({what})"
        )


def _locked(err: duckdb.Error) -> bool:
    return "Could not set lock" in str(err) or "Conflicting lock" in str(err)


def _connect(path: Path, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    """DuckDB allows one writer or many readers per file: a connection refused for a lock
    is tried again until ``wait_s`` (a reader holds it for one scrape, a writer for one
    command), then the error names who holds it."""
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=_CONFIG)
        except duckdb.Error as err:
            if not _locked(err) or time.monotonic() + delay > deadline:
                raise CampaignError(
                    str(path), f"cannot open the history store: {_first_line(err)}"
                ) from err
        time.sleep(delay)
        delay = min(0.5, delay * 2)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


def open_store(
    path: Path, *, create: bool = False, read_only: bool = False, wait_s: float = LOCK_WAIT_S
) -> Store:
    """Open (or, with ``create``, make) the store; an older schema is upgraded in place.

    Every failure is a CampaignError naming the file (exit 2): a symlink or another user's
    file or directory, a foreign or truncated file, a schema netqual did not write, a lock
    held past ``wait_s``. A writer's store files are private (umask 077 while it is open)."""
    _check_files(path, write=not read_only)
    exists = path.is_file()
    if not exists and not create:
        raise CampaignError(
            str(path), "no history store here yet: add a run first (`netqual campaign add`)"
        )
    if exists:
        _check_header(path)
    writer = not (read_only and exists)
    if writer and exists:
        # Before DuckDB opens it: DuckDB's lock is a POSIX record lock, which closing any
        # other descriptor of the file in this process would release.
        _private(path)
    umask = os.umask(0o077) if writer else None
    try:
        con = _connect(path, not writer, wait_s)
        try:
            store = _opened(con, path, exists, read_only, umask)
        except BaseException:
            con.close()
            raise
    except duckdb.Error as err:
        if umask is not None:
            os.umask(umask)
        raise CampaignError(str(path), f"unusable history store: {_first_line(err)}") from err
    except BaseException:
        if umask is not None:
            os.umask(umask)
        raise
    return store


def _private(path: Path) -> None:
    """A store made before stores were private: 0600 from now on (through a descriptor
    opened without following a symlink). Never while a connection of this process holds
    the store: closing this descriptor would drop DuckDB's lock on it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _opened(
    con: duckdb.DuckDBPyConnection, path: Path, exists: bool, read_only: bool, umask: int | None
) -> Store:
    if not exists:
        for statement in _SCHEMA:
            con.execute(statement)
        con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        _upgrade(con, 1)
        return Store(con, path, umask)
    version = _version(con, path)
    if version > SCHEMA_VERSION:
        raise CampaignError(
            str(path),
            f"written by a newer netqual (store schema {version},"
            f" this one reads up to {SCHEMA_VERSION})",
        )
    if version < SCHEMA_VERSION:
        if read_only:  # upgrade first: a read-only connection cannot, and a reader needs it
            con.close()
            open_store(path).close()
            return open_store(path, read_only=True)
        _upgrade(con, version)
    _check_schema(con, path)
    return Store(con, path, umask)


def _version(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.Error as err:
        raise CampaignError(str(path), "not a netqual history store (no meta table)") from err
    text = str(row[0]) if row else ""
    if not text.isdigit() or not 1 <= int(text) <= 1_000:
        raise CampaignError(
            str(path),
            f"not a netqual history store: schema_version {text[:20]!r} is not one netqual "
            "writes (1, 2, ...)",
            "meta.schema_version",
        )
    return int(text)


@functools.cache
def _expected_columns() -> dict[str, list[tuple[str, str]]]:
    """Each table's (column, type) as _SCHEMA makes them (built once, in memory)."""
    con = duckdb.connect(":memory:", config=_CONFIG)
    try:
        for statement in _SCHEMA:  # as a new store is made: version 1, then upgraded
            con.execute(statement)
        con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        _upgrade(con, 1)
        return _columns(con)
    finally:
        con.close()


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        out.setdefault(str(table), []).append((str(column), str(kind)))
    return out


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """The tables and columns netqual wrote, as it wrote them: an edited store (a dropped
    table, a changed column) is refused naming what differs, not met as a traceback."""
    have = _columns(con)
    for table, columns in _expected_columns().items():
        if table not in have:
            raise CampaignError(
                str(path), f"not a netqual history store: table {table} is missing", table
            )
        if have[table] != columns:
            raise CampaignError(
                str(path),
                f"not a netqual history store: table {table} was changed (its columns are not "
                "the ones netqual writes)",
                table,
            )


@contextmanager
def guarded(path: Path) -> Iterator[None]:
    """A store command's work: any DuckDB or file-system failure inside (a full disk at
    commit, an edit the schema check could not see) is one CampaignError naming the store,
    never a traceback."""
    try:
        yield
    except duckdb.Error as err:
        raise CampaignError(str(path), f"history store failed: {_first_line(err)}") from err
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EROFS):
            raise CampaignError(str(path), f"history store failed: {err.strerror}") from err
        raise


def _upgrade(con: duckdb.DuckDBPyConnection, version: int) -> None:
    """Apply MIGRATIONS from ``version`` up to SCHEMA_VERSION, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    while version < SCHEMA_VERSION:
        for statement in MIGRATIONS[version]:
            con.execute(statement)
        version += 1
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(version)])
    con.execute("COMMIT")
