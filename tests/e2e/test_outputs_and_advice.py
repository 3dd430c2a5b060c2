"""Outputs never replace an existing file or run without --force; help shows the defaults
that run; advice comes from evidence (tiers from the node list when a file lacks them);
with a workload the first screen shows both verdicts and which one the gate judges."""

from __future__ import annotations

import dataclasses
import itertools
import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from agentpool import AgentPool, new_token_file
from cli_helpers import Run, run_in_process
from e2e_cli import write_inventory
from factories import make_results, write_results

from netqual.model.plan import ProbePlan
from netqual.model.run import RunKind
from netqual.report.recommend import recommend
from netqual.results import load
from netqual.run.retest import larger_plan
from netqual.table.run import Results


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str, cwd: Path) -> Run:
        return run_in_process(list(args), cwd, monkeypatch, capsys)

    return run


@pytest.mark.parametrize(
    ("args", "target", "option"),
    [
        (["report", "r.json", "--html", "out.html"], "out.html", "--html"),
        (["report", "r.json", "--csv", "out.csv"], "out.csv", "--csv"),
        (["diff", "r.json", "r.json", "--html", "out.html"], "out.html", "--html"),
        (["gate", "r.json", "--junit", "out.xml"], "out.xml", "--junit"),
    ],
)
def test_file_outputs_are_never_replaced_without_force(
    tmp_path: Path, cli: Callable[..., Run], args: list[str], target: str, option: str
) -> None:
    write_results(tmp_path / "r.json", make_results(4, all_safe=True))
    (tmp_path / target).write_text("keep me")
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == (
        f"error: command line: {option}: {target} already exists: choose another file, or --force\n"
    )
    assert (tmp_path / target).read_text() == "keep me"
    forced = cli(*args, "--force", cwd=tmp_path)
    assert forced.returncode in (0, 1), forced.stderr  # gate: 0 pass / 1 fail, both write
    assert (tmp_path / target).read_text() != "keep me"


