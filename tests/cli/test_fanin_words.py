"""The fan-in sentences never contradict each other and say what a knee is before using
the word (issue 36): the terminal, report.html and `report --workload` of one run with
three swept storage nodes, as a user reads them.

- stor01: the knee at 4 readers, where the readers share rack uplinks and no other storage
  node was read by the same readers: the verdict cannot tell the port from the uplinks, so
  the fix names both (it once said "give stor01 more bandwidth" beside "the uplinks are the
  likelier cause"). With the workload offload still pays at 4.
- stor02: level 2 preliminary (its p99 interval straddles the factor): with the workload
  "offload pays up to 4" says it rests on that preliminary level, and the decision says
  "not judged" (never "safe").
- stor03: no knee, but its chunks are slow: offload does not pay even at 1 reader, whatever
  the fan-in, so the fix is not "storage nodes so each holds at most 1 readers" (which
  cannot help at 1 reader) and nothing says it pays.
"""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results

from netqual.analysis import fanin
from netqual.model.fanin import ChunkStats, FaninLevel
from netqual.workload.load import load_workload

WORKLOAD = "qwen3-coder-480b-tp8"  # 7.8 MiB chunks per rank, 36.4 ms to read one locally
KNEE_WORDS = "chunk's p99 completion"  # the words that say what a knee is


RACKS = {"gpu01": "r01", "gpu02": "r01", "gpu03": "r02", "gpu04": "r02"}  # make_results(8, ...)


def _level(k: int, p99_ms: float, readers: tuple[str, ...], spread: float = 0.03) -> FaninLevel:
    """A level of ``k`` readers (the first k of ``readers``), its chunk p99 and interval."""
    p99, nodes = p99_ms * 1000, readers[:k]
    ci = (p99 * (1 - spread), p99 * (1 + spread))
    chunk = ChunkStats(1000 * k, p99 * 0.8, p99, p99 * 1.3, (), ci)
    racks = [RACKS[n] for n in nodes]
    shared = tuple(
        f"{r} ({racks.count(r)} readers)" for r in sorted(set(racks)) if racks.count(r) > 1
    )
    return FaninLevel(k, chunk, 8.0 / k, 8.0, nodes=nodes, shared_uplinks=shared)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four compute nodes in two racks, four storage nodes, each swept at 1, 2, 4 readers."""
    chunk = load_workload(WORKLOAD).chunk_bytes
    a = ("gpu01", "gpu03", "gpu02", "gpu04")  # round robin over the racks: shared at 4
    c = ("gpu03", "gpu01", "gpu04", "gpu02")  # other readers at each level: no contrast
    d = ("gpu04", "gpu02", "gpu03", "gpu01")  # and others again
    sweeps = {
        "stor01": [_level(1, 5, a), _level(2, 6, a), _level(4, 20, a)],
        "stor02": [_level(1, 5, a), _level(2, 10, a, spread=0.3), _level(4, 30, a)],
        "stor03": [_level(1, 150, d), _level(2, 160, d), _level(4, 170, d)],
        "stor04": [_level(1, 5, c), _level(2, 6, c), _level(4, 20, c)],
    }
    judged = fanin.judge_all(
        [fanin.judge(name, "lmcache", chunk, 2.0, levels) for name, levels in sweeps.items()]
    )
    results = make_results(8, storage_every=2, samples=10_000, all_safe=True)
    assert {n.name: n.rack for n in results.nodes if n.name in RACKS} == RACKS
    results = dataclasses.replace(results, fanin=judged)
    return write_results(tmp_path_factory.mktemp("fanin-words") / "results.json", results)


def _said(
    args: list[str], run: Path, tmp: Path, mp: pytest.MonkeyPatch, cap: pytest.CaptureFixture[str]
) -> str:
    r = run_in_process(args, tmp, mp, cap)
    assert r.returncode == 0, r.stdout + r.stderr
    return " ".join(r.stdout.split())


def _page(
    run: Path, tmp: Path, mp: pytest.MonkeyPatch, cap: pytest.CaptureFixture[str], *extra: str
) -> str:
    page = tmp / f"r{len(extra)}.html"
    _said(["report", str(run), "--html", str(page), *extra], run, tmp, mp, cap)
    text = re.sub(
        r"<style.*?</style>|<script.*?</script>|<title>.*?</title>",
        " ",
        page.read_text(),
        flags=re.S,
    )
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def _holds(text: str, workload: bool) -> None:
    """What every output must hold, whatever its layout."""
    first = text.lower().index("knee")
    assert KNEE_WORDS in text[:first], text[max(0, first - 300) : first + 100]
    assert "reader(s)" not in text and not re.search(r"\b1 readers\b", text), text
    # stor01's knee is stor02's too, with the same readers over the same uplinks: the fix is
    # the uplinks; stor04's sits where nothing tells its port from the uplinks: both
    low = text.lower()  # an action starts a sentence on the page: "Relieve ..."
    assert "relieve the shared rack uplinks (r01, r02) or spread the readers" in low
    assert "give stor01 more bandwidth" not in low
    assert (
        "give stor04 more bandwidth or fewer readers (at most 2 readers), or relieve the "
        "shared rack uplinks (r01, r02); sweep a second storage node"
    ) in low
    # stor03 never pays: nothing says it does, and no spread over storage nodes is offered
    assert "stor03: offload pays" not in text
    assert "holds at most 1 reader" not in text
    if workload:
        assert "stor03: offload does not pay even at 1 reader" in text
        assert "keep qwen/qwen3-coder-480b-a35b-instruct's kv off stor03" in low
        assert "more storage nodes do not help" in text
        # stor02's "pays up to 4" rests on its preliminary level 2, and says so
        assert (
            "stor02: offload pays up to 4 concurrent readers (preliminary: the chunk p99 at 2 "
            "readers is not yet sure"
        ) in text
        assert "stor01: offload pays up to 4 concurrent readers:" in text
        assert "offload of Qwen/Qwen3-Coder-480B-A35B-Instruct still pays at 4 readers" in text
    assert (
        "stor02: safe up to 1 concurrent reader (preliminary at 2" in text
        or "Fan-in alone: safe up to 1 concurrent reader (preliminary at 2" in text
    )
    assert "preliminary at 2 readers, not judged" in text


def test_terminal_says_what_a_knee_is_and_never_contradicts_itself(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report and the gate (which lists every blocker the report's first three leave)."""
    for extra, workload in (((), False), (("--workload", WORKLOAD), True)):
        report = _said(["report", str(run), *extra], run, tmp_path, monkeypatch, capsys)
        gate = run_in_process(["gate", str(run), *extra], tmp_path, monkeypatch, capsys)
        assert gate.returncode == 1, gate.stdout + gate.stderr
        _holds(report + " " + " ".join(gate.stdout.split()), workload)


def test_report_html_says_what_a_knee_is_and_never_contradicts_itself(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _holds(_page(run, tmp_path, monkeypatch, capsys), workload=False)
    _holds(_page(run, tmp_path, monkeypatch, capsys, "--workload", WORKLOAD), workload=True)
