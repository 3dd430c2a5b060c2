"""A plan below the policy's min_samples: refused, or run as a marked preliminary look
whose advice blames the sample count first and quotes each path's own numbers."""

from __future__ import annotations

import json
from pathlib import Path

from agentpool import AgentPool
from e2e_cli import netqual_here, write_inventory

PLAN = ["--iterations", "300", "--warmup", "20", "--no-bulk"]


def _policy(tmp_path: Path) -> Path:
    # A safe line far above any loopback tail: every path is within it, so the sample count
    # is the only reason a path is not offload-safe, however loaded this machine is.
    policy = tmp_path / "policy.toml"
    policy.write_text("[policy]\nsafe_max_us = 1000000.0\nunsafe_above_us = 2000000.0\n")
    return policy


def test_short_plan_is_refused_naming_both_numbers(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(
        '[[node]]\nname = "a"\naddress = "127.0.0.1"\n[[node]]\nname = "b"\naddress = "127.0.0.2"\n'
    )
    out = tmp_path / "out"
    r = netqual_here("run", str(inventory), "--out", str(out), *PLAN)
    assert r.returncode == 2, r.stderr
    err = " ".join(r.stderr.split())
    assert "300 samples per path" in err and "min_samples 10,000" in err
    assert "--allow-short-plan" in err
    assert not out.exists()


def test_allow_short_plan_marks_every_output_preliminary(agents: AgentPool, tmp_path: Path) -> None:
    started = agents.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
    inventory = tmp_path / "inventory.toml"
    write_inventory(inventory, started, agents.token_file)
    out = tmp_path / "out"
    policy = str(_policy(tmp_path))
    r = netqual_here(
        "run", str(inventory), "--out", str(out), "--policy", policy, "--allow-short-plan", *PLAN
    )
    assert r.returncode == 0, r.stderr
    assert "preliminary: 300 samples per path, the policy needs 10,000" in r.stdout
    report_line = next(ln for ln in r.stdout.splitlines() if "paths offload-safe" in ln)
    assert report_line.startswith("PRELIMINARY (300 samples per path, the policy needs 10,000)")
    doc = json.loads((out / "results.json").read_text())
    assert doc["run"]["preliminary"] is True
    for p in doc["paths"]:
        assert p["verdict"] == "marginal"
        assert p["reasons"][0].startswith("only 300 samples kept, policy needs 10,000")

    html = (out / "report.html").read_text(encoding="utf-8")
    h1 = html[html.index('id="verdict">') :].split("</h1>")[0]
    assert "PRELIMINARY" in h1
    todo = html[html.index('id="recommendations"') :]
    first = todo[todo.index('<ol class="fixes"') :].split("</li>")[0]
    # Fix 1 is the sample count, with these paths' own numbers; no hardware is blamed (the
    # decision's ranked list: said once, no card beside it saying it again)
    assert "<b>run</b>" in first and "3 paths marginal only for want of samples" in first
    assert "the plan kept 300 per path, the policy needs 10,000" in first
    assert "not the hardware" in first and "Too few samples" not in todo
    assert "local NVMe" not in todo.split("</section>")[0]
    assert "top-of-rack" not in todo.split("</section>")[0]

    g = netqual_here("gate", str(out / "results.json"))
    assert g.returncode == 1
    assert g.stdout.startswith("warning: PRELIMINARY (300 samples per path")
    # A failing path says why it is marginal, not only its (fine) latency.
    assert "(only 300 samples kept, policy needs 10,000" in g.stdout


def test_report_keeps_options_on_one_line() -> None:
    from netqual.report.html import nobreak_options

    html = str(nobreak_options("Re-run with --iterations 10000 before <judging>."))
    assert '<span class="opt">--iterations 10000</span>' in html
    assert "&lt;judging&gt;" in html
