"""Paths judged by a workload: the verdict from chunk fetch vs budget (known answers), the
results.json keys, `report --workload` on an older run (interpolated, and it says so),
the gate rule, and `--workload` on run/probe/demo adding the chunk to the probe plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool
from cli_helpers import finished_paths, run_in_process
from e2e_cli import netqual_here
from factories import make_results, write_results
from workload_oracle import estimate_fetch

from netqual.base.units import KIB, MIB
from netqual.files.schema import validate
from netqual.model.path import PathResult, WorkloadResult
from netqual.model.plan import ProbePlan
from netqual.model.stats import BulkStats, RttStats
from netqual.model.verdict import Verdict
from netqual.workload import Workload, load_workload
from netqual.workload.judge import add_to_plan, judged


def judge(path: PathResult, w: Workload) -> WorkloadResult:
    """What a run records for one path (``judged``: the columnar rule on one row)."""
    got = judged(path, w).workload
    assert got is not None
    return got


MP = pytest.MonkeyPatch
CAP = pytest.CaptureFixture[str]

# 2 x 32 layers x 1 head per rank x 128 x 2 bytes = 16 KiB per token per rank;
# 512 tokens = 8 MiB per rank, exactly a default bulk cell; recompute 512 / 51,200 = 10 ms.
EXACT = """[workload]
name = "test-model"
layers = 32
kv_heads = 8
head_dim = 128
dtype = "bf16"
tp = 8
chunk_tokens = 512
prefill_tokens_per_s = 51200
prompt_tokens = 5120
"""


def exact_workload(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "exact.toml"
    path.write_text(EXACT + extra, encoding="utf-8")
    return path


def rtt(p50_us: float, p99_us: float) -> RttStats:
    return RttStats(10_000, p50_us * 0.9, p50_us, p50_us, p99_us, p99_us, p99_us, p50_us, 1.0)


def cell(chunk: int, depth: int, p50_us: float, p99_us: float, gbps: float = 50.0) -> BulkStats:
    return BulkStats(chunk, depth, 32, gbps, p50_us, p99_us, p99_us)


def path_with(*bulk: BulkStats, error: str | None = None) -> PathResult:
    return PathResult(
        "a", "b", "tcp", Verdict.SAFE, ("rtt ok",), rtt=rtt(40.0, 50.0), bulk=bulk, error=error
    )


@pytest.mark.parametrize(
    ("p99_us", "verdict", "speedup", "words"),
    [
        (4_000.0, Verdict.SAFE, 2.5, "offload pays 2.5x"),
        (5_000.0, Verdict.SAFE, 2.0, "offload pays 2.0x"),  # on the line: safe
        (6_000.0, Verdict.MARGINAL, 10 / 6, "short of the 2x needed"),
        (10_000.0, Verdict.MARGINAL, 1.0, "offload pays 1.0x"),  # on the unsafe line
        (12_500.0, Verdict.UNSAFE, 0.8, "the alternative is 1.2x faster"),
    ],
)
def test_verdict_lines_known_answers(
    p99_us: float, verdict: Verdict, speedup: float, words: str, tmp_path: Path
) -> None:
    w = load_workload(exact_workload(tmp_path))
    r = judge(path_with(cell(8 * MIB, 8, p99_us * 0.8, p99_us)), w)
    assert r.verdict is verdict
    assert r.speedup == pytest.approx(speedup)
    assert r.budget_us == pytest.approx(10_000.0)
    assert r.fetch_p99_us == p99_us and not r.interpolated
    room = 50.0 + 10_000.0 - p99_us
    assert r.break_even_rtt_us == (pytest.approx(room) if room > 0 else None)
    text = " ".join(r.reasons)
    assert words in text
    assert "a 512-token chunk of test-model at TP8 is 8.0 MiB per rank" in text
    assert "to all 8 ranks of a node" in text and "to recompute" in text


def test_failed_and_unmeasured_paths_are_unsafe(tmp_path: Path) -> None:
    w = load_workload(exact_workload(tmp_path))
    failed = judge(path_with(error="timeout"), w)
    assert failed.verdict is Verdict.UNSAFE and "failed" in failed.reasons[0]
    none = judge(path_with(), w)
    assert none.verdict is Verdict.UNSAFE and "no bulk read" in none.reasons[0]
    broken = judge(path_with(BulkStats(8 * MIB, 8, 0, 0.0, 0, 0, 0, error="QP error")), w)
    assert broken.verdict is Verdict.UNSAFE and "QP error" in broken.reasons[0]


def test_round_trips_per_chunk_adds_the_rtt(tmp_path: Path) -> None:
    w = load_workload(exact_workload(tmp_path, "round_trips_per_chunk = 32\n"))
    r = judge(path_with(cell(8 * MIB, 8, 3_000.0, 4_000.0)), w)
    assert r.fetch_p99_us == pytest.approx(4_000.0 + 31 * 50.0)
    assert r.fetch_p50_us == pytest.approx(3_000.0 + 31 * 40.0)
    assert r.break_even_rtt_us == pytest.approx(50.0 + (10_000.0 - 5_550.0) / 32)
    assert "32 sequential round trips" in " ".join(r.reasons)


def test_interpolation_between_and_beyond_cells() -> None:
    cells = (cell(1 * MIB, 8, 1_000.0, 2_000.0), cell(4 * MIB, 8, 4_000.0, 8_000.0, 40.0))
    exact = estimate_fetch(cells, 4 * MIB, 8)
    assert exact is not None and not exact.interpolated and exact.p99_us == 8_000.0
    mid = estimate_fetch(cells, 2 * MIB, 8)  # 16 MiB in flight: a third of the way
    assert mid is not None and mid.interpolated
    assert mid.p50_us == pytest.approx(2_000.0) and mid.p99_us == pytest.approx(4_000.0)
    same_inflight = estimate_fetch(cells, 2 * MIB, 4)  # 8 MiB in flight = the 1 MiB x 8 cell
    assert same_inflight is not None and same_inflight.p99_us == pytest.approx(2_000.0)
    beyond = estimate_fetch(cells, 8 * MIB, 8)  # 32 MiB more at the 4 MiB cell's 40 Gbit/s
    extra_us = 32 * MIB * 8 / 40e3
    assert beyond is not None and beyond.p99_us == pytest.approx(8_000.0 + extra_us)
    assert "scaled at its 40.0 Gbit/s" in beyond.basis
    assert estimate_fetch((), MIB, 1) is None


def test_add_to_plan_adds_the_chunk_at_ranks_per_node(tmp_path: Path) -> None:
    w = load_workload("llama-3.1-70b-tp8")
    plan = add_to_plan(ProbePlan(chunks_bytes=(64 * KIB,), depths=(1,)), w)
    assert plan.chunks_bytes == (64 * KIB, 10 * MIB) and plan.depths == (1, 8)
    same = add_to_plan(ProbePlan(chunks_bytes=(10 * MIB,), depths=(8,)), w)
    assert same.chunks_bytes == (10 * MIB,) and same.depths == (8,)


def results_with_workload(
    tmp_path: Path, workload: Path | str, monkeypatch: MP, capsys: CAP, *extra: str
) -> dict[str, Any]:
    results = write_results(tmp_path / "results.json", make_results(8, seed=3))
    r = run_in_process(
        ["report", str(results), "--workload", str(workload), "--json", *extra],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    validate(doc, "report --json")
    return doc


def test_report_workload_on_an_exactly_measured_cell(
    tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    doc = results_with_workload(tmp_path, exact_workload(tmp_path), monkeypatch, capsys)
    w = doc["workload"]
    assert w["chunk_bytes"] == 8 * MIB and w["kv_bytes_per_token_per_rank"] == 16 * KIB
    assert w["ranks_per_node"] == 8 and w["budget_us"] == pytest.approx(10_000.0)
    for p in doc["paths"]:
        pw = p["workload"]
        cell8 = next(b for b in p["bulk"] if b["chunk_bytes"] == 8 * MIB and b["depth"] == 8)
        assert pw["fetch_us"]["p99"] == pytest.approx(cell8["completion_us"]["p99"])
        assert pw["speedup"] == pytest.approx(10_000.0 / cell8["completion_us"]["p99"])
        assert pw["interpolated"] is False
        assert pw["verdict"] in {"offload-safe", "marginal", "unsafe"}
        assert p["verdict"] in {"offload-safe", "marginal", "unsafe"}  # RTT verdict kept


def test_report_workload_on_an_older_run_interpolates_and_says_so(
    tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    doc = results_with_workload(tmp_path, "llama-3.1-70b-tp8", monkeypatch, capsys)
    assert doc["workload"]["chunk_bytes"] == 10_485_760
    assert all(p["workload"]["interpolated"] for p in doc["paths"])
    assert all("interpolated from the measured" in " ".join(p["workload"]["reasons"])
               for p in doc["paths"])  # fmt: skip
    results = tmp_path / "results.json"
    r = run_in_process(
        ["report", str(results), "--workload", "llama-3.1-70b-tp8"], tmp_path, monkeypatch, capsys
    )
    assert r.returncode == 0, r.stderr
    assert "What this means for meta-llama/Llama-3.1-70B" in r.stdout
    assert "RTT verdict" in r.stdout and "workload verdict" in r.stdout
    assert "* fetch interpolated from other measured cells" in r.stdout
    assert "same-rack" in r.stdout and "cross-rack" in r.stdout


def test_results_round_trip_keeps_the_workload(
    tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    doc = results_with_workload(tmp_path, "deepseek-v3-tp8", monkeypatch, capsys)
    again = tmp_path / "judged.json"
    again.write_text(json.dumps(doc), encoding="utf-8")
    r = run_in_process(["report", str(again), "--json"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    back = json.loads(r.stdout)
    assert back["workload"] == doc["workload"]
    assert [p["workload"] for p in back["paths"]] == [p["workload"] for p in doc["paths"]]


def gate_with(
    tmp_path: Path, monkeypatch: MP, capsys: CAP, verdict: str, *extra: str
) -> tuple[int, str, str]:
    results = write_results(tmp_path / "results.json", make_results(4, all_safe=True))
    profile = tmp_path / "profile.toml"
    profile.write_text(f'[limits]\nmin_workload_verdict = "{verdict}"\n', encoding="utf-8")
    r = run_in_process(
        ["gate", str(results), "--profile", str(profile), *extra], tmp_path, monkeypatch, capsys
    )
    return r.returncode, r.stdout, r.stderr


def test_gate_requires_the_workload_verdict(tmp_path: Path, monkeypatch: MP, capsys: CAP) -> None:
    rc, out, _ = gate_with(tmp_path, monkeypatch, capsys, "offload-safe")
    assert rc == 1 and "no workload verdict" in out
    # 8 MiB x 8 at 100 Gbit/s takes ~5-7 ms: a 100 ms budget is safe, a 1 ms one is not
    wl = exact_workload(tmp_path)
    wl.write_text(EXACT.replace("51200", "5120"), encoding="utf-8")
    rc, out, _ = gate_with(tmp_path, monkeypatch, capsys, "offload-safe", "--workload", str(wl))
    assert rc == 0, out
    wl.write_text(EXACT.replace("51200", "512000"), encoding="utf-8")
    rc, out, _ = gate_with(tmp_path, monkeypatch, capsys, "offload-safe", "--workload", str(wl))
    assert rc == 1
    assert "below offload-safe for the workload" in out and "workload unsafe, speedup" in out


def test_gate_profile_rejects_an_unknown_workload_verdict(
    tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    rc, _, err = gate_with(tmp_path, monkeypatch, capsys, "great")
    assert rc == 2
    assert "limits.min_workload_verdict" in err and "great" in err


def test_no_bulk_and_oversized_chunks_are_refused(
    tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    r = run_in_process(
        ["probe", "127.0.0.1:1", "127.0.0.1:2", "--no-bulk", "--workload", "llama-3.1-70b-tp8"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert r.returncode == 2 and "--no-bulk" in r.stderr
    big = exact_workload(tmp_path, "")
    big.write_text(EXACT.replace("chunk_tokens = 512", "chunk_tokens = 8192"), encoding="utf-8")
    r = run_in_process(
        ["probe", "127.0.0.1:1", "127.0.0.1:2", "--workload", str(big)],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert r.returncode == 2
    assert "workload.chunk_tokens" in r.stderr and "128.0 MiB" in r.stderr


SMALL = ["--iterations", "500", "--warmup", "50", "--chunk", "64KiB", "--depth", "1"]


def test_probe_with_workload_measures_the_chunk(agents: AgentPool, tmp_path: Path) -> None:
    a, b = agents.start_many([("gpu01",), ("gpu02",)])
    r = netqual_here(
        "probe", f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}",
        "--token-file", str(agents.token_file), "--workload", str(exact_workload(tmp_path)),
        "--json", *SMALL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    path = json.loads(r.stdout)
    cells = {(c["chunk_bytes"], c["depth"]) for c in path["bulk"]}
    assert (8 * MIB, 8) in cells and (64 * KIB, 1) in cells
    wl = path["workload"]
    assert wl["interpolated"] is False and wl["budget_us"] == pytest.approx(10_000.0)
    measured = next(c for c in path["bulk"] if (c["chunk_bytes"], c["depth"]) == (8 * MIB, 8))
    assert wl["fetch_us"]["p99"] == pytest.approx(measured["completion_us"]["p99"])


@pytest.mark.slow
def test_demo_with_a_preset_shows_both_verdicts_for_every_path(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = netqual_here(
        "demo", "--loopback", "--agents", "3", "--out",
        str(out), "--workload", "qwen3-coder-480b-tp8", *SMALL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "What this means for Qwen/Qwen3-Coder-480B-A35B-Instruct" in r.stdout
    assert "RTT verdict" in r.stdout and "workload verdict" in r.stdout
    doc = json.loads((out / "results.json").read_text())
    validate(doc, "results.json")
    assert doc["workload"]["chunk_bytes"] == 8_126_464
    assert doc["workload"]["baseline"]["kind"] == "local-read"
    assert 8_126_464 in doc["run"]["plan"]["chunks_bytes"] and 8 in doc["run"]["plan"]["depths"]
    for p in doc["paths"]:
        assert p["workload"]["interpolated"] is False
        assert any(c["chunk_bytes"] == 8_126_464 and c["depth"] == 8 for c in p["bulk"])
        assert f"{p['src']} -> {p['dst']}" in r.stdout
    page = (out / "report.html").read_text(encoding="utf-8")
    # the first screen: both verdicts in the header, "What to do", then the workload's detail
    assert page.index('id="two-verdicts"') < page.index('id="recommendations"')
    assert page.index('id="recommendations"') < page.index('id="workload"')
    lines = finished_paths(out / "results.jsonl")
    assert len(lines) == len(doc["paths"]) and all("workload" in p for p in lines)


def test_html_report_states_the_workload_verdict_first(
    tmp_path: Path, monkeypatch: MP, capsys: CAP
) -> None:
    results = write_results(tmp_path / "results.json", make_results(8, seed=3))
    html = tmp_path / "report.html"
    r = run_in_process(
        ["report", str(results), "--workload", str(exact_workload(tmp_path)), "--html", str(html)],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert r.returncode == 0, r.stderr
    page = html.read_text(encoding="utf-8").replace("\u00a0", " ")  # a number's unit: U+00A0
    assert 'id="workload"' in page and 'id="workload-tiers"' in page
    assert page.index('id="recommendations"') < page.index('id="workload"')  # after What to do
    section = page[page.index('id="workload"') : page.index('id="by-tier"')]
    assert "What this means for test-model (TP8, 512-token chunks of 8.0 MiB per rank" in section
    assert "Budget per chunk: 10.0 ms (recomputing 512 tokens at 51,200 tokens/s)" in section
    assert "same-rack" in section and "cross-rack" in section
    assert "if p99 RTT were 200 us" in section and "if p99 RTT were 500 us" in section
    assert "per request of 5,120 tokens, 100% hits (10 chunks)" in section
    matrix = section[section.index('id="workload-matrix"') :]
    assert matrix.count("<tr><th>") == 1 + 8  # the header row and one row per node
    assert matrix.count('class="wl-self"') == 8
    plain = tmp_path / "plain.html"
    r = run_in_process(
        ["report", str(results), "--html", str(plain)], tmp_path, monkeypatch, capsys
    )
    assert r.returncode == 0 and 'id="workload"' not in plain.read_text(encoding="utf-8")


def test_run_with_workload_writes_both_verdicts(agents: AgentPool, tmp_path: Path) -> None:
    a, b = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(
        f'[defaults]\ntoken_file = "{agents.token_file}"\n'
        + "".join(
            f'[[node]]\nname = "{n.name}"\naddress = "127.0.0.1"\nport = {n.port}\n' for n in (a, b)
        ),
        encoding="utf-8",
    )
    policy = tmp_path / "policy.toml"
    policy.write_text("[policy]\nmin_samples = 500\n", encoding="utf-8")
    out = tmp_path / "out"
    r = netqual_here(
        "run", str(inventory), "--out", str(out), "--policy",
        str(policy), "--workload", str(exact_workload(tmp_path)), *SMALL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "What this means for test-model" in r.stdout
    doc = json.loads((out / "results.json").read_text())
    validate(doc, "results.json")
    assert doc["workload"]["chunk_bytes"] == 8 * MIB and doc["workload"]["tp"] == 8
    (path,) = doc["paths"]
    assert path["verdict"] in {"offload-safe", "marginal", "unsafe"}
    assert path["workload"]["verdict"] in {"offload-safe", "marginal", "unsafe"}
    assert path["workload"]["interpolated"] is False
    assert "workload" in finished_paths(out / "results.jsonl")[0]
