"""The decision with real agents on loopback (docs/policy.md "One decision"): a run writes
each path's verdict as the worst class of its evidence beside its RTT class, and the run's
answer; the default gate judges that answer; `gate --workload` for a workload offload can
never pay exits 1 naming it; a file written without the decision (an older netqual) is
decided the same way when read."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agentpool import AgentPool
from e2e_cli import netqual_here

from netqual.files.schema import validate

SMALL = ["--iterations", "500", "--warmup", "50", "--chunk", "64KiB", "--depth", "1",
         "--interference-sample", "0"]  # fmt: skip
RANK = {"offload-safe": 0, "marginal": 1, "unsafe": 2}
# A local NVMe read at 10 Tbit/s: a chunk's bytes alone take longer on any network. The
# chunk is 128 MiB a node (1,024 tokens): "never" is the measured cell's p99 less the path's
# RTT p99 against the 107 us read, and its bytes take >= 100 ms at loopback's goodput, far
# above any RTT p99 a loaded host gives loopback (a 512 KiB chunk took ~0.4 ms: an RTT p99
# of ms under -n 2 made the rule see room for one round trip on a path).
NEVER_PAYS = """[workload]
name = "tiny-model"
layers = 32
kv_heads = 8
head_dim = 128
dtype = "bf16"
tp = 8
chunk_tokens = 1024
local_read_gbps = 10000
"""


def netqual(*args: str) -> subprocess.CompletedProcess[str]:
    """The command through the CLI entry point in this process (its output and files are
    what is checked, not its process)."""
    return netqual_here(*args)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("decision")
    token = tmp / "token"
    token.write_text(secrets.token_hex(32) + "\n")
    token.chmod(0o600)
    pool = AgentPool(tmp, token)
    try:
        nodes = pool.start_many([("gpu01",), ("gpu02",), ("gpu03",)])
        inventory = tmp / "inventory.toml"
        inventory.write_text(
            f'[defaults]\ntoken_file = "{token}"\n'
            + "".join(
                f'[[node]]\nname = "{n.name}"\naddress = "127.0.0.1"\nport = {n.port}\n'
                for n in nodes
            )
        )
        policy = tmp / "policy.toml"
        policy.write_text("[policy]\nmin_samples = 500\n")
        out = tmp / "out"
        r = netqual("run", str(inventory), "--out", str(out), "--policy", str(policy), *SMALL)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        (tmp / "never.toml").write_text(NEVER_PAYS)
        yield out
    finally:
        pool.close()


def test_every_path_is_decided_from_its_evidence(run_dir: Path) -> None:
    doc = json.loads((run_dir / "results.json").read_text())
    validate(doc, "results.json")
    assert len(doc["paths"]) == 3
    for p in doc["paths"]:
        kinds = [e["kind"] for e in p["evidence"]]
        assert kinds[0] == "rtt" and p["evidence"][0]["class"] == p["rtt_verdict"]
        # the verdict is the worst class of the evidence; one that cannot judge holds marginal
        worst = max(RANK[e["class"]] if e["class"] else 1 for e in p["evidence"])
        assert RANK[p["verdict"]] == worst, p
    d = doc["decision"]
    counts = doc["summary"]["counts"]
    assert d["counts"] == counts
    safe = counts["offload-safe"]
    expected = "no-go" if not safe else "go" if safe == 3 and not d["blocking"] else "conditional"
    assert d["answer"] == expected
    by_kind = {e["kind"]: e for e in d["evidence"]}
    assert by_kind["workload"]["class"] is None and "no workload given" in d["governs"]
    assert by_kind["loss"]["class"] is not None  # the agents count: loss judged every path
    assert "loopback" in by_kind["bandwidth"]["detail"]  # no NIC to compare on one host
    gate = netqual("gate", str(run_dir))
    assert gate.returncode == (0 if d["answer"] == "go" else 1), gate.stdout


def test_gate_with_a_workload_that_never_pays_exits_1_and_names_it(run_dir: Path) -> None:
    never = str(run_dir.parent / "never.toml")
    g = netqual("gate", str(run_dir), "--workload", never)
    assert g.returncode == 1, g.stdout
    assert "tiny-model (TP8)  workload: offload can never pay on 3 of 3 paths" in g.stdout
    r = netqual("report", str(run_dir), "--workload", never)
    assert r.stdout.startswith("Decision: NO-GO (0 offload-safe, 0 marginal, 3 unsafe)")


def test_a_file_without_the_decision_is_decided_the_same_way(run_dir: Path) -> None:
    doc = json.loads((run_dir / "results.json").read_text())
    old = dict(doc)
    old.pop("decision")
    old["paths"] = []
    for p in doc["paths"]:  # as an older netqual wrote it: the RTT class as the verdict
        q = {k: v for k, v in p.items() if k not in ("rtt_verdict", "evidence")}
        q["verdict"] = p["rtt_verdict"]
        q["reasons"] = [r for r in p["reasons"] if not r.startswith(("loss: ", "bandwidth: "))]
        old["paths"].append(q)
    path = run_dir.parent / "old.json"
    path.write_text(json.dumps(old))
    again = json.loads(netqual("report", str(path), "--json").stdout)
    assert again["decision"] == doc["decision"]
    assert [p["verdict"] for p in again["paths"]] == [p["verdict"] for p in doc["paths"]]
