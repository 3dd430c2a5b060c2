"""A plan the agents would refuse, or one with nothing to measure, is a usage error before
any agent is contacted; a configuration failure is never a network verdict."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agentpool import AgentPool, new_token_file
from cli_helpers import Run, run_in_process
from e2e_cli import write_inventory

from netqual.model.limits import AgentLimits
from netqual.model.plan import ProbePlan
from netqual.planning.limits import limit_problem
from netqual.run.preflight import _limits


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


@pytest.fixture
def listeners() -> Iterator[list[socket.socket]]:
    """Three ports that record whether anyone connected (they never answer)."""
    socks = [socket.socket() for _ in range(3)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
    yield socks
    for sock in socks:
        sock.close()


def contacted(socks: list[socket.socket]) -> bool:
    for sock in socks:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            continue
        conn.close()
        return True
    return False


def inventory(tmp_path: Path, socks: list[socket.socket], roles: list[str]) -> Path:
    new_token_file(tmp_path)
    lines = ['[defaults]\ntoken_file = "netqual.token"\n']
    for i, role in enumerate(roles):
        port = socks[i].getsockname()[1]
        lines.append(
            f'[[node]]\nname = "n{i}"\naddress = "127.0.0.1"\nport = {port}\nrole = "{role}"\n'
        )
    path = tmp_path / "inventory.toml"
    path.write_text("\n".join(lines))
    return path


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--iterations", "1000000", "iterations+warmup 1001000 exceeds max_iterations=1000000"),
        ("--size", "2MiB", "size 2097152 exceeds max_message_bytes=1048576"),
        ("--chunk", "100MiB", "chunk 104857600 exceeds max_chunk_bytes=67108864"),
        ("--timeout", "1000", "timeout 1000 s exceeds max_duration_s=600"),
        ("--depth", "100", "depth 100 exceeds max_depth=64"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_plan_over_the_agents_limits_exits_2_before_any_agent(
    tmp_path: Path,
    cli: Callable[..., Run],
    listeners: list[socket.socket],
    option: str,
    value: str,
    words: str,
    dry_run: bool,
) -> None:
    inv = inventory(tmp_path, listeners, ["any", "any", "any"])
    r = cli("run", str(inv), option, value, *(["--dry-run"] if dry_run else []), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"error: command line: {option}: {words}")
    assert len(r.stderr.strip().splitlines()) == 1
    assert not contacted(listeners)
    assert not (tmp_path / "netqual-run").exists() and not list(tmp_path.glob("netqual-run-*"))


def test_probe_refuses_a_plan_over_the_limits(tmp_path: Path, cli: Callable[..., Run]) -> None:
    r = cli("probe", "127.0.0.1:1", "127.0.0.1:2", "--iterations", "1000000", cwd=tmp_path)
    assert r.returncode == 2
    assert "--iterations: iterations+warmup 1001000 exceeds max_iterations" in r.stderr


@pytest.mark.parametrize(
    ("roles", "words"),
    [
        (["compute", "compute", "any"], "the inventory has no storage node"),
        (["storage", "storage"], "the inventory has no compute (or any) node"),
        (["any"], "the inventory has 1 node; a pair needs two"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_plan_of_zero_pairs_exits_2_before_any_agent(
    tmp_path: Path,
    cli: Callable[..., Run],
    listeners: list[socket.socket],
    roles: list[str],
    words: str,
    dry_run: bool,
) -> None:
    inv = inventory(tmp_path, listeners, roles)
    mode = "full-mesh" if len(roles) == 1 else "bipartite"
    r = cli("run", str(inv), "--mode", mode, *(["--dry-run"] if dry_run else []), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the plan schedules 0 pairs" in r.stderr and words in r.stderr
    assert not contacted(listeners)


def test_limit_problem_names_the_option_and_fits_the_defaults() -> None:
    assert limit_problem(ProbePlan()) is None
    assert limit_problem(ProbePlan(iterations=999_000, warmup=1000)) is None
    small = AgentLimits(max_iterations=5000)
    assert limit_problem(ProbePlan(), small) == (
        "--iterations",
        "iterations+warmup 11000 exceeds max_iterations=5000",
    )


def test_preflight_fails_an_agent_whose_limits_refuse_the_plan() -> None:
    info = {"limits": {"max_iterations": 5000, "max_depth": 64}}
    refused, differ = _limits(info, ProbePlan())
    assert refused == (
        "agent limits refuse the plan (--iterations): "
        "iterations+warmup 11000 exceeds max_iterations=5000"
    )
    assert differ is None
    fits, differ = _limits(info, ProbePlan(iterations=2000, warmup=100))
    assert fits is None
    assert differ == "agent limits differ: max_iterations=5000 (expected 1e+06)"
    assert _limits({}, ProbePlan()) == (None, None)  # an agent too old to report its limits


def test_probe_with_a_wrong_token_exits_3_and_never_says_unsafe(
    agents: AgentPool, tmp_path: Path, cli: Callable[..., Run]
) -> None:
    a, b = agents.start_many([("a",), ("b",)])
    wrong = new_token_file(_mkdir(tmp_path / "other"))
    for extra in ([], ["--json"]):
        r = cli(
            "probe", f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}", "--token-file", str(wrong),
            "--iterations", "100", "--warmup", "10", "--no-bulk", *extra, cwd=tmp_path,
        )  # fmt: skip
        assert r.returncode == 3, r.stdout + r.stderr
        assert r.stdout == ""
        assert r.stderr.strip().splitlines() == [
            f"error: not measured (configuration): 127.0.0.1:{a.port}: "
            "authentication failed: wrong token"
        ]
        assert "unsafe" not in r.stdout + r.stderr


def test_keep_going_lists_configuration_failures_as_not_measured(
    agents: AgentPool, tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """One agent with another token: its pairs are not measured (configuration), not unsafe
    paths; nothing blames it or its rack; the gate fails on completeness and --resume
    measures them once the token is fixed."""
    good = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    other = AgentPool(tmp_path / "other", new_token_file(_mkdir(tmp_path / "other")))
    try:
        bad = other.start("gpu04")
        inv = tmp_path / "inventory.toml"
        write_inventory(inv, [*good, bad], agents.token_file)
        plan = ["--iterations", "200", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
        plan += ["--interference-sample", "0"]
        r = cli("run", str(inv), "--out", "run", "--keep-going", *plan, cwd=tmp_path)
    finally:
        other.close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "token rejected" in r.stderr and "not measured (configuration)" in r.stderr
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert {(p["src"], p["dst"]) for p in doc["paths"]} == {
        ("gpu01", "gpu02"), ("gpu01", "gpu03"), ("gpu02", "gpu03"),
    }  # fmt: skip
    assert sorted((m["src"], m["dst"]) for m in doc["not_measured"]) == [
        ("gpu01", "gpu04"), ("gpu02", "gpu04"), ("gpu03", "gpu04"),
    ]  # fmt: skip
    assert all("failed the pre-flight check: token rejected" in m["reason"]
               for m in doc["not_measured"])  # fmt: skip
    assert doc["run"]["pairs_planned"] == 6
    assert "gpu04" not in json.dumps(doc.get("suspects", []))
    assert "3 of 6 pairs not measured: fix the configuration" in r.stdout
    html = (tmp_path / "run" / "report.html").read_text()
    todo = html.split('id="recommendations"')[1].split("</section>")[0]
    # gpu04 (rack r2, with gpu03) and its rack are never blamed; what the measured paths
    # say on a loaded machine (rack r1, gpu03) is theirs to say.
    assert "Keep gpu04" not in todo and "rack r2" not in todo and "go live" not in todo
    assert 'gpu01 <span class="nw">-&gt;</span> gpu04: gpu04 failed the pre-flight check' in todo
    gate = cli("gate", "run", cwd=tmp_path)
    assert gate.returncode == 1 and "(complete" in gate.stdout.splitlines()[-1]
    # Fixed: the same agent name with the inventory's token; --resume measures the rest.
    agents.start("gpu04")
    fixed = agents.agents[-1]
    write_inventory(inv, [*good, fixed], agents.token_file)
    again = cli("run", str(inv), "--out", "run", "--resume", "--force", *plan, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(doc["paths"]) == 6 and "not_measured" not in doc


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def test_retest_lists_an_agent_down_at_the_start_as_not_measured(
    agents: AgentPool, tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """Without a pre-flight (retest), an agent that does not answer at the start is a
    configuration problem too: its pairs are not measured, never unsafe paths."""
    started = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    inv = tmp_path / "inventory.toml"
    write_inventory(inv, started, agents.token_file)
    plan = ["--iterations", "200", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
    first = cli("run", str(inv), "--out", "run", *plan, "--interference-sample", "0", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    started[2].proc.terminate()
    started[2].proc.wait(timeout=30)
    r = cli(
        "retest", "run", "--path", "gpu01:gpu03", "--path", "gpu01:gpu02", "--iterations",
        "300", "--token-file", str(agents.token_file), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    [new] = tmp_path.glob("run-retest-*")  # the default out: a new directory per re-test
    doc = json.loads((new / "results.json").read_text())
    assert [(p["src"], p["dst"]) for p in doc["paths"]] == [("gpu01", "gpu02")]
    [skipped] = doc["not_measured"]
    assert (skipped["src"], skipped["dst"]) == ("gpu01", "gpu03")
    assert skipped["reason"].startswith("agent on gpu03 not answering at the start: ")
    assert "1 of 2 pairs not measured" in " ".join(r.stdout.split())
