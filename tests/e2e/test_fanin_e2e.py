"""``run --fanin`` with real agents on loopback: every level written, chunk completion per
level, a verdict per storage node, fetch profiles over real TCP sockets.

Three compute agents (two racks) and one storage agent, each on its own 127.0.0.x, shared
by the module's runs. Loopback has no storage link to saturate, so these tests check what
is written and that the numbers are what was measured (sample counts, bytes); the knee
against a shaped link is tests/env/test_lab_fanin.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool, new_token_file
from cli_helpers import run_in_process
from e2e_cli import netqual_here

from netqual.base.errors import InputError
from netqual.files.tomlfile import loads_toml

SMALL = ["--iterations", "200", "--warmup", "20", "--no-bulk", "--allow-short-plan"]
SWEEP = ["--mode", "bipartite", "--interference-sample", "0", "--fanin-chunks", "25"]


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("fanin")
    agents = AgentPool(tmp, new_token_file(tmp))
    specs: list[tuple[str, ...]] = [(f"c{i}", "--listen", f"127.0.0.{30 + i}:0") for i in range(3)]
    specs.append(("st", "--listen", "127.0.0.40:0"))
    try:
        started = agents.start_many(specs, timeout_s=90)
        lines = [f'[defaults]\ntoken_file = "{agents.token_file}"\n']
        for i, (a, spec) in enumerate(zip(started, specs, strict=True)):
            role, rack = ("storage", "r9") if a.name == "st" else ("compute", f"r{1 + i % 2}")
            host = spec[2].rsplit(":", 1)[0]
            lines.append(
                f'[[node]]\nname = "{a.name}"\naddress = "{host}"\nport = {a.port}\n'
                f'role = "{role}"\nrack = "{rack}"\n'
            )
        inv = tmp / "inventory.toml"
        inv.write_text("\n".join(lines))
        yield inv
    finally:
        agents.close()


def sweep(inventory: Path, out: Path, *extra: str, plan: list[str] = SMALL) -> dict[str, Any]:
    r = netqual_here("run", str(inventory), "--out", str(out), *plan, *SWEEP, *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    doc: dict[str, Any] = json.loads((out / "results.json").read_text())
    doc["_stdout"] = r.stdout
    doc["_stderr"] = r.stderr
    return doc


def test_plain_sweep_writes_every_level_with_its_samples_and_a_verdict(
    inventory: Path, tmp_path: Path
) -> None:
    doc = sweep(
        inventory, tmp_path / "run", "--fanin", "1,2,3,8", "--fanin-chunk", "128KiB",
        "--progress", "plain",
    )  # fmt: skip
    (st,) = doc["fanin"]
    assert st["storage"] == "st" and st["profile"] == "plain" and st["chunk_bytes"] == 128 << 10
    levels = {lv["readers"]: lv for lv in st["levels"]}
    assert sorted(levels) == [1, 2, 3, 8]
    for k in (1, 2, 3):
        lv = levels[k]
        # one sample per chunk of every reader, every round (an undecided level is measured
        # again, up to 3 rounds: on a busy loopback that happens)
        assert 1 <= lv["rounds"] <= 3
        assert lv["chunk_us"]["samples"] == 25 * k * lv["rounds"]
        assert lv["chunk_us"]["p50"] <= lv["chunk_us"]["p99"] <= lv["chunk_us"]["p999"]
        assert lv["chunk_us"]["untrusted"] == ["p99", "p999"]  # 25-75 chunks only
        assert len(lv["nodes"]) == k and not lv["errors"]
        assert lv["storage_tcp_retrans"] >= 0  # the agents count: an int, summed over ranks
        # the storage agent's own window around the level: every chunk left through lo
        sent = lv["storage_counters"]["interfaces"]["lo"]["tx_bytes"]
        assert sent >= k * 25 * (128 << 10), sent
        # what arrived while every reader read: at most k readers' mean goodput
        assert 0 < lv["aggregate_gbps"] <= k * lv["goodput_gbps_per_reader"] * 1.000001
        # every rank of every round placed on the coordinator's clock, from the level's
        # first start, reader by reader ([c0, c0, c1, c1]: 2 readers, 2 rounds; this asked
        # for them round by round and failed whenever a busy loopback took a second round)
        per_reader = [n for n in lv["nodes"] for _ in range(lv["rounds"])]
        assert [r["node"] for r in lv["ranks"]] == per_reader
        assert min(r["start_s"] for r in lv["ranks"]) == 0
        assert all(0 <= r["start_s"] < r["end_s"] for r in lv["ranks"])
        assert all(r["bytes"] == 25 * (128 << 10) for r in lv["ranks"])
        assert 0 < lv["busy_s"] <= max(r["end_s"] for r in lv["ranks"]) + 1e-9
        assert 0 <= lv["all_reading_s"] <= lv["busy_s"] + 1e-9
        level_bytes = k * 25 * (128 << 10) * lv["rounds"]  # every round's chunks, pooled
        assert lv["level_gbps"] == pytest.approx(level_bytes * 8 / lv["busy_s"] / 1e9)
        lo, hi = lv["chunk_us"]["p99_ci"]
        assert lo <= lv["chunk_us"]["p99"] <= hi
        assert lv["call"] in ("base", "within", "beyond", "undecided")
    # the ranks' clock is the coordinator's: every level's ranks fit in the sweep's time
    spans = sum(max(r["end_s"] for r in levels[k]["ranks"]) for k in (1, 2, 3))
    assert spans <= doc["run"]["schedule"]["actual"]["fanin_s"]
    # readers alternate racks: the third reader is the first to share a rack uplink
    assert levels[2]["shared_uplinks"] == [] and levels[3]["shared_uplinks"] == ["r1 (2 readers)"]
    assert levels[1]["aggregate_gbps"] == pytest.approx(levels[1]["goodput_gbps_per_reader"])
    assert levels[8]["chunk_us"] is None and levels[8]["skipped"] == "only 3 compute nodes"
    assert "storage_counters" not in levels[8]
    html = (tmp_path / "run" / "report.html").read_text()
    assert "st's own counters over each level:<ul><li>1 reader: lo sent " in html
    assert st["verdict"].startswith("safe up to ")
    assert levels[1]["call"] == "base" and st["undecided"] == [
        k for k in (2, 3) if levels[k]["call"] == "undecided"
    ]
    out = doc["_stdout"]
    assert "fan-in st (plain, 128 KiB chunks)\nst: safe up to" in out
    for header in ("readers", "chunk p50", "chunk p99", "p99 95% CI", "vs first", "aggregate"):
        assert header in out
    assert "only 3 compute nodes" in " ".join(out.split())
    assert "fan-in: levels 0/3" in out  # --progress plain: the sweep is a phase of its own
    # the gate judges the verdict: min_fanin_readers up to "safe up to" passes, above fails
    results = tmp_path / "run" / "results.json"
    for readers, code in ((st["safe_up_to"], 0), (st["safe_up_to"] + 1, 1)):
        prof = tmp_path / f"gate{readers}.toml"
        prof.write_text(f'[profile]\nname = "f"\n[limits]\nmin_fanin_readers = {readers}\n')
        g = netqual_here("gate", str(results), "--profile", str(prof))
        assert g.returncode == code, g.stdout + g.stderr
        assert "min_fanin_readers" in g.stdout
    assert f"not safe up to {st['safe_up_to'] + 1} readers: first st:" in g.stdout
    assert doc["run"]["schedule"]["actual"]["fanin_s"] > 0


def test_mooncake_profile_fetches_in_slices_over_tcp(inventory: Path, tmp_path: Path) -> None:
    """8 ranks per node, 64 KiB slices: a 1 MiB chunk is 16 slice reads, all verified."""
    doc = sweep(
        inventory, tmp_path / "run", "--fanin", "1", "--fetch-profile", "mooncake",
        "--fanin-chunk", "1MiB",
    )  # fmt: skip
    (st,) = doc["fanin"]
    (lv,) = st["levels"]
    assert st["profile"] == "mooncake"
    assert lv["chunk_us"]["samples"] == 8 * 25  # 8 ranks of one node, 25 chunks each
    assert st["knee"] is None and st["verdict"].startswith("not judged")


def test_a_level_the_storage_agents_sessions_cannot_serve_is_refused_before_measuring(
    inventory: Path, tmp_path: Path
) -> None:
    """mooncake with 128 KiB chunks: 8 ranks x 2 connections per reader, + 1 session for the
    storage counters. A storage agent with --max-sessions 33 serves 2 readers exactly (no
    rank refused, no error); asked for 3 readers (49 sessions) the run stops at once with
    exit 2, naming the agent, the level, the count and the fix, and measures nothing."""
    doc = loads_toml(inventory.read_text(), str(inventory), InputError)
    token_file = Path(doc["defaults"]["token_file"])
    pool = AgentPool(tmp_path, token_file)
    try:
        (st,) = pool.start_many([("st9", "--listen", "127.0.0.41:0", "--max-sessions", "33")])
        lines = [f'[defaults]\ntoken_file = "{token_file}"\n']
        for n in doc["node"]:
            if n["role"] == "compute":
                lines.append(
                    f'[[node]]\nname = "{n["name"]}"\naddress = "{n["address"]}"\n'
                    f'port = {n["port"]}\nrole = "compute"\nrack = "{n["rack"]}"\n'
                )
        lines.append(
            f'[[node]]\nname = "st9"\naddress = "127.0.0.41"\nport = {st.port}\n'
            'role = "storage"\nrack = "r9"\n'
        )
        inv = tmp_path / "inventory.toml"
        inv.write_text("\n".join(lines))
        mooncake = ["--fetch-profile", "mooncake", "--fanin-chunk", "128KiB"]
        r = netqual_here(
            "run", str(inv), "--out", str(tmp_path / "refused"), *SMALL, *SWEEP,
            "--fanin", "1,2,3", *mooncake,
        )  # fmt: skip
        assert r.returncode == 2, r.stdout + r.stderr
        assert (
            "--fanin: st9's agent serves 33 sessions at once; level 3 needs 49 (3 readers x 8 "
            "ranks x 2 connections, + 1 for its counters): start it with --max-sessions 49, "
            "or sweep up to 2 readers. Nothing was measured"
        ) in " ".join(r.stderr.split()), r.stderr
        assert not (tmp_path / "refused").exists()
        fits = sweep(inv, tmp_path / "fits", "--fanin", "1,2", *mooncake)
        (result,) = fits["fanin"]
        for lv in result["levels"]:  # 33 sessions at 2 readers: every rank served
            n = 8 * 25 * lv["readers"] * lv["rounds"]
            assert lv["errors"] == [] and lv["chunk_us"]["samples"] == n
        assert "busy" not in st.stderr()
    finally:
        pool.close()


def test_fanin_needs_bipartite_and_a_known_profile(
    inventory: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused before any agent is asked: the command's entry point in this process."""
    r = run_in_process(
        ["run", str(inventory), "--out", str(tmp_path / "a"), "--fanin", "1,2"],
        tmp_path, monkeypatch, capsys,
    )  # fmt: skip
    assert r.returncode == 2 and "--fanin: needs --mode bipartite" in r.stderr
    r = run_in_process(
        ["run", str(inventory), "--out", str(tmp_path / "b"), "--mode", "bipartite",
         "--fanin", "1,2", "--fetch-profile", "nope"],
        tmp_path, monkeypatch, capsys,
    )  # fmt: skip
    assert r.returncode == 2 and "unknown 'nope'" in r.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


