"""`report --workload` / `gate --workload` re-judge a whole run on the columns (``apply``);
a run judges each pair as it finishes (``judge``). The two must say the same thing about
every path: verdict, numbers and reasons, in every case (failed path, failed cell, no
bulk, measured or interpolated fetch, extra round trips, no RTT, each verdict)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from factories import make_results
from workload_oracle import judge

from netqual.analysis.decision import undecided
from netqual.base.units import MIB
from netqual.model.path import PathResult
from netqual.model.stats import BulkStats, RttStats
from netqual.model.verdict import Verdict
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.workload import Workload, load_workload
from netqual.workload.judge import apply

# 2 x 32 layers x 1 head per rank x 128 x 2 bytes = 16 KiB per token per rank: 64 tokens is
# a 1 MiB chunk (a cell the paths below measure), 96 tokens 1.5 MiB (between cells), 16
# tokens 256 KiB x 8 = 2 MiB in flight (below every cell), 1,024 tokens 16 MiB (above);
# recompute at 6,400 tokens/s: 64 tokens is a 10 ms budget.
WORKLOAD = """[workload]
name = "test-model"
layers = 32
kv_heads = 8
head_dim = 128
dtype = "bf16"
tp = 8
prefill_tokens_per_s = 6400
"""
CHUNKS = (1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB)
DEPTHS = (1, 4, 8, 16)


def workload(tmp_path: Path, tokens: int, extra: str = "") -> Workload:
    path = tmp_path / f"w{tokens}-{len(extra)}.toml"
    path.write_text(f"{WORKLOAD}chunk_tokens = {tokens}\n{extra}", encoding="utf-8")
    return load_workload(path)


def rtt(p50_us: float, p99_us: float) -> RttStats:
    return RttStats(10_000, p50_us * 0.9, p50_us, p50_us, p99_us, p99_us, p99_us, p50_us, 1.0)


def cell(
    chunk: int, depth: int, p99_us: float, gbps: float = 40.0, error: str | None = None
) -> BulkStats:
    return BulkStats(chunk, depth, 32, gbps, p99_us * 0.7, p99_us, p99_us * 1.2, error)


def path(
    i: int, *bulk: BulkStats, rtt_us: float | None = 50.0, error: str | None = None
) -> PathResult:
    return PathResult(
        f"n{i % 7}",
        f"m{i}",
        "tcp",
        Verdict.SAFE,
        ("rtt ok",),
        rtt=None if rtt_us is None else rtt(rtt_us * 0.8, rtt_us),
        bulk=bulk,
        error=error,
    )


def crafted() -> list[PathResult]:
    """One path per case, for a 1 MiB x depth 8 workload (10 ms budget)."""
    return [
        path(0, cell(MIB, 8, 2_000.0), error="timeout"),  # the path failed
        path(1, cell(MIB, 8, 0.0, 0.0, "QP error"), cell(MIB, 8, 2_000.0)),  # its cell failed
        path(2),  # no bulk at all
        path(3, cell(MIB, 8, 0.0, 0.0, "")),  # an empty error: not failed, not good
        path(4, cell(MIB, 8, 2_000.0)),  # measured, safe (5x)
        path(5, cell(MIB, 8, 7_000.0)),  # marginal
        path(6, cell(MIB, 8, 10_000.0)),  # on the unsafe line: marginal
        path(7, cell(MIB, 8, 12_500.0)),  # unsafe, the alternative is faster
        path(8, cell(MIB, 8, 0.0)),  # a zero fetch: infinite speedup
        path(9, cell(MIB, 8, 9_990.0), rtt_us=5.0),  # break-even just above the RTT
        path(10, cell(MIB, 8, 20_000.0), rtt_us=None),  # no RTT: no break-even
        path(11, cell(MIB, 4, 1_000.0), cell(MIB, 16, 3_000.0)),  # between: interpolated
        path(12, cell(2 * MIB, 4, 1_500.0), cell(MIB, 16, 3_000.0)),  # same bytes in flight
        path(13, cell(MIB, 1, 300.0), cell(2 * MIB, 1, 400.0)),  # all below: scaled
        path(14, cell(8 * MIB, 16, 9_000.0), cell(4 * MIB, 16, 6_000.0)),  # all above: 0 us
        path(17, cell(8 * MIB, 16, 9_000.0), cell(4 * MIB, 4, 9_000.0)),  # all above
        path(18, cell(MIB, 8, 10_050.0)),  # break-even exactly 0 us: never
        path(15, cell(MIB, 8, 0.0, 0.0, "refused"), error=None, rtt_us=None),
        path(16, cell(2 * MIB, 8, 900.0, 0.0), cell(MIB, 4, 500.0)),  # 0 Gbit/s is not good
    ]


def shuffled(n: int, w: Workload) -> list[PathResult]:
    """Paths drawn from every case at once: several cells each (the workload's own among
    them), some failed or idle."""
    rng = random.Random(w.chunk_bytes)
    chunks = (*CHUNKS, w.chunk_bytes)
    depths = (*DEPTHS, w.ranks_per_node)

    def any_cell() -> BulkStats:
        error = rng.choice([None] * 6 + ["QP error", ""])
        gbps = rng.choice([0.0, 1.5, 12.3, 50.0])
        p99 = rng.choice([0.0, 500.0, 4_000.0, 9_000.0, rng.uniform(1.0, 30_000.0)])
        return cell(rng.choice(chunks), rng.choice(depths), p99, gbps, error)

    return [
        path(
            i,
            *(any_cell() for _ in range(rng.choice([0, 1, 1, 2, 3, 4]))),
            rtt_us=None if rng.random() < 0.2 else rng.uniform(5.0, 2_000.0),
            error="timeout" if rng.random() < 0.05 else None,
        )
        for i in range(n)
    ]


def run_of(paths: list[PathResult]) -> Results:
    return dataclasses.replace(make_results(2), paths=PathTable.from_paths(paths))


def assert_same_as_judge(paths: list[PathResult], w: Workload) -> Counter[str]:
    """apply() against judge() path by path; returns which cases the paths covered."""
    got = apply(run_of(paths), w)
    assert got.workload is w
    seen: Counter[str] = Counter()
    for i, p in enumerate(paths):
        want = judge(p, w)
        assert got.paths.row(i).workload == want, (i, p)
        seen[want.verdict.value] += 1
        seen["interpolated"] += want.interpolated
        seen["no fetch"] += want.fetch_p99_us is None
        seen["no break-even"] += want.fetch_p99_us is not None and want.break_even_rtt_us is None
        seen["infinite"] += want.speedup == float("inf")
        text = " ".join(want.reasons)
        for words in ("failed, nothing", "read failed", "no bulk read", "scaled at", "cells;"):
            seen[words] += words in text
        seen["round trips"] += "sequential round trips" in text or "no RTT was" in text
    return seen


@pytest.mark.parametrize(
    ("tokens", "extra"),
    [
        (64, ""),  # the cell itself
        (96, ""),  # between cells
        (16, ""),  # below every cell
        (1024, ""),  # above every cell
        (64, "round_trips_per_chunk = 4\n"),
        (96, "safe_speedup = 5.0\nunsafe_speedup = 2.0\nround_trips_per_chunk = 2\n"),
    ],
)
def test_apply_says_what_judge_says_for_every_path(tmp_path: Path, tokens: int, extra: str) -> None:
    w = workload(tmp_path, tokens, extra)
    seen = assert_same_as_judge(crafted() + shuffled(1500, w), w)
    for case in ("offload-safe", "marginal", "unsafe", "failed, nothing", "read failed"):
        assert seen[case], case
    assert seen["no bulk read"] and seen["no fetch"] and seen["interpolated"]
    if extra:
        assert seen["round trips"]


def test_the_crafted_cases_are_the_cases(tmp_path: Path) -> None:
    """The crafted paths cover each case on their own (not only by chance in the shuffle)."""
    seen = assert_same_as_judge(crafted(), workload(tmp_path, 64))
    assert seen["offload-safe"] and seen["marginal"] and seen["unsafe"]
    assert seen["failed, nothing"] == 1, seen
    assert seen["read failed"] == 2, seen
    assert seen["no bulk read"] == 2 and seen["no fetch"] == 5, seen
    assert seen["infinite"] == 2 and seen["no break-even"] == 3, seen
    assert seen["interpolated"] == 6 and seen["scaled at"] == 4 and seen["cells;"] == 1, seen


def test_apply_replaces_only_the_workload_columns(tmp_path: Path) -> None:
    w = workload(tmp_path, 64)
    before = run_of(crafted())
    after = apply(apply(before, workload(tmp_path, 1024)), w)  # a second workload replaces
    assert after.paths.names == before.paths.names
    # the RTT classes stay; each path's verdict is the worse of its RTT and its workload
    rtt = undecided(after.paths)
    assert (rtt.verdict == before.paths.verdict).all()
    assert rtt.reasons == before.paths.reasons
    assert after.paths.workload is not None
    both = np.maximum(before.paths.verdict, after.paths.workload.verdict)
    assert (after.paths.verdict == both).all()
    assert after.paths.workload is not None
    assert after.paths.row(4).workload == judge(before.paths.row(4), w)
    assert (after.paths.workload.budget_us == w.budget_us).all()


def test_apply_to_an_empty_run(tmp_path: Path) -> None:
    got = apply(run_of([]), workload(tmp_path, 64))
    assert len(got.paths) == 0 and got.paths.workload is not None
    assert got.paths.workload.reasons == ()


def test_interpolation_known_answers(tmp_path: Path) -> None:
    """Numbers worked by hand, not only agreement: between 1 MiB x 4 (1,000 us) and
    1 MiB x 16 (3,000 us) a 1 MiB x 8 fetch is a third of the way; below every cell the
    nearest is scaled at its goodput."""
    w = workload(tmp_path, 64)
    got = apply(run_of(crafted()), w).paths
    between = got.row(11).workload
    assert between is not None and between.interpolated
    assert between.fetch_p99_us == pytest.approx(1_000.0 + 2_000.0 / 3)
    assert "1MiB x depth 4 and 1MiB x depth 16 cells" in between.reasons[1]
    scaled = got.row(13).workload  # 2 MiB x 1 at 40 Gbit/s, 6 MiB short of 8 MiB in flight
    assert scaled is not None
    assert scaled.fetch_p99_us == pytest.approx(400.0 + 6 * MIB * 8 / 40e3)
    assert "2MiB x depth 1 cell (scaled at its 40.0 Gbit/s)" in scaled.reasons[1]
