"""The fetch engines for real (docs/engines.md): Mooncake's Transfer Engine and NIXL over
UCX, each side in a worker process of a lab agent, between network namespaces over TCP,
driven as a user drives them (`netqual run --engine`, `netqual probe --engine`). Needs root
(the lab) and the engines (`netqual[mooncake]`, nixl-cu12: setup.sh installs both); each
test skips with the reason otherwise. One lab (four hosts on one switch) serves every test.

The lab's agents run NIXL's progress thread with a 1 ms sleep (``NETQUAL_NIXL_PTHR_DELAY_US``,
docs/engines.md), not spinning as it does by default: a spinning one took a core per worker
(~2 s of CPU each, ~80 s of this module's, on a host whose other lanes time round trips),
and no test here judges an engine's latency. The default, spinning, is what the crash test's
workers run: it moves and checks the bytes both ways as the runs' workers do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from netqual import lab
from netqual.agent.engine_serve import installed
from netqual.engines import runner
from netqual.engines.interface import EngineDescriptor, EngineJob, Role
from netqual.engines.nixl import PTHR_DELAY_ENV
from netqual.engines.worker import EXIT_ENV
from netqual.lab import system as lab_system
from netqual.model.engine import EngineName

REASON = lab.lab_available()
pytestmark = [pytest.mark.root, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
TOPOLOGY = Path(lab.default_topology_path()).parent / "four-hosts.toml"
# The plan: one 64 KiB cell at depth 1 (the engine's too), a short ping-pong: this is about
# the engine cells, not about the RTT verdicts.
FANIN_CHUNKS = 60  # per reader and level: a few ms of reading each
PLAN = (
    "--chunk", "64KiB", "--depth", "1", "--iterations", "500", "--warmup", "50",
    "--allow-short-plan", "--interference-sample", "0",
)  # fmt: skip


def needs(engine: EngineName) -> None:
    if (problem := installed(engine)) is not None:
        pytest.skip(problem)


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lab.LabInfo]:
    state = tmp_path_factory.mktemp("lab")
    # ordinary agents: no timing is judged here, and this module runs beside the labs
    # that judge it (.ci/run's env lane; real-time agents are those labs' alone); their
    # NIXL workers' progress threads sleep (module docstring)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(PTHR_DELAY_ENV, "1000")
        info = lab.up(lab.load(TOPOLOGY), state, realtime_agents=False)
        try:
            yield info
        finally:
            lab.down(state)


def netqual(*args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "netqual", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    env = {**os.environ, "NETQUAL_WIDTH": "160"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)


def run(four: lab.LabInfo, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    done = netqual(
        "run", str(four.inventory_path), "--out", str(out), *PLAN, *extra,
        netns=four.control_netns,
    )  # fmt: skip
    (out.parent / f"{out.name}.txt").write_text(done.stdout + done.stderr)
    return done


@pytest.mark.parametrize("engine", [EngineName.MOONCAKE, EngineName.NIXL])
def test_every_path_gets_an_engine_cell_over_tcp_beside_netquals_own(
    four: lab.LabInfo, tmp_path: Path, engine: EngineName
) -> None:
    needs(engine)
    t0 = time.monotonic()
    done = run(four, tmp_path / "run", "--engine", engine.value)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert time.monotonic() - t0 < 240
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(doc["paths"]) == 6 and not doc.get("not_measured")
    for p in doc["paths"]:
        cells = p["engine"]
        assert [(c["op"], c["depth"], c["chunk_bytes"]) for c in cells] == [
            ("read", 1, 65536),
            ("write", 1, 65536),
        ], p["src"]
        probe = p["bulk"][0]["completion_us"]["p50"]
        for c in cells:
            assert c["name"] == engine.value and c["version"]
            assert c["error"] is None, c["error"]
            # proven, not assumed: the engine said TCP, and the host's one link carried it
            assert c["transport"] == "tcp" and c["device"] == "to-sw", c
            assert c["evidence"]["carried_by"] == c["evidence"]["intended"] == "to-sw"
            assert c["evidence"]["peer_carried_by"] == "to-sw"
            assert c["fallback"] is None
            assert 0 < c["completion_us"]["p50"] <= c["completion_us"]["p99"]
            assert c["vs_probe"] == pytest.approx(c["completion_us"]["p50"] / probe, rel=1e-3)
            assert c["first_op_us"] > 0 and c["goodput_gbps"] > 0
        assert cells[0]["evidence"]["data_ok"] is True  # READ brought the target's bytes
        assert cells[1]["evidence"]["data_ok"] is True  # WRITE left ours at the target
        if engine is EngineName.NIXL:
            settings = cells[0]["evidence"]["settings"]
            assert "UCX_TLS=tcp" in settings  # never a memory copy between namespaces
            assert any("tcp/to-sw" in lane for lane in cells[0]["evidence"]["claimed"])
        else:
            assert "installed transport: tcp" in cells[0]["evidence"]["claimed"]
    assert doc["run"]["schedule"]["actual"]["engine_s"] > 0
    text = (tmp_path / "run.txt").read_text()
    assert f"engine {engine.value} (" in text and "engine/probe" in text
    html = (tmp_path / "run" / "report.html").read_text()
    assert 'id="engine-cells"' in html and "engine/probe" in html


def test_engine_require_rdma_without_rdma_makes_each_path_not_measured_never_unsafe(
    four: lab.LabInfo, tmp_path: Path
) -> None:
    needs(EngineName.MOONCAKE)
    done = run(four, tmp_path / "run", "--engine", "mooncake", "--engine-require", "rdma")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert doc["paths"] == []
    assert doc["summary"]["counts"]["unsafe"] == 0
    missing = doc["not_measured"]
    assert len(missing) == 6
    for m in missing:
        assert m["kind"] == "configuration"
        assert m["reason"].startswith(
            "--engine-require rdma: mooncake read moved over tcp, not rdma"
        )
        assert "RDMA devices found: 0" in m["reason"]
    text = (tmp_path / "run.txt").read_text()
    assert "INCOMPLETE" in text and "0 unsafe" in text
    assert text.count("not measured (configuration): ") == 6
    assert "h1 -> h2: --engine-require rdma: mooncake read moved over tcp, not rdma" in text
    gate = netqual("gate", str(tmp_path / "run"))
    assert gate.returncode == 1 and "complete" in gate.stdout


def test_a_crash_at_exit_of_the_real_nixl_worker_loses_no_measurement(
    four: lab.LabInfo, tmp_path: Path
) -> None:
    """NIXL's UCX teardown crashes the process at interpreter exit here (two libibverbs
    copies); the worker avoids it with os._exit. With NETQUAL_ENGINE_EXIT=normal it exits
    through the interpreter: whatever that exit does, every operation it reported stays."""
    needs(EngineName.NIXL)
    ns = {n.name: n for n in four.nodes}
    a, b = ns["h1"], ns["h2"]
    assert a.address and b.address
    # NIXL as installed: its progress thread spinning (the runs' workers sleep in it)
    env = {**{k: v for k, v in os.environ.items() if k != PTHR_DELAY_ENV}, EXIT_ENV: "normal"}

    def worker(netns: str, job: EngineJob) -> runner.Worker:
        argv = ["ip", "netns", "exec", netns, *runner.worker_argv()]
        return runner.Worker(job, time.monotonic() + 120, 90, argv, env)

    (tmp_path / "t").mkdir()
    (tmp_path / "i").mkdir()
    target = worker(
        b.netns,
        EngineJob(Role.TARGET, EngineName.NIXL, b.address, a.address,
                  length_bytes=1 << 16, chunk_bytes=1 << 16, log_dir=str(tmp_path / "t")),
    )  # fmt: skip
    with target:
        desc = EngineDescriptor.from_worker(target.message("descriptor")["descriptor"])
        init = worker(
            a.netns,
            EngineJob(Role.INITIATOR, EngineName.NIXL, a.address, b.address, chunk_bytes=1 << 16,
                      warmup=4, ops=40, timeout_s=60, log_dir=str(tmp_path / "i"),
                      descriptor=desc),
        )  # fmt: skip
        with init:
            ops = [init.message("op", "result") for _ in range(3)]
            note = init.finish()
        target.send("stop")
        bye = target.message("bye")
        target.finish()
    assert [o["type"] for o in ops] == ["op", "op", "result"]
    assert [len(o["completion_ns"]) for o in ops[:2]] == [40, 40]
    assert ops[0]["data_ok"] is True and bye["written"] is True
    # whether this host's UCX crashes at exit or not, the result came first; say which
    print(f"NIXL worker's normal exit: {note or 'clean'}")
    assert note is None or note.startswith("killed by")


def _h1_as_storage(inventory: Path, tmp_path: Path) -> Path:
    """The four-hosts lab's inventory with h1 as the storage node the others read."""
    text = inventory.read_text()
    role = text.index('role = "compute"', text.index('name = "h1"'))
    inv = tmp_path / "inventory.toml"
    inv.write_text(text[:role] + 'role = "storage"' + text[role + len('role = "compute"') :])
    return inv


