"""Read a run as the user names it: its directory, its results.json, or the results.jsonl
an interrupted run leaves (paths so far, plus the run.json written before the first pair).

A run read from results.jsonl is marked incomplete, with the pairs its schedule had.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netqual import __version__
from netqual.analysis import localise
from netqual.base.errors import NetqualError, ResultsFileError, UsageError
from netqual.campaign.config import CONFIG_FILE, load_campaign
from netqual.files.filedata import load_json
from netqual.files.rundir import RESULT_FILES, RunDir
from netqual.files.schema import validate
from netqual.model.node import DEFAULT_PORT, Node, Role
from netqual.model.run import SCHEMA_VERSION, Mode
from netqual.planning.calibration import Calibration, EarlierRun
from netqual.planning.schedule import build
from netqual.results import journal, load, results_from_dict, summarize
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.table.store import concat


def run_file(path: Path) -> Path:
    """The file ``load_run`` reads for ``path``: a directory's results.json, else its
    results.jsonl; a file as given (what a message about the run names)."""
    if path.is_dir():
        for name in RESULT_FILES:
            if (path / name).is_file():
                return path / name
    return path


def load_run(path: Path) -> Results:
    """``DIR`` (its results.json, else its results.jsonl), ``results.json`` or ``.jsonl``."""
    if path.is_dir():
        for name in RESULT_FILES:
            if (path / name).is_file():
                return load_run(path / name)
        raise ResultsFileError(str(path), "no results.json or results.jsonl in this directory")
    if path.suffix == ".jsonl":
        return load_partial(path)
    return load(path)


def load_partial(jsonl: Path) -> Results:
    """The measurements of results.jsonl as an incomplete run (pairs with ping-pong only
    as ``journal.as_pending`` shows them); its run.json supplies the rest."""
    source = str(jsonl)
    held = journal.read(jsonl)
    ident = _identity(RunDir(jsonl.parent).identity)
    listed = [n["name"] for n in ident.get("nodes") or () if isinstance(n, dict) and "name" in n]
    paths = journal.measured_paths(held.done, held.pending, listed, held.engine)
    nodes = ident.get("nodes") or _nodes_of(paths)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "netqual", "version": __version__},
        "run": {
            "started_at": ident.get("started_at", ""),
            "finished_at": "",
            "transport": ident.get("transport")
            or (paths.transports[paths.transport[0]] if len(paths) else "tcp"),
            "mode": ident.get("mode") or Mode.FULL_MESH.value,
            "policy": ident.get("policy") or {},
            "plan": ident.get("plan") or {},
            "complete": False,
            "pairs_planned": _planned(ident),
            **({"kind": ident["kind"]} if ident.get("kind") else {}),
        },
        "nodes": nodes,
        "paths": [],
        "summary": {},
    }
    # run.json is a file like any other: its part of the document meets the schema too
    validate({**doc, "paths": [], "summary": {"counts": {}}}, source)
    results = results_from_dict(doc, source)
    table = concat([paths], [n.name for n in results.nodes])
    results = dataclasses.replace(
        results, paths=table, summary=summarize(table, results.run.policy.metric)
    )
    found, localised = localise.localisation(results)
    return dataclasses.replace(results, suspects=found, localisation=localised)


def _identity(path: Path) -> dict[str, Any]:
    try:
        doc = load_json(path.read_bytes(), str(path), ResultsFileError)
    except (OSError, ResultsFileError):
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("identity"), dict):
        return {}
    return {**doc["identity"], "started_at": doc.get("started_at", ""), "kind": doc.get("kind")}


def _planned(ident: dict[str, Any]) -> int | None:
    if ident.get("pairs") is not None:
        return len(ident["pairs"])
    try:
        nodes = tuple(Node(n["name"], n["address"]) for n in ident["nodes"])
        return build(nodes, Mode(ident["mode"]), ident.get("sample_k") or 2).pair_count
    except (KeyError, TypeError, ValueError):
        return None


def _nodes_of(paths: PathTable) -> list[dict[str, Any]]:
    names = {paths.names[i] for i in np.unique(np.concatenate([paths.src, paths.dst])).tolist()}
    return [
        {
            "name": n,
            "address": "",
            "port": DEFAULT_PORT,
            "role": Role.ANY.value,
            "rack": None,
            "labels": {},
        }
        for n in sorted(names)
    ]


CAMPAIGN_RUNS = 3  # a campaign calibrates by its latest runs (that still exist on disk)


def calibration_from(
    sources: Sequence[Path], transport: str, endpoints: Sequence[str]
) -> Calibration:
    """``--calibrate-from DIR...``: earlier runs (directories or results files) of this
    inventory, or a campaign directory (its latest ``CAMPAIGN_RUNS`` finished runs). A run
    named that cannot calibrate is exit 2 saying why; a campaign's are skipped."""
    runs: list[EarlierRun] = []
    for src in sources:
        if (src / CONFIG_FILE).is_file():
            runs += _campaign_runs(src, transport, endpoints)
        else:
            runs.append(EarlierRun.of(str(src), load_run(src), transport, endpoints))
    return Calibration(tuple(runs))


def _campaign_runs(directory: Path, transport: str, endpoints: Sequence[str]) -> list[EarlierRun]:
    from netqual.campaign.store import open_store  # duckdb: only for a campaign (run --help)

    store = open_store(load_campaign(directory).store_path, read_only=True)
    try:
        rows = [r for r in store.runs() if r.retest_of is None]
    finally:
        store.close()
    out: list[EarlierRun] = []
    why = []
    for row in reversed(rows):
        if len(out) == CAMPAIGN_RUNS:
            break
        try:
            out.append(EarlierRun.of(row.source, load_run(Path(row.source)), transport, endpoints))
        except NetqualError as err:
            why.append(str(err))
    if not out:
        raise UsageError(
            "--calibrate-from",
            f"{directory}: no run of this campaign can calibrate the estimate"
            + (f" ({'; '.join(why[:3])})" if why else " (it has no runs)"),
        )
    return out
