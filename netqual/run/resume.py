"""``netqual run --resume``: continue an interrupted run from ``DIR/results.jsonl``.

A run writes ``DIR/run.json`` (what it measures: nodes, mode, transport, policy, probe
plan) before its pre-flight check, and appends each measurement to ``results.jsonl`` the
moment it exists (record kinds: ``netqual.results.journal``). To resume, the identity
must match (else ``ResumeMismatchError``, exit 2, unless forced), the torn last line a
crash may leave is cut off (that measurement is redone), and the coordinator continues
from what the file holds: finished pairs are skipped, pairs with their ping-pong done get
only their bulk phase, and the interference check keeps its sample and the paths it has
already re-measured. Every pair ends up exactly once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netqual.base.errors import InputError, UsageError
from netqual.codec.plan import plan_to_dict
from netqual.files.filedata import load_json
from netqual.files.outfiles import make_out_dir, open_append, write_text_atomic
from netqual.files.rundir import RunDir
from netqual.model.node import Node
from netqual.model.path import PathResult
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode, RunKind
from netqual.planning.schedule import build
from netqual.results import journal, node_to_dict, policy_to_dict
from netqual.results.journal import Journal


class ResumeMismatchError(InputError):
    """The run directory holds a run of something else (another inventory or plan)."""


@dataclass(frozen=True)
class Resume:
    """What an interrupted run already measured (``journal.done`` are finished pairs)."""

    started_at: str
    journal: Journal

    @property
    def done(self) -> Mapping[tuple[str, str], PathResult]:
        return self.journal.done


def identity(
    nodes: tuple[Node, ...],
    mode: Mode,
    sample_k: int,
    transport: str,
    policy: Policy,
    plan: ProbePlan,
) -> dict[str, Any]:
    return {
        "nodes": [node_to_dict(n) for n in nodes],
        "mode": mode.value,
        "sample_k": sample_k if mode is Mode.SAMPLED else None,
        "transport": transport,
        "policy": policy_to_dict(policy),
        "plan": plan_to_dict(plan),
    }


def fingerprint(ident: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def write_identity(out_dir: Path, ident: Mapping[str, Any], started_at: str, kind: RunKind) -> None:
    """run.json: when the run started, what it measures (``ident``, which --resume checks)
    and what it is (``kind``: beside the identity, so runs of older versions resume)."""
    doc = {
        "started_at": started_at,
        "kind": kind.value,
        "fingerprint": fingerprint(ident),
        "identity": ident,
    }
    write_text_atomic(RunDir(out_dir).identity, json.dumps(doc, indent=1) + "\n", sync=True)


def record_phases(out_dir: Path, phases: Mapping[str, Mapping[str, Any]]) -> None:
    """run.json's ``phases``: per phase ``estimate_s`` (what the run expected) and
    ``actual_s`` (what it took), when the run ends. Nothing else of run.json changes."""
    path = RunDir(out_dir).identity
    try:
        doc = _read_identity(out_dir)
    except ResumeMismatchError:
        return  # not ours to write: resume refuses it later with the reason
    doc["phases"] = {k: dict(v) for k, v in phases.items()}
    write_text_atomic(path, json.dumps(doc, indent=1) + "\n", sync=True)


def begin(out_dir: Path, ident: Mapping[str, Any], resume: Resume | None, kind: RunKind) -> None:
    """Before the pre-flight check: the run's identity and its (empty, unless resumed)
    results.jsonl exist, so a run killed at any moment from here on can be resumed."""
    make_out_dir(out_dir)
    started = (resume.started_at if resume else "") or dt.datetime.now(dt.timezone.utc).isoformat(
        timespec="milliseconds"
    )
    write_identity(out_dir, ident, started, kind)
    with open_append(RunDir(out_dir).results_jsonl, new=resume is None):
        pass


def abandon(out_dir: Path, created: bool) -> None:
    """Undo ``begin`` for a run that stopped before measuring anything (its pre-flight
    check failed): the same --out works again once the configuration is fixed."""
    jsonl = RunDir(out_dir).results_jsonl
    if jsonl.is_file() and jsonl.stat().st_size == 0:
        jsonl.unlink()
        (RunDir(out_dir).identity).unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):  # not empty: leave it
                out_dir.rmdir()


def _stored_nodes(old: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stored identity's nodes by name, or None when they are not a list of objects
    with a string name (a hand-edited or hostile run.json)."""
    nodes = old.get("nodes", [])
    if not isinstance(nodes, list):
        return None
    out: dict[str, Any] = {}
    for n in nodes:
        if not isinstance(n, dict) or not isinstance(n.get("name"), str):
            return None
        out[n["name"]] = n
    return out


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    old_nodes = _stored_nodes(old)
    new_nodes = {n["name"]: n for n in new["nodes"]}
    if old_nodes is None:
        out.append("the stored identity's nodes are not a list of named nodes")
    elif old_nodes != new_nodes:
        gone, added = sorted(old_nodes.keys() - new_nodes), sorted(new_nodes.keys() - old_nodes)
        changed = sorted(k for k in old_nodes.keys() & new_nodes if old_nodes[k] != new_nodes[k])
        for label, names in (("removed", gone), ("added", added), ("changed", changed)):
            if names:
                more = f" and {len(names) - 3} more" if len(names) > 3 else ""
                out.append(f"nodes {label}: {', '.join(names[:3])}{more}")
    if old.get("pairs") != new.get("pairs"):
        out.append("the pairs to re-test differ")
    for key in ("mode", "sample_k", "transport"):
        if old.get(key) != new[key]:
            out.append(f"{key} {old.get(key)} -> {new[key]}")
    for key in ("policy", "plan"):
        o, n = old.get(key), new[key]
        if not isinstance(o, dict):
            o = {}
        for k in sorted(n):
            if o.get(k) != n[k]:
                out.append(f"{key}.{k} {o.get(k)} -> {n[k]}")
    return out