WORKLOAD = """[workload]
layers = 2
kv_heads = 1
head_dim = 128
dtype = "bf16"
tp = 1
chunk_tokens = 256
local_read_gbps = 2.0
prompt_tokens = 2560
hit_ratio = 1.0
"""


def test_workload_projects_kv_fetch_per_level_and_says_where_offload_pays(
    inventory: Path, tmp_path: Path
) -> None:
    """A 256 KiB-chunk workload (2 layers x 1 KV head x 128 x bf16 x K,V x 256 tokens):
    the sweep fetches its chunk, and terminal and report say up to which level the
    projected fetch (every chunk at p99) beats reading the chunks locally at 2 Gbit/s."""
    wl = tmp_path / "wl.toml"
    wl.write_text(WORKLOAD)
    plan = [*SMALL[:4], "--allow-short-plan", "--chunk", "256KiB", "--depth", "1"]
    doc = sweep(inventory, tmp_path / "run", "--fanin", "1,2,3", "--workload", str(wl), plan=plan)
    (st,) = doc["fanin"]
    assert st["chunk_bytes"] == 256 << 10  # the workload's chunk per rank
    baseline_us = 10 * (256 << 10) * 8 / 2e9 * 1e6  # 10 chunks read locally at 2 Gbit/s
    pays = [lv["readers"] for lv in st["levels"] if 10 * lv["chunk_us"]["p99"] < baseline_us]
    expected = 0
    for k in (1, 2, 3):  # pays up to the last level before the first that does not
        if k not in pays:
            break
        expected = k
    out = doc["_stdout"]
    text = " ".join(out.split())
    if expected:
        assert f"st: offload pays up to {expected} concurrent reader" in text
    else:
        assert "st: offload does not pay even at 1 reader: the projected KV fetch" in text
    assert f". Fan-in alone: {st['verdict'][:40]}" in text  # its own sentence, its own scope
    assert "safe up to" not in text.split(". Fan-in alone:")[0].split("st: offload")[-1]
    for header in ("KV fetch p50", "KV fetch p99", "TTFT change p50", "TTFT change p99"):
        assert header in out
    html = (tmp_path / "run" / "report.html").read_text()
    # detail after the first screen's answer and "What to do"
    assert html.index('id="recommendations"') < html.index('id="fanin"')
    assert html.count('class="fanin-chart"') == 2  # chunk p99 and projected fetch curves
    assert "KV fetch per request (10 chunks) vs readers" in html
    assert "<script src" not in html and "http" not in html.split("<body")[1][:200000]


