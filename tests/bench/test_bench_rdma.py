"""bench/rdma_vs_perftest: the perftest parser, and a clear exit without a device."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import ModuleType

import pytest
from paths import GOLDEN, REPO

from netqual.transports.rdma import verbs

SCRIPT = REPO / "bench" / "rdma_vs_perftest"

# The report layout of perftest 4.5 latency tests (numbers illustrative, trailing blanks kept)
WRITE_LAT = (GOLDEN / "ib_write_lat.txt").read_text()


def _load() -> ModuleType:
    spec = importlib.util.spec_from_loader(
        "rdma_vs_perftest",
        importlib.machinery.SourceFileLoader("rdma_vs_perftest", str(SCRIPT)),
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_parse_perftest_typical_and_p99() -> None:
    bench = _load()
    assert bench.parse_perftest(WRITE_LAT) == (1.67, 1.85)
    with pytest.raises(ValueError, match="no latency table"):
        bench.parse_perftest("Couldn't connect to 10.0.0.1:18515")


def test_full_rtt_conversion() -> None:
    bench = _load()
    half = bench.Latency("ib_write_lat", "half RTT", 1.67, 1.85, full_rtt_factor=2.0)
    assert (half.rtt_p50_us, half.rtt_p99_us) == (3.34, 3.7)


def test_without_a_device_it_says_so() -> None:
    if verbs.rdma_sysfs_devices():
        pytest.skip("this machine has RDMA devices")
    assert os.access(SCRIPT, os.X_OK)
    run = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 1
    assert run.stderr.startswith(
        "rdma_vs_perftest needs an RDMA device and pyverbs: rdma unavailable:"
    )


def test_rounds_alternate_and_report_medians(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three rounds with stand-in tools: the order flips every other round, the table holds
    per-tool medians and the ratio line the median of per-round ratios."""
    import numpy as np

    bench = _load()
    order: list[str] = []
    write_p50 = iter([10.0, 12.0, 11.0])  # half RTT -> full 20, 24, 22

    def perftest(tool: str, *args: object) -> tuple[float, float]:
        order.append(tool)
        return (next(write_p50), 30.0) if tool == "ib_write_lat" else (25.0, 40.0)

    # in call order: round 2 runs netqual-python before netqual
    netqual_p50 = iter([22.0, 30.0, 40.0, 23.0, 33.0, 44.0])

    def netqual(options: object, host: str, iters: int, size: int, loop: str | None) -> object:
        order.append("netqual-python" if loop else "netqual")
        value = next(netqual_p50) * 1e3
        details = {
            "pingpong_loop": "python (pyverbs; forced)" if loop else "compiled (hotloop.c)",
            "peer": {"pingpong_loop": "x"},
            "pingpong_user_cpu_ns_per_round": 5000,
            "pingpong_sys_cpu_ns_per_round": 100,
        }
        return np.full(100, value, dtype=np.int64), details

    monkeypatch.setattr(bench, "measure_perftest", perftest)
    monkeypatch.setattr(bench, "run_netqual", netqual)
    monkeypatch.setattr(bench.RdmaTransport, "check_available", lambda self: None)
    monkeypatch.setattr(bench, "pick_port", lambda options: ("rxe0", 1, 1, "198.18.0.1"))
    monkeypatch.setattr(sys, "argv", ["rdma_vs_perftest", "--rounds", "3"])
    assert bench.main() == 0
    tools = ["ib_write_lat", "ib_read_lat", "netqual", "netqual-python"]
    assert order == [*tools, *reversed(tools), *tools]
    out = capsys.readouterr().out
    assert "round 2: RTT p50 us ib_write_lat 24.00, ib_read_lat 25.00, netqual 23.00" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if " RTT (" in line}
    assert rows["ib_write_lat"][-3] == "22.00"  # median of 20, 24, 22
    assert rows["netqual"][-3] == "23.00" and "compiled)" in " ".join(rows["netqual"])
    assert rows["netqual-python"][-3] == "40.00"
    # per-round netqual / 2 x ib_write_lat: 1.10, 0.96, 1.50 -> median 1.10
    assert "netqual: p50 1.10 x 2 x ib_write_lat (median of per-round ratios)" in out
    assert "CPU per round trip: user 5.00 us, system 0.10 us" in out
