"""The bench scripts run end to end with tiny parameters and print their comparison table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

ROOT = REPO
BENCH = ROOT / "bench"


def _run(
    script: str, *args: str, env_path: str | None = None, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    if env_path is not None:
        env["PATH"] = env_path
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=ROOT,
        check=False,
    )


def _table(stdout: str, first_column: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = [ln.split() for ln in stdout.splitlines() if ln.split()]
    header = next(ln for ln in lines if ln[0] == first_column)
    rows = {
        ln[0]: ln
        for ln in lines
        if len(ln) == len(header) and (ln[0].isdigit() or ln[0] == "median")
    }
    return header, rows


@pytest.mark.skipif(shutil.which("sockperf") is None, reason="sockperf not installed")
def test_rtt_vs_sockperf_prints_ratio_table() -> None:
    proc = _run("rtt_vs_sockperf", "--rounds", "1", "--quick")
    assert proc.returncode == 0, proc.stderr
    header, rows = _table(proc.stdout, "round")
    assert header == [
        "round", "netqual_p50_us", "sockperf_p50_us", "ratio_p50",
        "netqual_p99_us", "sockperf_p99_us", "ratio_p99", "netqual_n", "sockperf_n",
    ]  # fmt: skip
    assert set(rows) == {"1", "median"}
    med = dict(zip(header, rows["median"], strict=True))
    assert float(med["ratio_p50"]) == pytest.approx(
        float(med["netqual_p50_us"]) / float(med["sockperf_p50_us"]), rel=0.01
    )
    assert float(med["ratio_p50"]) > 0
    assert int(med["netqual_n"]) == 2000


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")
def test_bulk_vs_iperf3_prints_ratio_table() -> None:
    proc = _run("bulk_vs_iperf3", "--rounds", "1", "--quick")
    assert proc.returncode == 0, proc.stderr
    header, rows = _table(proc.stdout, "round")
    assert header == [
        "round", "netqual_d1_gbps", "netqual_d8_gbps", "iperf3_gbps", "ratio_d1", "ratio_d8",
    ]  # fmt: skip
    assert set(rows) == {"1", "median"}
    med = dict(zip(header, rows["median"], strict=True))
    assert float(med["iperf3_gbps"]) > 0
    for depth in ("d1", "d8"):
        assert float(med[f"ratio_{depth}"]) == pytest.approx(
            float(med[f"netqual_{depth}_gbps"]) / float(med["iperf3_gbps"]), rel=0.02
        )


@pytest.mark.parametrize(
    ("script", "tool"), [("rtt_vs_sockperf", "sockperf"), ("bulk_vs_iperf3", "iperf3")]
)
def test_missing_reference_tool_exits_2(script: str, tool: str, tmp_path: Path) -> None:
    proc = _run(script, "--rounds", "1", env_path=str(tmp_path))
    assert proc.returncode == 2
    assert f"{tool} not found" in proc.stderr
    assert proc.stdout == ""


def test_engine_vs_probe_prints_the_three_side_by_side() -> None:
    """Root, the lab, iperf3 and an engine; exit 2 naming what is missing otherwise."""
    proc = _run("engine_vs_probe", "--quick", timeout_s=240)
    if proc.returncode == 2:
        assert proc.stderr.startswith("engine_vs_probe: ")
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr[-2000:]
    header, rows = _table(proc.stdout, "round")
    assert header[:4] == ["round", "probe_p50_us", "read_p50_us", "write_p50_us"]
    med = dict(zip(header, rows["median"], strict=True))
    assert float(med["iperf3_gbps"]) > 0 and float(med["start_init_s"]) > 0
    assert float(med["read/probe"]) == pytest.approx(
        float(med["read_p50_us"]) / float(med["probe_p50_us"]), rel=0.05
    )


def test_startup_prints_each_commands_cpu(tmp_path: Path) -> None:
    """bench/startup runs every command it names to its end (the agent to 'listening on'),
    writes its medians and compares them with an earlier file; no time is judged.

    One run does both: the earlier file is written here in the format of ``--json``, with
    the agent alone in it (a command the earlier file lacks gets "-")."""
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"rounds": 1, "medians": {"netqual agent": {"cpu_ms": 1e6}}}))
    first = tmp_path / "first.json"
    proc = _run("startup", "--quick", "--json", str(first), "--against", str(earlier))
    assert proc.returncode == 0, proc.stderr
    medians = json.loads(first.read_text())["medians"]
    assert set(medians) == {
        "python -c pass", "netqual --version", "netqual agent", "netqual run --dry-run",
        "netqual report", "netqual gate",
    }  # fmt: skip
    assert medians["netqual agent"]["cpu_ms"] > 0
    rows = {ln.strip().split("  ")[0]: ln.split() for ln in proc.stdout.splitlines()[2:]}
    assert proc.stdout.splitlines()[1].split()[-2:] == ["old_cpu_ms", "new/old"]
    agent = rows["netqual agent"]
    assert agent[-2:] == ["1000000", f"{medians['netqual agent']['cpu_ms'] / 1e6:.2f}"]
    assert rows["netqual gate"][-2:] == ["-", "-"]
