"""`netqual diff` on columns: the same answer, and the same --json text, as the
record-per-path comparison it replaced, for every kind of path it meets; and a diff of a
large run prints a bounded listing while --json still lists every common path."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Run, run_in_process
from factories import make_results, write_results

from netqual.analysis.diff import PathChange, diff_runs
from netqual.analysis.diffjson import diff_json
from netqual.model.path import PathResult
from netqual.model.stats import Ci95, Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.table.paths import PathTable
from netqual.table.run import Results

SAFE, MARGINAL, UNSAFE = Verdict.SAFE, Verdict.MARGINAL, Verdict.UNSAFE


# -- the oracle: the dict-per-path comparison diff_runs was before it used columns --------


def _p99_up(old: PathResult, new: PathResult, pct: float, floor: float) -> bool:
    if old.rtt is None or new.rtt is None or old.rtt.p99_us <= 0:
        return False
    delta = new.rtt.p99_us - old.rtt.p99_us
    return 100.0 * delta / old.rtt.p99_us > pct and delta >= floor


def _size(c: PathChange) -> float:
    return float("inf") if c.delta_us is None else abs(c.delta_us)


def _change(c: PathChange) -> dict[str, Any]:
    return {
        "src": c.new.src, "dst": c.new.dst, "old_verdict": c.old.verdict.value,
        "new_verdict": c.new.verdict.value, "old_us": c.old_us, "new_us": c.new_us,
        "delta_us": c.delta_us, "within_noise": c.within_noise,
    }  # fmt: skip


def _path(p: PathResult) -> dict[str, str]:
    return {"src": p.src, "dst": p.dst, "verdict": p.verdict.value}


def _oracle(old: Results, new: Results, pct: float = 25.0, floor: float = 5.0) -> dict[str, Any]:
    metric = new.run.policy.metric
    by_key = {p.key: p for p in old.paths}
    matched: set[tuple[str, str]] = set()
    changes: list[PathChange] = []
    fresh: list[PathResult] = []
    for p in new.paths:
        o = by_key.get(p.key) or by_key.get((p.dst, p.src))
        if o is None:
            fresh.append(p)
            continue
        matched.add(o.key)
        changes.append(PathChange(o, p, metric))
    missing = [] if new.retest_of else [p for p in old.paths if p.key not in matched]
    before = [by_key[k] for k in matched] if new.retest_of else list(old.paths)
    changed = [c for c in changes if c.class_change != 0]
    changed.sort(key=lambda c: (-c.class_change, -_size(c), c.label))
    changes.sort(key=lambda c: (-_size(c), c.label))
    up = [c for c in changes if c.class_change <= 0 and _p99_up(c.old, c.new, pct, floor)]
    olds, news = Counter(p.verdict for p in before), Counter(p.verdict for p in new.paths)
    return {
        "metric": metric.value,
        "old": "old",
        "new": "new",
        "counts": {v.value: [olds.get(v, 0), news.get(v, 0)] for v in Verdict},
        "worse": [_change(c) for c in changed if c.class_change > 0] + [_change(c) for c in up],
        "worse_rule": {"metric": "p99", "max_p99_increase_pct": pct, "min_delta_us": floor},
        "changed_class": [_change(c) for c in changed],
        "deltas": [_change(c) for c in changes],
        "new_paths": [_path(p) for p in fresh],
        "missing_paths": [_path(p) for p in missing],
    }


# -- runs with every kind of path ---------------------------------------------------------


def _path_to(
    src: str,
    dst: str,
    verdict: Verdict = SAFE,
    p99: float | None = 40.0,
    ci: tuple[str, float, float] | None = None,
) -> PathResult:
    rtt = None
    if p99 is not None:
        rtt = RttStats(10_000, 10.0, 20.0, 30.0, p99, p99 * 1.2, p99 * 1.5, 21.0, 3.0)
        if ci is not None:
            rtt = replace(rtt, ci95=Ci95(**{Metric(ci[0]).value: (ci[1], ci[2])}))
    return PathResult(src=src, dst=dst, transport="tcp", verdict=verdict, reasons=(), rtt=rtt)


def _run(paths: Sequence[PathResult], retest_of: str | None = None) -> Results:
    base = make_results(2)
    return replace(base, paths=PathTable.from_paths(paths), retest_of=retest_of)


def _old_and_new(a: str, b: str, c: str, d: str) -> tuple[list[PathResult], list[PathResult]]:
    """Four node names; old and new paths that meet each rule of the comparison once."""
    old = [
        _path_to(a, b, SAFE, 20.0),  # p99 +25%, +5 us: not beyond 25% -> not worse
        _path_to(a, c, SAFE, 16.0),  # p99 +31%, +5 us: worse, same class
        _path_to(a, d, SAFE, 40.0, ("p99", 36.0, 44.0)),  # CIs overlap: noise
        _path_to(b, c, MARGINAL, 300.0, ("p99", 290.0, 310.0)),  # CIs apart; better class
        _path_to(b, d, SAFE, None),  # no RTT before: delta unknown, sorts first
        _path_to(c, d, SAFE, 0.0),  # p99 0: never a p99 rise
        _path_to(d, a, UNSAFE, 900.0),  # missing: new's (a, d) matches old's (a, d) first
        _path_to(c, b, SAFE, 50.0),  # twice in old: the last one counts
        _path_to(c, b, MARGINAL, 250.0),
        _path_to(d, b, SAFE, 30.0),  # missing from new
        _path_to(d, c, SAFE, 60.0, ("p50", 1.0, 99.0)),  # a CI of another metric: unknown
    ]
    new = [
        _path_to(a, b, SAFE, 25.0),
        _path_to(a, c, SAFE, 21.0),
        _path_to(a, d, SAFE, 42.0, ("p99", 38.0, 46.0)),
        _path_to(b, c, SAFE, 40.0, ("p99", 35.0, 45.0)),
        _path_to(b, d, UNSAFE, 700.0),
        _path_to(c, d, MARGINAL, 250.0),
        _path_to(a, d, SAFE, 40.0),  # (a, d) twice in new: both compared with old's
        _path_to(b, c, MARGINAL, 260.0),
        _path_to(d, c, SAFE, 70.0, ("p99", 60.0, 80.0)),
        _path_to(a, "new-node", UNSAFE, 800.0),  # a node old never had
        _path_to(c, a, SAFE, 26.0),  # matches old's (a, c) from the other end
        _path_to(c, b, SAFE, 250.0),  # same delta as (a, b) +5 -> label order decides...
        _path_to(a, b, SAFE, 25.0),  # ... and a new key twice keeps both, in row order
    ]
    return old, new


NAME_SETS = {
    "plain": ("gpu01", "gpu02", "stor01", "gpu10"),
    # one name a prefix of another, with characters either side of " " after it
    "prefixes": ("gpu1", "gpu1!", "gpu1\t", "gpu10"),
    "unicode": ("gpü1", "gpu1", "节点", "gpu1-a"),
    # an arrow inside a name: labels compare past the src
    "arrows": ("a", "a -> b", "a - ", "b"),
}


@pytest.mark.parametrize("names", NAME_SETS.values(), ids=list(NAME_SETS))
@pytest.mark.parametrize("retest", [False, True], ids=["run", "retest"])
def test_json_is_the_text_of_the_dict_per_path_comparison(
    names: tuple[str, str, str, str], retest: bool
) -> None:
    old_paths, new_paths = _old_and_new(*names)
    old, new = _run(old_paths), _run(new_paths, retest_of="old-run" if retest else None)
    d = diff_runs(old, new)
    assert "".join(diff_json(d)) == json.dumps(_oracle(old, new), indent=1)


@pytest.mark.parametrize("retest", [False, True], ids=["run", "retest"])
def test_what_the_terminal_shows_matches_the_oracle(retest: bool) -> None:
    old_paths, new_paths = _old_and_new(*NAME_SETS["plain"])
    old, new = _run(old_paths), _run(new_paths, retest_of="old-run" if retest else None)
    d, want = diff_runs(old, new), _oracle(old, new)
    # the records the listing shows are the same paths, in the same order
    assert [_change(c) for c in d.worse] == want["worse"]
    assert [_change(c) for c in d.changed_class] == want["changed_class"]
    assert [_change(c) for c in d.deltas[:5]] == want["deltas"][:5]
    assert [_path(p) for p in d.missing_paths] == want["missing_paths"]
    assert [_path(p) for p in d.new_paths] == want["new_paths"]
    assert len(d.noise) == sum(c["within_noise"] is True for c in want["deltas"])
    assert d.judged == sum(c["within_noise"] is not None for c in want["deltas"])
    measured = [c for c in want["deltas"] if c["delta_us"] is not None]
    assert [_change(c) for c in d.measured] == measured


def test_a_retest_counts_before_only_the_retested_paths() -> None:
    old_paths, new_paths = _old_and_new(*NAME_SETS["plain"])
    d = diff_runs(_run(old_paths), _run(new_paths[:2], retest_of="run1"))
    assert d.old_counts == {SAFE: 2, MARGINAL: 0, UNSAFE: 0}
    assert len(d.missing_paths) == 0
    assert len(d.deltas) == 2


def test_empty_runs_compare() -> None:
    d = diff_runs(_run([]), _run([]))
    assert (len(d.deltas), len(d.new_paths), len(d.missing_paths)) == (0, 0, 0)
    assert "".join(diff_json(d)) == json.dumps(_oracle(_run([]), _run([])), indent=1)
    only_new = _run([_path_to("a", "b")])
    d = diff_runs(_run([]), only_new)
    assert [_path(p) for p in d.new_paths] == [{"src": "a", "dst": "b", "verdict": SAFE.value}]


# -- a large run: bounded listing, complete --json -----------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


def test_a_large_diff_lists_a_bounded_few_and_json_lists_every_path(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    old = make_results(40, histogram=False, bulk=False)  # 780 paths
    names = [n.name for n in old.nodes]
    new = make_results(40, histogram=False, bulk=False, slow_nodes=names[:20], seed=8)
    write_results(tmp_path / "old.json", old)
    write_results(tmp_path / "new.json", new)
    r = cli("diff", "old.json", "new.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert all(p.verdict is SAFE for p in old.paths)
    dropped = sum(1 for p in new.paths if p.verdict is UNSAFE)  # 590: 20 shown
    assert "Paths that changed class" in r.stdout
    assert f"... and {dropped - 20} more" in r.stdout
    assert len(r.stdout.splitlines()) < 100
    r = cli("diff", "old.json", "new.json", "--json", cwd=tmp_path)
    doc = json.loads(r.stdout)
    assert len(doc["deltas"]) == 780
    assert len(doc["changed_class"]) == dropped
    assert doc["metric"] == Metric.P99.value


@pytest.mark.parametrize(
    "names",
    [
        ("gpu1", "gpu1!", "gpu1\t", "gpu10", "gpu1 -"),
        ("a", "a -> b", "c", "b"),  # "a -> c" sorts after "a -> b -> a"
    ],
    ids=["prefixes", "arrows"],
)
def test_equal_changes_sort_by_the_label_text(names: tuple[str, ...]) -> None:
    paths = [_path_to(s, d) for s in names for d in names if s != d]
    d = diff_runs(_run(paths[::-1]), _run(paths))
    labels = [c.label for c in d.deltas]
    assert labels == sorted(labels)
