"""The pre-flight check: `netqual check`, the first step of `netqual run`, and
`doctor --inventory` for TCP. Real agent processes on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentpool import AgentPool, AgentProc, new_token_file
from e2e_cli import netqual_cli, netqual_here, write_inventory
from peers import node as node_of

import netqual
from netqual.model.plan import ProbePlan
from netqual.model.verdict import Verdict
from netqual.results import load
from netqual.run import preflight
from netqual.run.coordinator import RunConfig, run

SMALL_PLAN = ["--iterations", "300", "--warmup", "20", "--no-bulk", "--allow-short-plan"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _typo_port(inventory: Path, agent: AgentProc, port: int) -> None:
    text = inventory.read_text()
    inventory.write_text(text.replace(f"port = {agent.port}\n", f"port = {port}\n", 1))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentPool]:
    """gpu01, gpu02, gpu03 and stray, shared by the tests that only ask them (check,
    doctor, a run stopped at its pre-flight or measuring some pairs): no test stops one
    or changes what it answers; each writes its own inventory of some of them."""
    tmp = tmp_path_factory.mktemp("check")
    pool = AgentPool(tmp, new_token_file(tmp))
    try:
        pool.start_many([("gpu01",), ("gpu02",), ("gpu03",), ("stray",)])
        yield pool
    finally:
        pool.close()


def test_check_all_ready(shared: AgentPool, tmp_path: Path) -> None:
    started = shared.agents[:2]
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, shared.token_file)
    r = netqual_here("check", str(inventory))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all 2 agents ready for tcp probes" in r.stdout
    doc = json.loads(netqual_here("check", str(inventory), "--json").stdout)
    assert doc["ok"] is True
    for node in doc["nodes"]:
        assert node["agent_version"] == doc["coordinator_version"]
        assert node["transport_ok"] is True
        assert abs(node["clock_offset_s"]) < 1.0  # same host, same clock
        assert node["max_sessions"] == 64  # as its info reports it (run --fanin checks it)
        assert "host" not in node and "measuring" not in node  # asked for `run` only


def test_check_names_each_configuration_error(shared: AgentPool, tmp_path: Path) -> None:
    *started, stray = shared.agents
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, shared.token_file)
    gpu02, gpu03 = started[1], started[2]
    _typo_port(inventory, gpu02, _free_port())  # nothing listens there
    _typo_port(inventory, gpu03, stray.port)  # another node's agent answers for gpu03
    r = netqual_here("check", str(inventory))
    assert r.returncode == 1, r.stdout + r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("gpu")}
    assert rows["gpu01"].split()[-1] == "ok"
    assert rows["gpu02"].split()[-1] == "FAIL"
    assert rows["gpu03"].split()[-1] == "FAIL"
    text = " ".join(r.stdout.split())
    assert "gpu02: connection refused" in text
    assert "gpu03: the agent there is stray" in text and "--name gpu03" in text
    assert "2 of 3 nodes not ready" in text
    # Another token: refused by every agent, said in the node's row.
    other = tmp_path / "other.token"
    other.write_text("9f2c7e1d5b3a8064" * 3 + "e4f1a7c0b9d2386e")  # strong, not the agents' token
    other.chmod(0o600)
    r = netqual_here("check", str(inventory), "--token-file", str(other))
    assert r.returncode == 1
    assert "gpu01: token rejected" in " ".join(r.stdout.split())


def test_run_stops_on_a_typod_port_and_writes_nothing(shared: AgentPool, tmp_path: Path) -> None:
    started = shared.agents[:3]
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, shared.token_file)
    _typo_port(inventory, started[2], _free_port())
    out = tmp_path / "out"
    r = netqual_here("run", str(inventory), "--out", str(out), *SMALL_PLAN)
    assert r.returncode == 3, r.stdout + r.stderr
    text = " ".join(r.stderr.split())
    assert "gpu03: connection refused" in text
    assert "pre-flight check failed on 1 of 3 nodes (gpu03)" in text
    assert not out.exists(), "no report may be written from a configuration error"


def test_run_keep_going_when_every_agent_fails_says_so_and_leaves_nothing_to_resume(
    shared: AgentPool, tmp_path: Path
) -> None:
    """Issue 36: the run left a directory whose report read "INCOMPLETE (run interrupted,
    0 of 3 pairs measured) ... finish the run with --resume"; nothing was interrupted and
    resuming failed the same way."""
    started = shared.agents[:3]
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, shared.token_file)
    other = tmp_path / "other.token"
    other.write_text("9f2c7e1d5b3a8064" * 3 + "e4f1a7c0b9d2386e")  # strong, not the agents' token
    other.chmod(0o600)
    out = tmp_path / "out"
    args = ["run", str(inventory), "--out", str(out), "--token-file", str(other)]
    r = netqual_here(*args, "--keep-going", *SMALL_PLAN)
    assert r.returncode == 3, r.stdout + r.stderr
    text = " ".join(r.stderr.split())
    assert "every agent failed the pre-flight check, so nothing was measured" in text, text
    assert "gpu01: token rejected" in text and "netqual check INVENTORY" in text
    assert "--resume" not in text
    assert not out.exists(), "nothing was measured: no run to report or resume"
    assert netqual_here("report", str(out)).returncode == 2


def test_run_keep_going_measures_the_rest_and_keeps_agent_versions_and_clocks(
    shared: AgentPool, tmp_path: Path
) -> None:
    started = shared.agents[:3]
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, shared.token_file)
    _typo_port(inventory, started[2], _free_port())
    out = tmp_path / "out"
    r = netqual_here("run", str(inventory), "--out", str(out), "--keep-going", *SMALL_PLAN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--keep-going" in r.stderr
    doc = json.loads((out / "results.json").read_text())
    # gpu03 failed the pre-flight: its pairs are not measured (configuration), not paths,
    # and the coordinator did not ask it again.
    assert [(p["src"], p["dst"], p["error"]) for p in doc["paths"]] == [("gpu01", "gpu02", None)]
    skipped = {(m["src"], m["dst"]): m["reason"] for m in doc["not_measured"]}
    assert set(skipped) == {("gpu01", "gpu03"), ("gpu02", "gpu03")}
    assert all(r.startswith("gpu03 failed the pre-flight check: ") for r in skipped.values())
    assert "gpu03" not in json.dumps(doc.get("suspects", []))
    # What the pre-flight saw of each agent is kept: versions and clock offsets.
    agents_seen = doc["run"]["agents"]
    assert set(agents_seen) == {"gpu01", "gpu02", "gpu03"}
    for node in ("gpu01", "gpu02"):
        assert agents_seen[node]["version"] == netqual.__version__
        assert isinstance(agents_seen[node]["clock_offset_s"], float)
    assert agents_seen["gpu03"] == {"version": None, "clock_offset_s": None}
    assert load(out / "results.json").run.agents == agents_seen


def test_run_asks_no_agent_again_after_the_pre_flight(
    agents: AgentPool, token: bytes, tmp_path: Path
) -> None:
    """The coordinator measures with the pre-flight's report: an agent lost after the
    check is not re-checked into "not measured" but reported by its probes, per path, and
    each agent's host path audit comes from the pre-flight."""
    started = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    nodes = tuple(node_of(a) for a in started)
    plan = ProbePlan(iterations=50, warmup=5, bulk=False, timeout_s=5.0)
    checked = preflight.check(nodes, token, "tcp", plan=plan, for_run=True)
    assert checked.ok, checked.failed
    assert [(n.node, n.measuring) for n in checked.nodes if n.host is not None] == [
        ("gpu01", 0), ("gpu02", 0), ("gpu03", 0),
    ]  # fmt: skip
    started[2].proc.terminate()
    started[2].proc.wait(timeout=30)
    cfg = RunConfig(nodes=nodes, plan=plan, token=token, interference_minimum=0)
    results = run(cfg, tmp_path / "out", check=lambda _: checked)
    assert results.not_measured == ()  # a re-check would have listed gpu03's pairs here
    paths = {(p.src, p.dst): p for p in results.paths}
    assert set(paths) == {("gpu01", "gpu02"), ("gpu01", "gpu03"), ("gpu02", "gpu03")}
    assert paths["gpu01", "gpu02"].error is None
    for key in (("gpu01", "gpu03"), ("gpu02", "gpu03")):
        assert paths[key].verdict is Verdict.UNSAFE and paths[key].error, paths[key]
    assert [h.node for h in results.hosts] == ["gpu01", "gpu02", "gpu03"]
    assert "busy_at_start" not in results.run.schedule


def test_doctor_inventory_follows_transport(shared: AgentPool, tmp_path: Path) -> None:
    started = shared.agents[:2]
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, shared.token_file)
    r = netqual_cli("doctor", "--inventory", str(inventory))
    # TCP needs no RDMA device: healthy TCP agents are ready.
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ready for tcp probes" in r.stdout
    assert "NOT ready" not in r.stdout


def test_check_rdma_only_when_asked(
    agents: AgentPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Agents that cannot import pyverbs: fine for TCP, not ready for RDMA.
    monkeypatch.setenv("NETQUAL_PYVERBS_PATH", str(tmp_path))
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    assert netqual_cli("check", str(inventory)).returncode == 0
    r = netqual_cli("check", str(inventory), "--transport", "rdma")
    assert r.returncode == 1, r.stdout + r.stderr
    text = " ".join(r.stdout.split())
    assert "gpu01: RDMA not ready" in text and "pyverbs" in text
    out = tmp_path / "out"
    r = netqual_cli("run", str(inventory), "--transport", "rdma", "--out", str(out), *SMALL_PLAN)
    assert r.returncode == 3 and not out.exists()
