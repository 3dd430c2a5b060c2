"""``results.jsonl``: the run's journal, one record per line, appended (and fsynced) the
moment a measurement exists, so that a crash or a signal loses nothing measured.

Record kinds (docs/results.md):

- a path object, as in results.json's ``paths``: the pair is finished (every phase);
- ``{"record": "pingpong", "path": {...}}``: the pair's ping-pong phase is finished, its
  bulk phase is still to run (aligned and per-round schedules); the path is judged on its
  RTT alone. A later path object for the same pair completes it;
- ``{"record": "interference-sample", "pairs": [[src, dst], ...]}``: the paths the closing
  interference check re-measures alone, chosen once so a resumed run keeps the same sample;
- ``{"record": "alone", "path": {...}}``: one of them, re-measured alone (ping-pong only).
- ``{"record": "fanin-level", "storage": NAME, "level": {...}}``: one level of the fan-in
  sweep (``run --fanin``), as in results.json's ``fanin[].levels``; ``--resume`` keeps it.
- ``{"record": "fanin-engine-level", "storage": NAME, "engine": E, "level": {...}}``: one
  fan-in level read through the fetch engine (``run --fanin --engine``), as in
  results.json's ``fanin[].engine.levels``; ``--resume`` keeps it for the same engine.
- ``{"record": "engine", "src": A, "dst": B, "cells": [...]}``: the fetch engine's cells of
  a finished pair (``run --engine``), as in results.json's path ``engine``; ``--resume``
  keeps them (a pair whose engine was refused for its configuration has none: redone).

Readers take the first finished record of a pair (``--resume`` rewrites a file that has a
pair twice) and skip a torn last line (a crash mid-write): that measurement is redone.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import msgspec

from netqual.analysis.plausible import mark_impossible
from netqual.base.errors import OutputError, ResultsFileError
from netqual.files.filedata import load_json
from netqual.files.outfiles import write_atomic
from netqual.model.engine import EngineCell, EngineName
from netqual.model.fanin import EngineFaninLevel, FaninLevel
from netqual.model.path import PathResult
from netqual.model.verdict import Verdict
from netqual.results.encode import path_to_dict
from netqual.results.engine_codec import WireEngineCell, cell_to_dict
from netqual.results.fanin_codec import (
    engine_level,
    engine_level_to_dict,
    fanin_level,
    level_to_dict,
)
from netqual.results.wirepath import decode_path
from netqual.table.paths import PathTable
from netqual.table.store import KeyedPaths, PathChunks, concat

Key = tuple[str, str]

PATH = "path"  # a bare path object: no "record" key
PINGPONG = "pingpong"
SAMPLE = "interference-sample"
ALONE = "alone"
FANIN = "fanin-level"
FANIN_ENGINE = "fanin-engine-level"
ENGINE = "engine"

PENDING_REASON = "bulk phase not measured: the run stopped before it (--resume measures it)"


def _line(f: TextIO, text: str) -> None:
    try:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    except OSError as err:  # no space left: one line naming the file, not a traceback
        raise OutputError(str(f.name), f"cannot write: {err.strerror or err}") from err


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def append_path(f: TextIO, path: PathResult) -> None:
    """A finished pair (every phase)."""
    _line(f, _compact(path_to_dict(path)))


def append_pingpong(f: TextIO, path: PathResult) -> None:
    """A pair whose ping-pong phase finished; its bulk phase follows."""
    _line(f, f'{{"record":"{PINGPONG}","path":{_compact(path_to_dict(path))}}}')


def append_sample(f: TextIO, keys: Sequence[Key]) -> None:
    _line(f, _compact({"record": SAMPLE, "pairs": [list(k) for k in keys]}))


def append_fanin(f: TextIO, storage: str, level: FaninLevel) -> None:
    _line(f, _compact({"record": FANIN, "storage": storage, "level": level_to_dict(level)}))


def append_fanin_engine(
    f: TextIO, storage: str, engine: EngineName, level: EngineFaninLevel
) -> None:
    record = {"record": FANIN_ENGINE, "storage": storage, "engine": engine.value}
    _line(f, _compact({**record, "level": engine_level_to_dict(level)}))


def append_engine(f: TextIO, key: Key, cells: Sequence[EngineCell]) -> None:
    """A finished pair's fetch engine cells (after the pair's own record)."""
    record = {"record": ENGINE, "src": key[0], "dst": key[1]}
    _line(f, _compact({**record, "cells": [cell_to_dict(c) for c in cells]}))


def append_alone(f: TextIO, path: PathResult) -> None:
    _line(f, f'{{"record":"{ALONE}","path":{_compact(path_to_dict(path))}}}')


@dataclass(frozen=True)
class Journal:
    """What a results.jsonl holds, by pair, in file order (as columns: a 1,024-node run's
    journal has half a million paths)."""

    done: KeyedPaths = field(default_factory=KeyedPaths)
    # ping-pong finished, bulk phase not yet (no finished record for the pair)
    pending: KeyedPaths = field(default_factory=KeyedPaths)
    sample: tuple[Key, ...] | None = None
    alone: dict[Key, PathResult] = field(default_factory=dict)
    # fan-in levels measured, by (storage node, readers)
    fanin: dict[tuple[str, int], FaninLevel] = field(default_factory=dict)
    engine: dict[Key, tuple[EngineCell, ...]] = field(default_factory=dict)  # --engine
    records: int = 0  # lines read (torn tail excluded)
    duplicates: int = 0  # records of something already recorded (a rewrite drops them)
    # fan-in levels through the fetch engine, by (storage node, readers): (engine, level)
    fanin_engine: dict[tuple[str, int], tuple[EngineName, EngineFaninLevel]] = field(
        default_factory=dict
    )

    def engine_levels(self, engine: EngineName) -> dict[tuple[str, int], EngineFaninLevel]:
        """The fan-in levels read through ``engine`` (another engine's are measured again)."""
        return {k: lv for k, (name, lv) in self.fanin_engine.items() if name is engine}


def _sample(doc: Mapping[str, Any], source: str, where: str) -> tuple[Key, ...]:
    pairs = doc.get("pairs")
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        raise ResultsFileError(source, "expected a list of [src, dst] pairs", f"{where}.pairs")
    return tuple((str(a), str(b)) for a, b in pairs)


def _fanin(doc: Mapping[str, Any], source: str, where: str) -> tuple[str, FaninLevel]:
    storage, level = doc.get("storage"), doc.get("level")
    if not isinstance(storage, str) or not isinstance(level, dict):
        raise ResultsFileError(source, "expected storage and level", where)
    try:
        return storage, fanin_level(level)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ResultsFileError(source, f"malformed level: {err!r}", f"{where}.level") from err


def _fanin_engine(
    doc: Mapping[str, Any], source: str, where: str
) -> tuple[str, EngineName, EngineFaninLevel]:
    storage, level, engine = doc.get("storage"), doc.get("level"), doc.get("engine")
    names = [e.value for e in EngineName]
    if not isinstance(storage, str) or not isinstance(level, dict) or engine not in names:
        raise ResultsFileError(source, "expected storage, engine and level", where)
    try:
        return storage, EngineName(engine), engine_level(level)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ResultsFileError(source, f"malformed level: {err!r}", f"{where}.level") from err


def _engine(doc: Mapping[str, Any], source: str, where: str) -> tuple[Key, tuple[EngineCell, ...]]:
    src, dst, cells = doc.get("src"), doc.get("dst"), doc.get("cells")
    if not isinstance(src, str) or not isinstance(dst, str) or not isinstance(cells, list):
        raise ResultsFileError(source, "expected src, dst and cells", where)
    try:
        wire = msgspec.convert(cells, list[WireEngineCell])
    except msgspec.ValidationError as err:
        raise ResultsFileError(source, f"malformed cell: {err}", f"{where}.cells") from err
    return (src, dst), tuple(c.cell() for c in wire)


def _path(doc: Mapping[str, Any], source: str, where: str) -> Any:
    if not isinstance(doc.get("path"), dict):
        raise ResultsFileError(source, "expected a path object", f"{where}.path")
    return decode_path(json.dumps(doc["path"]), source, f"{where}.path")


class _Reading:
    """What ``read`` gathers, line by line, before the paths become columns."""

    def __init__(self) -> None:
        self.kinds: list[str] = []  # per path-carrying line (and sample), in file order
        self.wire = PathChunks()
        self.sample: tuple[Key, ...] | None = None
        self.levels: dict[tuple[str, int], FaninLevel] = {}
        self.engine: dict[Key, tuple[EngineCell, ...]] = {}
        self.engine_levels: dict[tuple[str, int], tuple[EngineName, EngineFaninLevel]] = {}

    def path(self, kind: str, wire: Any) -> None:
        self.kinds.append(kind)
        self.wire.append(wire)

    def keep_sample(self, kind: str, sample: tuple[Key, ...]) -> None:
        self.sample = self.sample or sample  # the first one: a resumed run keeps it
        self.kinds.append(kind)

    def keep_level(self, kind: str, got: tuple[str, FaninLevel]) -> None:
        storage, level = got
        self.levels.setdefault((storage, level.readers), level)

    def keep_engine(self, kind: str, got: tuple[Key, tuple[EngineCell, ...]]) -> None:
        self.engine.setdefault(*got)

    def keep_engine_level(self, kind: str, got: tuple[str, EngineName, EngineFaninLevel]) -> None:
        storage, engine, level = got
        self.engine_levels.setdefault((storage, level.readers), (engine, level))


@dataclass(frozen=True)
class Record:
    """One kind of results.jsonl line: its ``record`` name (``path``: a bare path object),
    what it means (docs/results.md lists them), how a line of it is read (``decode``, from
    the parsed line; the writers' own layout of a path record is cut out without parsing
    it twice) and what reading keeps of it (``keep``)."""

    kind: str
    meaning: str
    decode: Callable[[Mapping[str, Any], str, str], Any]
    keep: Callable[[_Reading, str, Any], None]

    @property
    def wraps_path(self) -> bool:
        return self.decode is _path


RECORDS: Mapping[str, Record] = {
    r.kind: r
    for r in (
        Record(PATH, "finished pair: every phase of the pair is done", _path, _Reading.path),
        Record(PINGPONG, "ping-pong done, its bulk phase still to run", _path, _Reading.path),
        Record(SAMPLE, "the interference check's sample, chosen once", _sample,
               _Reading.keep_sample),
        Record(ALONE, "one sampled path re-measured alone", _path, _Reading.path),
        Record(FANIN, "one level of the --fanin sweep", _fanin, _Reading.keep_level),
        Record(FANIN_ENGINE, "one --fanin level read through the --engine", _fanin_engine,
               _Reading.keep_engine_level),
        Record(ENGINE, "a finished pair's --engine cells", _engine, _Reading.keep_engine),
    )
}  # fmt: skip
# How the writer lays out a wrapped record, so a reader can cut the path out of the line
# without parsing it twice (a 1,024-node run has half a million of them).
_PREFIX = {
    kind: f'{{"record":"{kind}","path":'.encode()
    for kind, r in RECORDS.items()
    if r.wraps_path and kind != PATH
}


def _wrapped(line: bytes, source: str, where: str) -> tuple[str, Any] | None:
    """(kind, what the line holds) of a record line, or None for a bare path object."""
    for kind, prefix in _PREFIX.items():
        if line.startswith(prefix) and line.rstrip().endswith(b"}"):
            return kind, decode_path(line.rstrip()[len(prefix) : -1], source, where)
    if b'"record"' not in line:
        return None
    # another layout of the same records (hand-written, jq), bounded like every input file
    doc = load_json(line, source, lambda src, problem: ResultsFileError(src, problem, where))
    if not isinstance(doc, dict) or "record" not in doc:
        return None  # a path object that merely mentions the word (a node named so)
    kind = doc["record"]
    record = RECORDS.get(kind) if isinstance(kind, str) and kind != PATH else None
    if record is None:
        raise ResultsFileError(source, f"unknown record kind {kind!r}", f"{where}.record")
    return kind, record.decode(doc, source, where)


def read(path: Path) -> Journal:
    """Every record of results.jsonl; a torn last line is skipped, nothing else is."""
    source = str(path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as err:
        raise ResultsFileError(source, f"cannot read: {err.strerror or err}") from err
    got = _Reading()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"line {i + 1}"
        try:
            found = _wrapped(line, source, where)
            if found is None:
                got.path(PATH, decode_path(line, source, where))
            else:
                RECORDS[found[0]].keep(got, *found)
        except msgspec.DecodeError as err:
            if i == len(lines) - 1:
                break  # the torn last line of a crash mid-write: that record is not done
            raise ResultsFileError(source, f"not valid JSON: {err}", field=where) from err
        except ResultsFileError:
            if i == len(lines) - 1:
                break
            raise
    kinds, sample, levels, engine = got.kinds, got.sample, got.levels, got.engine
    # A liar agent's impossible values make its path unsafe here too (netqual.analysis.plausible).
    table = mark_impossible(got.wire.table())
    keys = iter(table.keys())
    done: dict[Key, int] = {}
    pending: dict[Key, int] = {}
    alone: dict[Key, int] = {}
    pingponged: set[Key] = set()
    dupes = max(0, kinds.count(SAMPLE) - 1)
    row = -1
    for kind in kinds:
        if kind == SAMPLE:
            continue
        key, row = next(keys), row + 1
        if kind == PATH:
            dupes += key in done
            done.setdefault(key, row)
            pending.pop(key, None)
        elif kind == PINGPONG:
            dupes += key in pingponged
            pingponged.add(key)
            if key not in done:
                pending.setdefault(key, row)
        else:
            dupes += key in alone
            alone.setdefault(key, row)
    return Journal(
        KeyedPaths.of(table, done),
        KeyedPaths.of(table, pending),
        sample,
        {k: table.row(r) for k, r in alone.items()},
        levels,
        engine,
        len(kinds) + len(levels) + len(engine) + len(got.engine_levels),
        dupes,
        got.engine_levels,
    )


def rewrite(path: Path, journal: Journal) -> None:
    """The journal with each record once (atomically): what ``--resume`` continues from."""

    def write(f: TextIO) -> None:
        for p in journal.done.values():
            append_path(f, p)
        for p in journal.pending.values():
            append_pingpong(f, p)
        if journal.sample is not None:
            append_sample(f, journal.sample)
            for p in journal.alone.values():
                append_alone(f, p)
        for (storage, _), level in journal.fanin.items():
            append_fanin(f, storage, level)
        for (storage, _), (engine, elevel) in journal.fanin_engine.items():
            append_fanin_engine(f, storage, engine, elevel)
        for key, cells in journal.engine.items():
            append_engine(f, key, cells)

    write_atomic(path, write, sync=True)


def as_pending(path: PathResult) -> PathResult:
    """A path whose bulk phase was never run, as an interrupted run reports it: its RTT as
    measured, never offload-safe (half its plan is missing), the reason first."""
    verdict = Verdict.MARGINAL if path.verdict is Verdict.SAFE else path.verdict
    details = {**dict(path.details), "pending": "bulk"}
    return dataclasses.replace(
        path, verdict=verdict, reasons=(PENDING_REASON, *path.reasons), details=details
    )


def measured_paths(
    done: KeyedPaths | PathChunks,
    pending: KeyedPaths,
    names: Sequence[str] = (),
    engine: Mapping[Key, tuple[EngineCell, ...]] | None = None,
) -> PathTable:
    """Finished pairs, then those with ping-pong only (``as_pending``), each pair once;
    with ``engine``, each finished pair's fetch engine cells."""
    waiting = PathTable.from_paths(list(map(as_pending, pending.values())), names)
    return concat([done.table(), waiting], names).with_engine(engine or {})
