"""The fetch engines for real (docs/engines.md): Mooncake's Transfer Engine and NIXL over
UCX, each side in a worker process of a lab agent, between network namespaces over TCP,
driven as a user drives them (`netqual run --engine`, `netqual probe --engine`). Needs root
(the lab) and the engines (`netqual[mooncake]`, nixl-cu12: setup.sh installs both); each
test skips with the reason otherwise. One lab (four hosts on one switch) serves every test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from netqual import lab
from netqual.agent.engine_serve import installed
from netqual.engines import runner
from netqual.engines.interface import EngineDescriptor, EngineJob, Role
from netqual.engines.worker import EXIT_ENV
from netqual.model.engine import EngineName

REASON = lab.lab_available()
pytestmark = [pytest.mark.root, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
TOPOLOGY = Path(lab.default_topology_path()).parent / "four-hosts.toml"
# The plan: one 64 KiB cell at depth 1 (the engine's too), a short ping-pong: this is about
# the engine cells, not about the RTT verdicts.
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
    info = lab.up(lab.load(TOPOLOGY), state)
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
    env = {**os.environ, EXIT_ENV: "normal"}

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


def test_probe_names_a_missing_engine_as_configuration(four: lab.LabInfo) -> None:
    """An engine the nodes lack: `probe` exits 3, not measured (configuration)."""
    missing = [e for e in EngineName if installed(e) is not None]
    if not missing:
        pytest.skip("every engine is installed here: nothing to miss")
    h1, h2 = (n for n in four.nodes if n.name in ("h1", "h2"))
    token = f"--token-file={four.token_file}"
    done = netqual(
        "probe", f"h1@{h1.address}:18515", f"h2@{h2.address}:18515", token, *PLAN[:8],
        "--engine", missing[0].value, netns=four.control_netns,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "not measured (configuration)" in done.stderr
    assert f"pip install 'netqual[{missing[0].value}]'" in done.stderr