def test_out_that_is_a_file_is_a_one_line_error_before_the_preflight(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        new_token_file(tmp_path)
        nodes = "".join(
            f'[[node]]\nname = "n{i}"\naddress = "127.0.0.{i + 1}"\nport = {port}\n'
            for i in range(2)
        )
        (tmp_path / "inv.toml").write_text(f'[defaults]\ntoken_file = "netqual.token"\n{nodes}')
        (tmp_path / "taken").write_text("a file")
        for out in ("taken", "taken/run"):
            r = cli("run", "inv.toml", "--out", out, cwd=tmp_path)
            assert r.returncode == 2, r.stdout + r.stderr
            assert r.stderr.startswith(f"error: {out}: ")
            assert "not a directory" in r.stderr.lower()
            assert len(r.stderr.splitlines()) == 1 and r.stdout == ""
        with pytest.raises(BlockingIOError):
            listener.accept()  # the pre-flight never ran


def test_demo_never_replaces_a_real_run(tmp_path: Path, cli: Callable[..., Run]) -> None:
    write_results(tmp_path / "run" / "results.json", _mkdir_results(tmp_path / "run"))
    before = (tmp_path / "run" / "results.json").read_bytes()
    r = cli("demo", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2
    assert "run already holds a run (results.json)" in " ".join(r.stderr.split())
    assert (tmp_path / "run" / "results.json").read_bytes() == before


def _mkdir_results(path: Path) -> Results:
    path.mkdir()
    return make_results(4, all_safe=True)


def test_help_shows_the_defaults_that_run(tmp_path: Path, cli: Callable[..., Run]) -> None:
    demo = " ".join(cli("demo", "--help", cwd=tmp_path).stdout.split())
    assert "Kept ping-pong samples. [default: 2000 in the lab; 10000 on loopback]" in demo
    assert "[default: 64KiB in the lab; 64KiB, 1MiB, 8MiB on loopback]" in demo
    assert "[default: 1 in the lab; 1, 8 on loopback]" in demo
    assert "--force" in demo
    retest = " ".join(cli("retest", "--help", cwd=tmp_path).stdout.split())
    assert "[default: twice the run's, and at least the policy's min_samples" in retest
    assert "10000" not in retest


def test_retest_plan_reaches_min_samples_within_the_limits() -> None:
    short = ProbePlan(iterations=2000, warmup=200)
    assert larger_plan(short, None, 10_000, 1_000_000).iterations == 10_000
    assert larger_plan(ProbePlan(iterations=20_000), None, 10_000, 1_000_000).iterations == 40_000
    big = ProbePlan(iterations=900_000, warmup=1000)
    assert larger_plan(big, None, 10_000, 1_000_000).iterations == 999_000
    assert larger_plan(short, 3000, 10_000, 1_000_000).iterations == 3000  # as asked


def test_retest_says_when_it_stays_preliminary_and_counts_in_words(
    agents: AgentPool, tmp_path: Path, cli: Callable[..., Run]
) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",)])
    inv = tmp_path / "inventory.toml"
    write_inventory(inv, started, agents.token_file)
    plan = ["--iterations", "200", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
    first = cli("run", str(inv), "--out", "run", *plan, "--interference-sample", "0", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    r = cli("retest", "run", "--path", "gpu01:gpu02", "--iterations", "300", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    text = " ".join(r.stdout.split())
    [new] = tmp_path.glob("run-retest-*")
    assert f"re-testing 1 path of run with 300 iterations into {new.name}" in text
    assert "preliminary: 300 samples per path, the policy needs 10,000: the re-test stays" in text
    args = ["retest", "run", "--path", "gpu01:gpu02", "--iterations", "300"]
    again = cli(*args, "--out", new.name, cwd=tmp_path)
    assert again.returncode == 2 and f"{new.name} already holds a run" in again.stderr
    no_out = cli(*args, "--resume", cwd=tmp_path)
    assert no_out.returncode == 2 and "--resume: needs --out DIR" in no_out.stderr
    over = cli("retest", "run", "--iterations", "1000000", "--out", "x", cwd=tmp_path)
    assert over.returncode == 2 and "--iterations: iterations+warmup" in over.stderr


def test_a_file_without_tiers_is_judged_by_the_node_lists_racks(tmp_path: Path) -> None:
    """Cross-rack paths all marginal, same-rack safe: the advice is about distance, with or
    without per-path tiers in the file; never a card per rack or every node a suspect."""
    racks = [f"r0{i}" for i in range(1, 5)]
    res = make_results(16, rack_size=4, slow_rack_pairs=list(itertools.combinations(racks, 2)))
    write_results(tmp_path / "with.json", res)
    doc = json.loads((tmp_path / "with.json").read_text())
    for p in doc["paths"]:
        del p["tier"]
    (tmp_path / "without.json").write_text(json.dumps(doc))
    with_tiers, without = load(tmp_path / "with.json"), load(tmp_path / "without.json")
    assert (without.paths.tier == with_tiers.paths.tier).all()
    titles = [r.title for r in recommend(without)]
    assert titles == [r.title for r in recommend(with_tiers)]
    assert "Keep KV offload inside each rack" in titles
    assert not any(t.startswith("Keep rack") for t in titles)


def test_a_file_without_tiers_or_racks_says_it_cannot_localise(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """A slow node and a slow rack pair: with racks the advice names them; with neither
    tiers nor racks in the file, terminal and report say they cannot localise and blame no
    node or rack, and still list the paths that are not offload-safe."""
    res = make_results(16, rack_size=4, slow_nodes=["gpu02"], slow_rack_pairs=[("r03", "r04")])
    write_results(tmp_path / "racked.json", res)
    doc = json.loads((tmp_path / "racked.json").read_text())
    for p in doc["paths"]:
        del p["tier"]
    for n in doc["nodes"]:
        n["rack"] = None
    (tmp_path / "flat.json").write_text(json.dumps(doc))
    racked = [r.title for r in recommend(load(tmp_path / "racked.json"))]
    assert "Keep gpu02 on local NVMe" in racked  # the same data, located with racks
    assert "Do not offload KV between racks r03 and r04" in racked

    flat = cli("report", "flat.json", "--html", "flat.html", cwd=tmp_path)
    assert flat.returncode == 0, flat.stderr
    out = " ".join(flat.stdout.split())
    assert "suspects: cannot localise: no path has a tier and no node a rack" in out
    assert "suspects (where the problem sits)" not in out
    cards = [r.title for r in recommend(load(tmp_path / "flat.json"))]
    assert "Cannot localise: the topology is unknown" in cards
    assert not any(t.startswith(("Keep ", "Do not offload KV between racks")) for t in cards)
    html = (tmp_path / "flat.html").read_text(encoding="utf-8")
    todo = " ".join(html.split('id="recommendations"')[1].split("</section>")[0].split())
    assert "What to do" in todo
    assert "Cannot localise: the topology is unknown" in todo
    bad = int((load(tmp_path / "flat.json").paths.verdict > 0).sum())
    assert f"{bad} of 120 paths are not offload-safe (" in todo
    assert "Keep gpu02" not in todo and "top-of-rack" not in todo


def test_with_a_workload_the_first_screen_shows_both_verdicts(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    write_results(tmp_path / "r.json", make_results(4, all_safe=True))
    r = cli("report", "r.json", "--workload", "llama-3.1-70b-tp8", "--html", "r.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    head = " ".join(" ".join(r.stdout.splitlines()[:12]).split())
    assert head.startswith("Decision: ")
    assert "RTT lines (p99): 6 of 6 paths offload-safe; workload (" in head
    assert "A path's verdict is the worse of the two" in head
    header = (tmp_path / "r.html").read_text().split("<header")[1].split("</header>")[0]
    assert 'id="two-verdicts"' in header and "RTT lines (p99): 6 of 6" in header
    assert header.index('id="decision"') < header.index('id="two-verdicts"')


def test_a_demo_may_replace_an_earlier_demo_but_nothing_else(tmp_path: Path) -> None:
    from netqual.base.errors import UsageError
    from netqual.cli import rundir

    res = make_results(4, all_safe=True)
    run = dataclasses.replace(res.run, inventory="(demo loopback)", kind=RunKind.DEMO)
    demo = dataclasses.replace(res, run=run)
    write_results(_mkdir(tmp_path / "demo") / "results.json", demo)
    (tmp_path / "demo" / "run.json").write_text('{"kind": "demo"}')
    rundir.check_out(tmp_path / "demo", force=False, resume=False, demo_ok=True)
    with pytest.raises(UsageError, match="already holds a run"):
        rundir.check_out(tmp_path / "demo", force=False, resume=False)  # `run` never does
    # a demo of an older netqual: no kind in run.json or results.json, its inventory's name
    older = _mkdir(tmp_path / "older")
    doc = json.loads(write_results(older / "results.json", demo).read_text())
    del doc["run"]["kind"]
    (older / "results.json").write_text(json.dumps(doc))
    rundir.check_out(older, force=False, resume=False, demo_ok=True)
    # named like a demo, recorded as a cluster run: the recorded kind decides
    real = dataclasses.replace(res, run=dataclasses.replace(res.run, inventory="(demo loopback)"))
    write_results(_mkdir(tmp_path / "real") / "results.json", real)
    with pytest.raises(UsageError, match="already holds a run"):
        rundir.check_out(tmp_path / "real", force=False, resume=False, demo_ok=True)


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path