def recorded_kind(out_dir: Path) -> RunKind | None:
    """The kind run.json records; None where it records none (an older netqual) or cannot
    be read."""
    try:
        doc = load_json((RunDir(out_dir).identity).read_bytes(), "run.json", ResumeMismatchError)
        return RunKind(doc["kind"])
    except (OSError, ResumeMismatchError, TypeError, KeyError, ValueError):
        return None


def _read_identity(out_dir: Path) -> dict[str, Any]:
    path = RunDir(out_dir).identity
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ResumeMismatchError(
            str(path), "missing: not a directory written by netqual run (--force to resume)"
        ) from None
    except OSError as err:
        raise ResumeMismatchError(str(path), f"unreadable: {err} (--force to resume)") from err
    doc = load_json(
        raw, str(path), lambda s, why: ResumeMismatchError(s, f"{why} (--force to resume)")
    )
    if not isinstance(doc, dict) or not isinstance(doc.get("identity"), dict):
        raise ResumeMismatchError(str(path), "no run identity in it (--force to resume)")
    return doc


def _cut_torn_tail(jsonl: Path) -> None:
    """Drop bytes after the last newline: a pair cut off mid-write is measured again."""
    with jsonl.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        keep = size
        while keep > 0:
            step = min(keep, 1 << 16)
            f.seek(keep - step)
            block = f.read(step)
            nl = block.rfind(b"\n")
            if nl >= 0:
                keep = keep - step + nl + 1
                break
            keep -= step
        if keep != size:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())


def prepare(out_dir: Path, ident: Mapping[str, Any], force: bool) -> Resume:
    """Check that out_dir holds this run, repair its results.jsonl, return what is done.

    With ``force`` a different identity is accepted: finished pairs the new plan also has
    are kept, the others dropped from results.jsonl."""
    jsonl = RunDir(out_dir).results_jsonl
    # Killed after run.json and before its first record: nothing was measured, so the run
    # starts from nothing under run.json's identity (checked below, as always).
    fresh = not jsonl.is_file()
    if fresh and not (RunDir(out_dir).identity).is_file():
        raise UsageError("--resume", f"{jsonl} does not exist: nothing to resume")
    started_at = ""
    same = False
    try:
        doc = _read_identity(out_dir)
        started_at = str(doc.get("started_at") or "")
        diffs = _differences(doc["identity"], ident)
        same = not diffs and doc.get("fingerprint") == fingerprint(ident)
        if not same and not force:
            raise ResumeMismatchError(
                str(RunDir(out_dir).identity),
                "this directory holds a different run: "
                + "; ".join(diffs or ["identity differs"])
                + " (--force resumes anyway, keeping the finished pairs the new plan has)",
            )
    except ResumeMismatchError:
        if not force:
            raise
    if fresh:
        with open_append(jsonl, new=True):
            pass
    _cut_torn_tail(jsonl)
    held = journal.read(jsonl)
    wanted: set[tuple[str, str]] | None = None
    if not same and ident.get("pairs") is not None:
        wanted = {(a, b) for a, b in ident["pairs"]}
    elif not same:
        nodes = tuple(Node(n["name"], n["address"]) for n in ident["nodes"])
        sched = build(nodes, Mode(ident["mode"]), ident["sample_k"] or 0)
        wanted = {
            (nodes[a].name, nodes[b].name)
            for pos in sched.rounds_positions()
            for a, b in pos.tolist()
        }
    if wanted is not None:  # another plan: its interference sample is chosen afresh
        done, pending = held.done.only(wanted), held.pending.only(wanted)
        kept = journal.Journal(done, pending)
        if held.fanin or (len(done), len(pending), held.sample) != (
            len(held.done),
            len(held.pending),
            None,
        ):
            journal.rewrite(jsonl, kept)
        return Resume(started_at=started_at, journal=kept)
    if held.duplicates:
        journal.rewrite(jsonl, held)
    return Resume(started_at=started_at, journal=held)
