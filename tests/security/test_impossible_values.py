"""Impossible values are a path's problem, never the file's (netqual.analysis.plausible).

A liar agent (a real agent process whose measurements are negated) makes its own paths
unsafe with the reason "agent reported impossible values"; every other path of the run is
judged as usual and the run directory stays readable by report, gate and diff. A results
file edited to hold impossible values loads, with those paths unsafe; a stored verdict
that its values contradict does not pass the gate.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool, AgentProc, cli_env
from cli_helpers import run_in_process
from e2e_cli import netqual_here
from factories import make_results, write_results
from peers import write_inventory

from netqual.analysis.plausible import IMPOSSIBLE
from netqual.analysis.policy import judge
from netqual.model.verdict import Verdict
from netqual.results import load

LIAR = textwrap.dedent(
    """
    import dataclasses, sys
    import numpy as np
    from netqual.transports import tcp
    honest = tcp.TcpTransport.initiate
    def lie(self, *args, **kwargs):  # every RTT it measures, reported negative
        raw = honest(self, *args, **kwargs)
        return dataclasses.replace(raw, rtt_ns=-np.abs(np.asarray(raw.rtt_ns)) - 1)
    tcp.TcpTransport.initiate = lie
    from netqual.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


# A liar reporting values no clock can produce: INT64_MIN, INT64_MAX, 2e15 ns (23 days).
EXTREME_LIAR = textwrap.dedent(
    """
    import dataclasses, sys
    import numpy as np
    from netqual.transports import tcp
    honest = tcp.TcpTransport.initiate
    def lie(self, *args, **kwargs):
        raw = honest(self, *args, **kwargs)
        rtt = np.asarray(raw.rtt_ns).copy()
        rtt[0], rtt[1], rtt[2] = -(2**63), 2**63 - 1, 2 * 10**15
        return dataclasses.replace(raw, rtt_ns=rtt)
    tcp.TcpTransport.initiate = lie
    from netqual.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def start_liar(pool: AgentPool, name: str, script: str = LIAR) -> AgentProc:
    log = pool.workdir / f"agent-{name}.log"
    cmd = [sys.executable, "-c", script, "agent", "--listen", "127.0.0.1:0", "--name", name]
    cmd += ["--token-file", str(pool.token_file)]
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=cli_env())
    agent = AgentProc(name, proc, 0, log)
    pool.agents.append(agent)  # the pool stops it
    AgentPool._wait_ready(agent, time.monotonic() + 30)
    return agent


def test_a_liar_agents_paths_are_unsafe_and_the_run_stays_readable(
    agents: AgentPool, tmp_path: Path
) -> None:
    honest = agents.start_many([("gpu02",), ("gpu03",)])
    liar = start_liar(agents, "gpu01")
    inventory = tmp_path / "inventory.toml"
    nodes = [("gpu01", liar.port), *((a.name, a.port) for a in honest)]
    write_inventory(inventory, nodes, agents.token_file)
    run = netqual_here(
        "run", str(inventory), "--out", "out", "--iterations", "300", "--warmup", "20",
        "--no-bulk", "--allow-short-plan", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    results = load(tmp_path / "out" / "results.json")
    rows = list(results.paths)
    lied = [p for p in rows if p.src == "gpu01"]  # the initiator measures and reports
    told = [p for p in rows if p.src != "gpu01"]
    assert lied and told
    for p in lied:
        assert p.verdict is Verdict.UNSAFE
        # Refused where it enters (the agent's reply), naming the value.
        assert f"{IMPOSSIBLE}: an RTT sample of -" in p.reasons[0], p.reasons
    for p in told:  # judged as usual (a loaded host may make one slow, never "impossible")
        assert p.rtt is not None and p.rtt.p99_us > 0 and p.error is None
        assert (p.verdict, p.reasons) == judge(results.run.policy, p.rtt, p.bulk)
        assert not any(IMPOSSIBLE in r for r in p.reasons)
    stdout: dict[str, str] = {}
    for args, code in ((["report", "out"], 0), (["gate", "out"], 1), (["diff", "out", "out"], 0)):
        r = netqual_here(*args, cwd=tmp_path)
        assert r.returncode == code, r.stderr
        assert "Traceback" not in r.stderr
        stdout[args[0]] = r.stdout
    assert IMPOSSIBLE in stdout["report"]


def _numbers(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def test_an_extreme_liar_is_refused_at_the_door_and_every_reader_reads_the_run(
    agents: AgentPool, tmp_path: Path
) -> None:
    """INT64_MIN / INT64_MAX / 2e15 ns samples: the liar's paths are unsafe with the reason,
    no file holds a number beyond +-1e15, and report, report --html, gate, diff,
    campaign add and run --resume all read the run."""
    honest = agents.start_many([("gpu02",), ("gpu03",)])
    liar = start_liar(agents, "gpu01", EXTREME_LIAR)
    inventory = tmp_path / "inventory.toml"
    nodes = [("gpu01", liar.port), *((a.name, a.port) for a in honest)]
    write_inventory(inventory, nodes, agents.token_file)
    run = netqual_here(
        "run", str(inventory), "--out", "out", "--iterations", "300", "--warmup", "20",
        "--no-bulk", "--allow-short-plan", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    for name in ("results.json", "results.jsonl"):
        text = (tmp_path / "out" / name).read_text()
        docs = (
            [json.loads(line) for line in text.splitlines()]
            if name.endswith("l")
            else [json.loads(text)]
        )
        big = [n for d in docs for n in _numbers(d) if abs(n) > 1e15]
        assert not big, (name, big[:5])
    rows = list(load(tmp_path / "out" / "results.json").paths)
    lied = [p for p in rows if p.src == "gpu01"]
    assert lied and all(p.verdict is Verdict.UNSAFE for p in lied)
    for p in lied:
        assert p.error is not None and "agent reported impossible values" in p.error, p.error
        assert "an RTT sample of" in p.error
    assert all(p.error is None for p in rows if p.src != "gpu01")
    readers = (
        (["report", "out"], 0),
        (["report", "out", "--html", "r.html"], 0),
        (["gate", "out"], 1),
        (["diff", "out", "out"], 0),
        (["campaign", "init", "c"], 0),
        (["campaign", "add", "c", "out", "--week", "1"], 0),
        (["run", str(inventory), "--out", "out", "--resume", "--iterations", "300",
          "--warmup", "20", "--no-bulk", "--allow-short-plan"], 0),
    )  # fmt: skip
    for args, code in readers:
        r = netqual_here(*args, cwd=tmp_path)
        assert r.returncode == code, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "out of range" not in r.stderr, r.stderr


def _doctored(path: Path, edit: Any) -> Path:
    write_results(path, make_results(6, all_safe=True))
    doc = json.loads(path.read_text())
    edit(doc["paths"])
    path.write_text(json.dumps(doc))
    return path


LIES = [
    ("negative RTT", lambda p: p[0]["rtt_us"].update(min=-5.0, p50=-5.0), "zero or less"),
    ("zero RTT", lambda p: p[0]["rtt_us"].update(min=0.0), "zero or less"),
    ("INT64_MIN", lambda p: p[0]["rtt_us"].update(min=-9.223372036854776e12), "zero or less"),
    ("p50 > p99", lambda p: p[0]["rtt_us"].update(p50=1e4), "out of order"),
    ("samples", lambda p: p[0]["rtt_us"].update(samples=10**9), "does not hold its samples"),
    ("goodput", lambda p: p[0]["bulk"][0].update(goodput_gbps=1.07e9), "cannot carry"),
    ("negative completion", lambda p: p[0]["bulk"][0]["completion_us"].update(p50=-3.0), "zero"),
]


@pytest.mark.parametrize(
    ("edit", "words"), [(e, w) for _, e, w in LIES], ids=[n for n, _, _ in LIES]
)
def test_a_file_with_impossible_values_loads_with_that_path_unsafe(
    tmp_path: Path,
    edit: Any,
    words: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    f = _doctored(tmp_path / "results.json", edit)
    res = load(f)
    first, *rest = list(res.paths)
    assert first.verdict is Verdict.UNSAFE
    assert first.reasons[0].startswith(IMPOSSIBLE) and words in first.reasons[0], first.reasons
    assert all(p.verdict is Verdict.SAFE for p in rest)
    # report and gate read it through the command's entry point, in this process (the file
    # is the subject here; the liar tests above and the gate test below start processes)
    for args, code in ((["report", "results.json"], 0), (["gate", "results.json"], 1)):
        r = run_in_process(args, tmp_path, monkeypatch, capsys)
        assert r.returncode == code, r.stderr


def test_gate_judges_values_not_the_stored_verdict(tmp_path: Path) -> None:
    def edit(paths: list[dict[str, Any]]) -> None:
        for k in ("p99", "p999", "max"):  # a 1 s p99, still stored as offload-safe
            paths[0]["rtt_us"][k] = 1e6
        assert paths[0]["verdict"] == "offload-safe"

    _doctored(tmp_path / "results.json", edit)
    r = netqual_here("gate", "results.json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert "1 unsafe path" in r.stdout
    write_results(tmp_path / "clean.json", make_results(6, all_safe=True))
    assert netqual_here("gate", "clean.json", cwd=tmp_path).returncode == 0


def test_resume_reads_a_jsonl_with_impossible_values(tmp_path: Path) -> None:
    from netqual.results import journal
    from netqual.results.encode import path_to_dict

    res = make_results(4, all_safe=True)
    lines = [path_to_dict(p) for p in res.paths]
    lines[1]["rtt_us"]["p50"] = -1.0
    f = tmp_path / "results.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in lines))
    paths = list(journal.read(f).done.values())
    assert [p.verdict for p in paths].count(Verdict.UNSAFE) == 1
    assert paths[1].verdict is Verdict.UNSAFE and IMPOSSIBLE in paths[1].reasons[0]
