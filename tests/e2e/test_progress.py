"""Live progress: the running worst path, ranked and labelled by the policy's metric."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from eventually import eventually
from rich.console import Console

from netqual.base.errors import UsageError
from netqual.model.path import PathResult
from netqual.model.progress import Stage
from netqual.model.stats import Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.render.progress import PlainObserver, ProgressObserver, observer, progress_text
from netqual.results import RunningWorst


def _path(dst: str, verdict: Verdict, p50_us: float | None) -> PathResult:
    """p99 falls as p50 rises, so ranking by the wrong metric picks the wrong path."""
    rtt = None
    if p50_us is not None:
        p99 = 2000.0 - p50_us
        rtt = RttStats(10_000, 1.0, p50_us, p50_us, p99, p99, p99, p50_us, 1.0)
    return PathResult("a", dst, "tcp", verdict, (), rtt=rtt)


def test_running_worst_orders_by_verdict_then_by_the_policy_metric() -> None:
    worst = RunningWorst(Metric.P50)
    assert worst.add(_path("b", Verdict.SAFE, 20.0)).dst == "b"
    assert worst.add(_path("c", Verdict.SAFE, 30.0)).dst == "c"
    assert worst.add(_path("d", Verdict.SAFE, 25.0)).dst == "c"
    assert worst.add(_path("e", Verdict.MARGINAL, 10.0)).dst == "e"
    assert worst.add(_path("f", Verdict.UNSAFE, None)).dst == "f"
    assert worst.add(_path("g", Verdict.UNSAFE, 900.0)).dst == "f"


def test_progress_names_the_metric_the_policy_judges() -> None:
    path = _path("b", Verdict.MARGINAL, 250.0)
    assert path.rtt is not None
    text = progress_text(path, Metric.P50)
    assert text.startswith("worst: a -> b marginal (p50 ")
    assert "p99" not in text
    assert progress_text(_path("c", Verdict.UNSAFE, None), Metric.P50).endswith("(failed)")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _plain(clock: FakeClock) -> tuple[PlainObserver, io.StringIO]:
    buf = io.StringIO()
    console = Console(file=buf, width=100, force_terminal=False, color_system=None)
    return PlainObserver(console, Metric.P50, clock=clock, ticker=False), buf


def test_plain_progress_prints_each_phase_and_at_most_one_line_per_30_s() -> None:
    clock = FakeClock()
    shown, buf = _plain(clock)
    with shown:
        shown.phase(Stage.PREFLIGHT, 0, 8)
        shown.phase(Stage.PREFLIGHT, 0, 8)  # the coordinator's own check: same phase
        shown.phase(Stage.PINGPONG, 7, 28, done_before=4)
        for i in range(10):  # 10 pairs in 20 s: no line
            clock.now += 2
            shown.item(_path(f"d{i}", Verdict.SAFE, 20.0 + i))
        clock.now += 11  # 31 s since the phase line: the next event prints one
        shown.step()
        shown.item(_path("x", Verdict.MARGINAL, 250.0))
        shown.phase(Stage.BULK, 5, 24)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "pre-flight: agents 0/8, 0:00:00 elapsed, ETA unknown until one finishes"
    # every phase ends with a line of what it did (issue 36: plain progress had none)
    assert lines[1] == "pre-flight done: agents 0/8 in 0:00:00"
    assert lines[2].startswith("ping-pong: round 1/7, pairs 4/28, 0:00:00 elapsed")
    # 10 pairs in 31 s: 14 left at that rate is 43 s
    assert lines[3] == (
        "ping-pong: round 2/7, pairs 14/28, 0:00:31 elapsed, ETA 0:00:43; "
        "worst: a -> d9 offload-safe (p50 29.0 us)"
    )
    assert lines[4] == "ping-pong done: pairs 15/28 in 0:00:31"
    assert lines[5].startswith("bulk: wave 1/5, pairs 0/24, 0:00:00 elapsed")
    assert lines[6] == "bulk done: pairs 0/24 in 0:00:00"  # when the display closes
    assert len(lines) == 7


def test_plain_progress_ticks_when_nothing_finishes() -> None:
    """A log never looks hung: with no event for the interval, the timer prints a line."""
    buf = io.StringIO()
    console = Console(file=buf, width=100, force_terminal=False, color_system=None)
    with PlainObserver(console, Metric.P99, every_s=0.05) as shown:
        shown.phase(Stage.INTERFERENCE, 0, 8)
        eventually(
            lambda: buf.getvalue().count("\n") >= 2, within_s=30, every_s=0.02, what=buf.getvalue
        )
    lines = buf.getvalue().splitlines()
    assert len(lines) >= 2
    assert lines[1].startswith("interference: paths re-measured alone 0/8, ")


def test_rich_progress_shows_the_phase_and_its_counts_at_once() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=100, force_terminal=True, color_system=None)
    with ProgressObserver(console, Metric.P50) as shown:
        shown.phase(Stage.PINGPONG, 7, 28)
        shown.progress.refresh()
        first = buf.getvalue()
        shown.item(_path("b", Verdict.UNSAFE, 900.0))
        shown.progress.refresh()
    assert "ping-pong" in first and "round 1/7, pairs 0/28" in first
    assert "pairs 1/28" in buf.getvalue() and "worst: a -> b unsafe" in buf.getvalue()
    with pytest.raises(UsageError, match="--progress"), observer(console, "fancy", Metric.P99):
        pass


def _screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: text, CR/LF, cursor up/down/column and erase
    in line (the sequences rich's live display writes); colours ignored."""
    import re

    rows: list[str] = [""]
    row = col = 0
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\x1b":
            m = re.match(r"\x1b\[\??(\d*)(?:;\d*)*([A-Za-z])", raw[i:])
            if m is None:
                i += 2
                continue
            n, cmd = int(m.group(1) or 1), m.group(2)
            if cmd == "A":
                row = max(0, row - n)
            elif cmd == "B":
                row += n
            elif cmd == "G":
                col = n - 1
            elif cmd == "K":
                rows[row] = "" if m.group(1) == "2" else rows[row][:col]
            i += m.end()
        else:
            if ch == "\r":
                col = 0
            elif ch == "\n":
                row, col = row + 1, 0
            elif ch.isprintable():
                line = rows[row].ljust(col)
                rows[row] = line[:col] + ch + line[col + 1 :]
                col += 1
            i += 1
        while len(rows) <= row:
            rows.append("")
    return rows


def test_rich_progress_leaves_no_stale_bar_beside_what_the_run_prints(
    agents: Any, tmp_path: Path
) -> None:
    """Issue 36: the pre-flight check printed on another console than the live bar, so a
    dead 'pre-flight ━━━ agents 0/3' line stayed beside 'all 3 agents ready'."""
    import os
    import pty
    import subprocess
    import sys

    from agentpool import cli_env
    from e2e_cli import write_inventory

    procs = agents.start_many([(f"n{i}",) for i in range(3)], timeout_s=90)
    inv = tmp_path / "inv.toml"
    write_inventory(inv, procs, agents.token_file)
    plan = ["--iterations", "300", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
    cmd = [sys.executable, "-m", "netqual", "run", str(inv), "--out", str(tmp_path / "r")]
    master, slave = pty.openpty()
    env = cli_env(TERM="xterm-256color")
    proc = subprocess.Popen(
        [*cmd, *plan, "--interference-sample", "0", "--progress", "rich"],
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    shown = _screen(b"".join(chunks).decode(errors="replace"))
    assert any("all 3 agents ready" in x for x in shown), shown
    assert not [x for x in shown if "pre-flight" in x and "agents 0/3" in x], shown
