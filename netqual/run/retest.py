"""``netqual retest``: re-measure the suspect paths of a finished run with a larger plan.

The new run measures exactly the chosen (src, dst) pairs (``RunConfig.pairs``) over the
old run's nodes, transport, mode and policy, and records ``retest_of`` so that ``report``
and ``diff`` can put each path's before and after side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from netqual.base.choices import ChoiceError, parse_choice
from netqual.base.errors import UsageError
from netqual.files.outfiles import new_run_dir
from netqual.files.rundir import RunDir
from netqual.model.plan import ProbePlan
from netqual.model.verdict import Verdict
from netqual.table.run import Results

DEFAULT_VERDICTS = "unsafe,marginal"
ITERATIONS_FACTOR = 2  # default: twice the original plan's kept samples


def parse_verdicts(text: str) -> frozenset[Verdict]:
    out = set()
    for word in filter(None, (w.strip() for w in text.split(","))):
        try:
            out.add(parse_choice(Verdict, word, "--verdict"))
        except ChoiceError as err:
            raise UsageError(err.where, err.problem) from None
    if not out:
        raise UsageError("--verdict", "give at least one verdict")
    return frozenset(out)


def parse_path(text: str, names: Sequence[str]) -> tuple[str, str]:
    """SRC:DST; node names may contain ':', so try every split and keep the one naming two
    nodes of the run."""
    known = set(names)
    splits = [
        (text[:i], text[i + 1 :])
        for i, ch in enumerate(text)
        if ch == ":" and text[:i] in known and text[i + 1 :] in known
    ]
    if len(splits) != 1:
        problem = "ambiguous" if splits else "not two nodes of the run"
        raise UsageError("--path", f"{text!r}: {problem} (expected SRC:DST node names)")
    src, dst = splits[0]
    if src == dst:
        raise UsageError("--path", f"{text!r}: source and destination are the same node")
    return src, dst


def select(
    results: Results,
    verdicts: frozenset[Verdict],
    paths: Sequence[tuple[str, str]] = (),
    both_directions: bool = False,
) -> tuple[tuple[str, str], ...]:
    """The pairs to re-measure: ``paths`` when given, else every path with one of
    ``verdicts``; with ``both_directions`` each pair also from its other end."""
    chosen = list(paths) or _keys_with(results, verdicts)
    if both_directions:
        chosen = [q for a, b in chosen for q in ((a, b), (b, a))]
    return tuple(dict.fromkeys(chosen))  # keep order, drop repeats


def _keys_with(results: Results, verdicts: frozenset[Verdict]) -> list[tuple[str, str]]:
    """(src, dst) of every path with one of ``verdicts``, in row order, from the columns."""
    table = results.paths
    rows = np.flatnonzero(np.isin(table.verdict, [v.rank for v in verdicts]))
    names = table.names
    return [
        (names[s], names[d])
        for s, d in zip(table.src[rows].tolist(), table.dst[rows].tolist(), strict=True)
    ]


def larger_plan(
    old: ProbePlan, iterations: int | None, min_samples: int = 0, max_rounds: int | None = None
) -> ProbePlan:
    """The re-test's plan: ``iterations``, else twice the run's and at least the policy's
    ``min_samples`` (so a re-test of a preliminary run is final), within ``max_rounds``
    (the agents' max_iterations, warm-up included)."""
    if iterations is not None:
        n = iterations
    else:
        n = max(old.iterations * ITERATIONS_FACTOR, min_samples)
        if max_rounds is not None:
            n = min(n, max_rounds - old.warmup)
    if n < 1:
        raise UsageError("--iterations", f"must be >= 1, got {n}")
    return dataclasses.replace(old, iterations=n)


def results_file(run: Path) -> Path:
    """A run directory's results.json; a file as given."""
    return RunDir(run).results_json if run.is_dir() else run


def default_out(run_dir: Path) -> Path:
    """``<run>-retest-<UTC date-time>-<random>`` beside the run, created now with an
    exclusive mkdir: a name derived from the run alone could be planted in advance (a
    symlink or a directory of someone else's at ``<run>-retest``), and a second re-test of
    the same run gets its own directory."""
    base = run_dir if run_dir.is_dir() else run_dir.parent
    return new_run_dir(f"{base.name}-retest", base.parent)