@pytest.mark.parametrize("engine", [EngineName.MOONCAKE, EngineName.NIXL])
def test_the_fanin_sweep_reads_each_level_through_the_engine_beside_the_probe(
    four: lab.LabInfo,
    tmp_path: Path,
    engine: EngineName,
    artefact: Callable[[str], None],
) -> None:
    """`run --fanin 1,2 --engine E` with h1 as the storage node: each level's readers
    (h2, then h2 and h3) fetch the chunk through the engine, one worker each, all reading
    h1's one engine target after a start barrier, and the level is reduced as the probe's
    (chunk completion, per-reader spans, the aggregate while all read), beside it."""
    needs(engine)
    inv = _h1_as_storage(four.inventory_path, tmp_path)
    out = tmp_path / "run"
    t0 = time.monotonic()
    done = netqual(
        "run", str(inv), "--out", str(out), *PLAN, "--mode", "bipartite", "--fanin", "1,2",
        "--fanin-chunk", "256KiB", "--fanin-chunks", str(FANIN_CHUNKS), "--engine", engine.value,
        netns=four.control_netns,
    )  # fmt: skip
    took = time.monotonic() - t0
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert took < 300
    doc = json.loads((out / "results.json").read_text())
    (sweep,) = doc["fanin"]
    assert sweep["storage"] == "h1"
    e = sweep["engine"]
    assert e["name"] == engine.value and e["version"]
    assert [lv["readers"] for lv in e["levels"]] == [1, 2]
    probe = {lv["readers"]: lv for lv in sweep["levels"]}
    for lv in e["levels"]:
        k, rounds = lv["readers"], lv["rounds"]
        assert lv["errors"] == [], lv["errors"]
        assert lv["nodes"] == probe[k]["nodes"]  # the same readers as the probe's level
        # one worker per reader a round (an undecided level is read again, up to 3 rounds)
        assert 1 <= rounds <= 3 and (k > 1 or rounds == 1)
        # each reader once a round (the pooled rounds' order is not a contract)
        assert sorted(r["node"] for r in lv["ranks"]) == sorted(lv["nodes"] * rounds)
        assert all(r["bytes"] == FANIN_CHUNKS * 256 * 1024 for r in lv["ranks"])
        assert lv["chunk_us"]["samples"] == k * FANIN_CHUNKS * rounds
        assert lv["configuration"] is None
        assert 0 < lv["chunk_us"]["p50"] <= lv["chunk_us"]["p99"]
        # proven, not assumed: the engines said TCP, both ends' links carried it
        assert lv["transports"] == ["tcp"] and lv["carried_by"] == ["to-sw"]
        assert lv["storage_carried_by"] == "to-sw" and lv["fallback"] is None
        assert lv["aggregate_gbps"] > 0 and lv["busy_s"] > 0 and lv["ready_s"] > 0
        ratio = lv["chunk_us"]["p50"] / probe[k]["chunk_us"]["p50"]
        assert lv["vs_probe"] == pytest.approx(ratio, rel=1e-6)
        starts = [r["start_s"] for r in lv["ranks"]]
        artefact(
            f"{engine.value} fan-in at {k}: engine chunk p50 {lv['chunk_us']['p50']:.0f} us, "
            f"probe {probe[k]['chunk_us']['p50']:.0f} us ({lv['vs_probe']:.2f}x); aggregate "
            f"{lv['aggregate_gbps']:.2f} Gbit/s, probe {probe[k]['aggregate_gbps']:.2f}; "
            f"readers started within {1e3 * (max(starts) - min(starts)):.1f} ms, "
            f"{lv['readers_busy']:.2f} of {k} at once; ready after {lv['ready_s']:.2f} s; "
            f"{rounds} round(s)"
        )
    assert e["levels"][0]["call"] == "base" and e["verdict"]
    # the decision judges the engine's levels: swept to 2 readers of the 3 compute nodes
    # that would read h1, they cannot show h1 holds them, whatever the engine's speed
    blocking = [b for b in doc["decision"]["blocking"] if b["kind"] == "engine"]
    assert any(
        b["subject"] == "h1" and b["detail"].startswith(f"through {engine.value}") for b in blocking
    ), blocking
    artefact(f"{engine.value} fan-in decision: " + " | ".join(b["detail"] for b in blocking))
    gate = netqual("gate", str(out))
    assert gate.returncode == 1 and f"  h1  engine: through {engine.value}" in gate.stdout
    jsonl = (out / "results.jsonl").read_text()
    assert jsonl.count('"record":"fanin-engine-level"') == 2
    assert f"h1 through {engine.value}" in said and "vs probe" in said
    html = (out / "report.html").read_text()
    assert 'id="fanin-engine-0"' in html and "fanin-engine-table" in html


