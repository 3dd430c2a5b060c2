"""The fan-in panel and the terminal's fan-in lines read right (issue: a y tick
`1.25e+03 ms` clipped to `5e+03 ms`, "offload does not pay even at 1 reader(s)" beside
"safe up to 1 concurrent reader" in one sentence, `7936KiB`, a `TTFT (p99)` column holding
two numbers, a level table without units, `686,332 us`): terminal and report built from
one sweep, the same cells in both."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest

from netqual.analysis import fanin
from netqual.analysis.fanin_table import duration_range, headline, level_table
from netqual.base.units import format_gbps
from netqual.model.fanin import ChunkStats, FaninLevel, FaninResult
from netqual.model.node import Node, Role
from netqual.model.plan import ProbePlan
from netqual.model.policy import Policy
from netqual.model.run import Mode, RunMeta
from netqual.model.stats import Metric
from netqual.render.console import LiteralConsole
from netqual.render.fanin import print_fanin
from netqual.report.fanin import fanin_panels, nice_top, tick_label
from netqual.results import summarize
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.workload.load import load_workload

WORKLOAD = load_workload("qwen3-coder-480b-tp8")  # 7.75 MiB a chunk per rank


def level(k: int, p50_ms: float, p99_ms: float, gbps: float) -> FaninLevel:
    p50, p99 = p50_ms * 1000, p99_ms * 1000
    c = ChunkStats(1000 * k, p50, p99, p99 * 1.3, (), (p99 * 0.97, p99 * 1.03))
    return FaninLevel(k, c, gbps / k, gbps, nodes=tuple(f"c{i}" for i in range(k)))


def sweep(p99s_ms: tuple[float, ...]) -> FaninResult:
    levels = [
        level(k, p99 * 0.8, p99, 8.0 * min(k, 4))
        for k, p99 in zip((1, 4, 8, 16), p99s_ms, strict=True)
    ]
    return fanin.judge("st1", "lmcache", WORKLOAD.chunk_bytes, 2.0, levels)


def results(f: FaninResult, workload: bool) -> Results:
    meta = RunMeta(
        "2026-12-05T08:00:00+00:00", "2026-12-05T08:01:00+00:00", "tcp", Mode.BIPARTITE,
        Policy(), ProbePlan(), {},
    )  # fmt: skip
    nodes = (Node("st1", "198.18.0.9", role=Role.STORAGE),)
    r = Results(meta, nodes, PathTable.from_paths([]), summarize([], Metric.P99), fanin=(f,))
    return dataclasses.replace(r, workload=WORKLOAD if workload else None)


def terminal(r: Results) -> str:
    out = io.StringIO()
    console = LiteralConsole(width=100)
    console.file = out
    print_fanin(console, r)
    return out.getvalue()


@pytest.mark.parametrize(
    ("top_us", "labels"),
    [
        (1250.0, ["0", "0.25 ms", "0.5 ms", "0.75 ms", "1 ms", "1.25 ms"]),
        (5_000.0, ["0", "1 ms", "2 ms", "3 ms", "4 ms", "5 ms"]),
        (4_200.0, ["0", "1 ms", "2 ms", "3 ms", "4 ms", "5 ms"]),
        (686_332.0, ["0", "200 ms", "400 ms", "600 ms", "800 ms"]),
        (3_433_000_000.0, ["0", "1000 s", "2000 s", "3000 s", "4000 s"]),
        (12_500.0, ["0", "2.5 ms", "5 ms", "7.5 ms", "10 ms", "12.5 ms"]),
    ],
)
def test_y_ticks_are_round_numbers_in_one_unit_and_fit_left_of_the_plot(
    top_us: float, labels: list[str]
) -> None:
    top, step, unit, div = nice_top(top_us)
    assert top >= top_us
    got = [tick_label(i * step, div, unit) for i in range(round(top / step) + 1)]
    assert got == labels
    assert all("e+" not in x and len(x) <= 7 for x in got)


def test_rates_and_ranges_in_the_unit_that_suits_them() -> None:
    assert [format_gbps(g) for g in (0.33, 0.8, 1.906, 25.0, 0.0005)] == [
        "330 Mbit/s", "800 Mbit/s", "1.91 Gbit/s", "25.0 Gbit/s", "500 kbit/s",
    ]  # fmt: skip
    assert duration_range(4450, 7900) == "4.5-7.9 ms"
    assert duration_range(850, 1200) == "850 us-1.2 ms"
    assert duration_range(4450, float("inf")) == "4.5 ms or more"


def test_offload_that_does_not_pay_and_safe_fan_in_are_two_sentences() -> None:
    """A sweep with no knee whose every level's fetch exceeds the baseline: the headline
    says offload does not pay, then, as its own sentence, what the fan-in alone carries."""
    f = sweep((700.0, 750.0, 800.0, 900.0))  # 700 ms chunks: far over the 20.8 ms budget
    proj = fanin.project(f, WORKLOAD)
    text = headline(f, proj)
    first, second = text.split(". Fan-in alone: ")
    assert first.startswith("st1: offload does not pay even at 1 reader: the projected KV")
    assert "reader(s)" not in text and "safe" not in first
    assert second.startswith("safe up to 16 concurrent readers (a chunk's p99 completion")
    out = terminal(results(f, workload=True))
    flat = " ".join(out.split())
    assert text in flat
    assert "fan-in st1 (lmcache, 7.8 MiB chunks)" in out and "KiB" not in out
    for header in ("KV fetch p50", "KV fetch p99", "TTFT change p50", "TTFT change p99"):
        assert header in out
    assert "TTFT (p99)" not in out


def test_terminal_and_report_show_the_same_cells_with_units() -> None:
    f = sweep((4.5, 5.4, 21.1, 60.0))  # knee at 8
    r = results(f, workload=False)
    out = terminal(r)
    (panel,) = fanin_panels(r)
    assert panel.table == level_table(f)
    assert panel.headline == f"st1: {f.verdict}"
    assert panel.table is not None
    headers, rows = panel.table.headers, panel.table.rows
    assert headers[:7] == (
        "readers", "chunk p50", "chunk p99", "p99 95% CI", "vs first", "chunks", "aggregate",
    )  # fmt: skip
    assert rows[0][1:7] == ("3.6 ms", "4.5 ms", "4.4-4.6 ms", "1.00x first", "1,000", "8.00 Gbit/s")
    assert rows[2][4] == "4.69x knee" and rows[3][4] == "13.33x beyond"
    for row in rows:  # every cell the terminal prints, untruncated, in a line of 100
        table = out.split("readers  chunk p50", 1)[1]  # below the (wrapped) headline
        line = next(ln for ln in table.splitlines() if ln.strip().startswith(row[0] + " "))
        for cell in row[1:7]:
            assert cell in line, (cell, line)
    assert "…" not in out and all(len(ln) <= 100 for ln in out.splitlines())
    for ms in re.findall(r"[\d,]+ us", out):
        assert int(ms.split()[0].replace(",", "")) < 1000, ms  # 686,332 us is 686.3 ms
    # the report's charts: round ticks, the chunk in the project's size words
    chunk_chart = panel.charts[0]
    assert chunk_chart.title == "chunk completion vs readers (lmcache, 7.8 MiB)"
    assert [label for _, label in chunk_chart.yticks] == ["0", "20 ms", "40 ms", "60 ms"]