def test_resume_keeps_the_journalled_levels_and_measures_only_the_rest(
    inventory: Path, tmp_path: Path
) -> None:
    """A run stopped in the sweep: its journal holds the levels that finished. Here the
    last level's record is cut from a finished run's results.jsonl (as a crash before its
    write leaves it); --resume measures that level only and keeps the others as they were."""
    out = tmp_path / "run"
    first = sweep(inventory, out, "--fanin", "1,2,3")
    jsonl = out / "results.jsonl"
    lines = jsonl.read_text().splitlines()
    levels = [ln for ln in lines if '"record":"fanin-level"' in ln]
    assert len(levels) == 3
    jsonl.write_text("\n".join(ln for ln in lines if ln != levels[-1]) + "\n")
    r = netqual_here(
        "run", str(inventory), "--out", str(out), *SMALL, *SWEEP, "--fanin", "1,2,3", "--resume"
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    again = json.loads((out / "results.json").read_text())
    before, after = first["fanin"][0]["levels"], again["fanin"][0]["levels"]
    assert after[:2] == before[:2]  # kept, not re-measured
    assert after[2]["chunk_us"]["samples"] == 75 * after[2]["rounds"]  # measured again
    assert after[2] != before[2]
    assert sum('"record":"fanin-level"' in ln for ln in jsonl.read_text().splitlines()) == 3
    r = netqual_here(
        "run", str(inventory), "--out", str(out), *SMALL, *SWEEP, "--fanin", "1,2", "--resume"
    )  # fmt: skip
    assert r.returncode == 2 and "different run" in r.stderr  # another sweep: not resumed


def test_a_profile_with_two_connections_opens_both_and_deals_the_slices(inventory: Path) -> None:
    """mooncake: 2 QPs per endpoint -> two authenticated TCP sessions from the reader's
    agent to storage, the chunk's 16 slices dealt 8 and 8, every slice's tags checked."""
    from netqual.agent.probe_request import request_probe
    from netqual.base.auth import load_token
    from netqual.model.fanin import FaninConfig
    from netqual.planning.inventory import load_inventory
    from netqual.run.fanin import plan_for
    from netqual.transports import TransportKind

    inv = load_inventory(inventory)
    by = {n.name: n for n in inv.nodes}
    assert inv.token_file is not None
    token = load_token(inv.token_file)
    plan = plan_for(FaninConfig((1,), "mooncake", 1 << 20, 10), 60.0)
    out = request_probe(by["c0"], by["st"], TransportKind.TCP, plan, token, 75.0)
    (cell,) = out.raw.bulk
    assert len(cell.completion_ns) == 10 and cell.error is None
    used = out.raw.details["fetch"]
    assert used["connections_used"] == [2] and used["slices_per_chunk"] == [16]
    assert used["slice_bytes"] == [64 << 10] and cell.depth == 8  # 8 slices per connection
    # a chunk takes at least as long as its slices' bytes need, and every one is counted
    assert cell.elapsed_ns >= int(cell.completion_ns.sum())
