"""bench/rdma_vs_perftest: the perftest parser, and a clear exit without a device."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from netqual.transports.rdma import verbs

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "rdma_vs_perftest"

# The report layout of perftest 4.5 latency tests (numbers illustrative, trailing blanks kept)
WRITE_LAT = (Path(__file__).parent / "golden" / "ib_write_lat.txt").read_text()


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