def test_engine_require_rdma_under_fanin_makes_each_engine_level_not_measured(
    four: lab.LabInfo, tmp_path: Path
) -> None:
    """`--engine-require rdma` on a host without RDMA, through the fan-in sweep: each
    level's engines fall back to TCP, so each level is not measured (configuration), naming
    the fallback, as a path's cells make their path; the decision cannot judge h1 on it
    (nothing unsafe) and the gate fails naming it."""
    needs(EngineName.MOONCAKE)
    inv = _h1_as_storage(four.inventory_path, tmp_path)
    out = tmp_path / "run"
    done = netqual(
        "run", str(inv), "--out", str(out), *PLAN, "--mode", "bipartite", "--fanin", "1,2",
        "--fanin-chunk", "256KiB", "--fanin-chunks", "20", "--engine", "mooncake",
        "--engine-require", "rdma", netns=four.control_netns,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    doc = json.loads((out / "results.json").read_text())
    (sweep,) = doc["fanin"]
    assert [lv["chunk_us"] is not None for lv in sweep["levels"]] == [True, True]  # the probe
    e = sweep["engine"]
    for lv in e["levels"]:
        assert lv["configuration"].startswith(
            "--engine-require rdma: mooncake read on h2: moved over tcp, not rdma"
        ), lv
        assert lv["chunk_us"] is None and lv["ranks"] == [] and lv["rounds"] == 1
        assert lv["skipped"] == f"not measured (configuration): {lv['configuration']}"
        assert lv["transports"] == ["tcp"] and lv["fallback"].startswith("h2: moved over tcp")
    assert e["verdict"].startswith("not measured (configuration) at 1, 2 readers: ")
    assert e["safe_up_to"] is None
    # the levels judge no path: each path's verdict is its own round trip's (this lab's
    # ordinary agents on a loaded host may make one unsafe; the engine never does)
    assert all(
        "mooncake" not in r and "engine" not in r for p in doc["paths"] for r in p["reasons"]
    )
    [b] = [b for b in doc["decision"]["blocking"] if b["kind"] == "engine"]
    assert b["subject"] == "h1" and b["class"] is None
    assert b["detail"].startswith(
        "through mooncake, not measured (configuration) at 1, 2 readers: --engine-require rdma"
    )
    gate = netqual("gate", str(out))
    assert gate.returncode == 1
    assert "  h1  engine: through mooncake, not measured (configuration)" in gate.stdout
    assert f"h1 through mooncake{' ('}" in said and "not measured (configuration)" in said


NO_NIXL_PORT = 18516


@pytest.fixture(scope="module")
def h3_lacks_nixl(four: lab.LabInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A second agent for h3 (its namespace, port 18516) started with ``--engines mooncake``:
    a node that lacks NIXL, whatever this host has installed. Yields an inventory of the
    four hosts that reaches h3 through it."""
    h3 = next(n for n in four.nodes if n.name == "h3")
    d = tmp_path_factory.mktemp("no-nixl")
    log = (d / "agent.log").open("w")
    proc = subprocess.Popen(
        ["ip", "netns", "exec", h3.netns, sys.executable, "-m", "netqual", "agent",
         "--listen", f"{h3.address}:{NO_NIXL_PORT}", "--name", "h3",
         "--token-file", str(four.token_file), "--engines", "mooncake"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not lab_system.listening(proc.pid, NO_NIXL_PORT):
            alive = proc.poll() is None and time.monotonic() < deadline
            assert alive, (d / "agent.log").read_text()
            time.sleep(0.05)
        text = four.inventory_path.read_text()
        assert text.count('name = "h3"\n') == 1
        inv = d / "inventory.toml"
        inv.write_text(text.replace('name = "h3"\n', f'name = "h3"\nport = {NO_NIXL_PORT}\n'))
        yield inv
    finally:
        proc.kill()
        proc.wait(10)
        log.close()


def test_a_run_asking_for_an_engine_a_node_lacks_stops_before_measuring_naming_it(
    four: lab.LabInfo, h3_lacks_nixl: Path, tmp_path: Path
) -> None:
    """Exit 3 before anything is measured, naming h3 and why; --keep-going measures the
    other nodes' paths with NIXL and lists h3's as not measured (configuration)."""
    needs(EngineName.NIXL)
    out = tmp_path / "run"
    done = netqual(
        "run", str(h3_lacks_nixl), "--out", str(out), *PLAN, "--engine", "nixl",
        netns=four.control_netns,
    )  # fmt: skip
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 3, said[-3000:]
    assert "pre-flight check failed on 1 of 4 nodes (h3); nothing was measured" in said
    assert "nixl: nixl is not offered by this agent (started with --engines mooncake" in said
    assert not (out / "results.json").exists() and not (out / "results.jsonl").exists()

    done = netqual(
        "run", str(h3_lacks_nixl), "--out", str(out), *PLAN, "--engine", "nixl",
        "--keep-going", netns=four.control_netns,
    )  # fmt: skip
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, said[-3000:]
    doc = json.loads((out / "results.json").read_text())
    measured = {frozenset((p["src"], p["dst"])) for p in doc["paths"]}
    assert measured == {frozenset(p) for p in (("h1", "h2"), ("h1", "h4"), ("h2", "h4"))}
    for p in doc["paths"]:
        assert [c["op"] for c in p["engine"]] == ["read", "write"], p["src"]
        assert all(c["name"] == "nixl" and c["error"] is None for c in p["engine"])
    missing = doc["not_measured"]
    assert len(missing) == 3 and all("h3" in (m["src"], m["dst"]) for m in missing)
    for m in missing:
        assert m["kind"] == "configuration"
        assert "h3 failed the pre-flight check" in m["reason"]
        assert "--engines mooncake" in m["reason"]
    # h3's pairs are not measured, never judged: the counts cover the 3 measured paths
    assert "INCOMPLETE (3 of 6 pairs measured, 3 not measured (configuration))" in said
    assert sum(doc["summary"]["counts"].values()) == 3


def test_probe_names_an_engine_the_node_lacks_as_configuration(
    four: lab.LabInfo, h3_lacks_nixl: Path
) -> None:
    """`probe --engine nixl` towards h3's agent that lacks it: exit 3, not measured
    (configuration), naming the node and why."""
    h1, h3 = (n for n in four.nodes if n.name in ("h1", "h3"))
    token = f"--token-file={four.token_file}"
    done = netqual(
        "probe", f"h1@{h1.address}:18515", f"h3@{h3.address}:{NO_NIXL_PORT}", token, *PLAN[:8],
        "--engine", "nixl", netns=four.control_netns,
    )  # fmt: skip
    said = " ".join(done.stderr.split())
    assert done.returncode == 3, done.stdout + done.stderr
    assert "not measured (configuration)" in said
    assert "h3: nixl is not offered by this agent (started with --engines mooncake" in said
