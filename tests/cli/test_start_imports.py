"""Starting a command loads what that command needs, nothing heavier.

`netqual agent` starts on every node of a cluster and the tests start hundreds of netqual
processes; start-up is mostly imports (bench/startup measures its CPU, docs/performance.md
"Start-up"). This judges the set of modules a fresh process holds after the command's
help, never a time: each command's module and everything it imports at module level are
loaded by then (cli.register imports the command's module alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cli_helpers import ROOT

# Run the CLI as `python -m netqual` does, then list sys.modules after a marker line.
_PROBE = (
    "import json, sys\n"
    "from netqual.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "print('\\n@@modules ' + json.dumps(sorted(sys.modules)))\n"
    "raise SystemExit(rc)\n"
)

# What an agent needs only once asked to measure, or never on a TCP node: array samples,
# results files and their schema, analysis, reports, the campaign store, fetch engines,
# the RDMA transport, sysfs readers. (importlib.metadata stays: typer 0.29 coerces every
# option through pydantic, and pydantic's plugin loader imports it.)
AGENT_NEVER_AT_START = (
    "numpy",
    "jsonschema",
    "jinja2",
    "duckdb",
    "prometheus_client",
    "netqual.results",
    "netqual.analysis",
    "netqual.report",
    "netqual.table",
    "netqual.campaign",
    "netqual.engines",
    "netqual.transports.rdma.transport",
    "netqual.transports.tcp",
    "netqual.agent.probe_request",
    "netqual.agent.engine_serve",
    "netqual.agent.fleet_snapshot",
    "netqual.agent.pcisysfs",
)


def _loaded(*argv: str, rc: int = 0) -> set[str]:
    env = {**os.environ, "NETQUAL_WIDTH": "100", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == rc, r.stderr
    _, marker, listed = r.stdout.rpartition("\n@@modules ")
    assert marker, r.stdout
    return set(json.loads(listed))


def _under(loaded: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == r or m.startswith(f"{r}.") for r in roots))


def test_agent_starts_without_samples_results_analysis_engines_or_rdma() -> None:
    loaded = _loaded("agent", "--help")
    assert {"netqual.cli.cmd_agent", "netqual.agent.server", "netqual.agent.requests"} <= loaded
    assert _under(loaded, AGENT_NEVER_AT_START) == []


def test_the_probe_sees_what_a_command_imports() -> None:
    """The companion: `netqual report` does load results, their schema and numpy, so an
    empty list above is the agent's doing, not a probe that sees nothing."""
    loaded = _loaded("report", "--help")
    assert {"numpy", "jsonschema", "netqual.results", "netqual.report"} <= loaded


def test_version_registers_no_command() -> None:
    loaded = _loaded("--version")
    assert sorted(m for m in loaded if m.startswith("netqual.cli.cmd_")) == []
    assert _under(loaded, ("numpy", "jsonschema", "netqual.results")) == []


def test_an_error_leaves_without_loading_the_run_stack() -> None:
    """A refused command line (the commonest error: here an agent without a token) is
    reported and exits 2 without importing the run stack, results or numpy, which only a
    run stopped by a signal needs (about 0.35 s of CPU per failing command)."""
    loaded = _loaded("agent", "--listen", "127.0.0.1:0", rc=2)
    assert "netqual.cli.cmd_agent" in loaded
    assert _under(loaded, ("netqual.cli.rundir", "netqual.results", "numpy")) == []


def test_campaign_loads_prometheus_client_for_serve_only() -> None:
    """`campaign serve` imports it when it runs; `export` (OpenMetrics text) at start."""
    assert _under(_loaded("campaign", "--help"), ("prometheus_client", "asyncio")) == []
    assert "prometheus_client" in _loaded("export", "--help")


def test_a_run_loads_numpys_lazy_ma_before_its_probe_threads() -> None:
    """np.percentile and np.unique read np.ma, which numpy imports on first use; two of the
    run's probe threads using it first at once recursed in numpy's lazy loader (a
    RecursionError ended a lab's `netqual run`). The run's statistics load it at import."""
    assert "numpy.ma" in _loaded("run", "--help")


_PRELOAD = (
    "import json, sys\n"
    "from netqual.transports import TransportOptions, preload\n"
    "loaded = preload(TransportOptions.from_flags(sys.argv[1] or None, None, None, None))\n"
    "print(json.dumps([loaded, 'netqual.transports.rdma.transport' in sys.modules]))\n"
)


def test_an_agent_told_its_rdma_device_loads_the_rdma_transport_before_it_listens() -> None:
    """`netqual agent --rdma-device X` (or NETQUAL_RDMA_DEVICE) will be asked for RDMA
    probes, whose acceptance is awaited 10 s: a fresh agent in CI's qemu guest imported the
    transport only on the first rdma.connect and answered too late (the bench's responder:
    a silent peer). One without a device still loads it on first use (the test above)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NETQUAL_RDMA_DEVICE", None)
    got = {}
    for device in ("rxe0", ""):
        r = subprocess.run(
            [sys.executable, "-c", _PRELOAD, device],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        got[device] = json.loads(r.stdout)
    assert got == {"rxe0": [["netqual.transports.rdma.transport"], True], "": [[], False]}


_THREADS = (
    "import os, sys\n"
    "from netqual.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "import numpy\n"
    "blas = os.environ.get('OPENBLAS_NUM_THREADS', '-')\n"
    "print('@@threads', len(os.listdir('/proc/self/task')), blas)\n"
    "raise SystemExit(rc)\n"
)


def _threads(blas: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update({"NETQUAL_WIDTH": "100", "PYTHONPATH": str(ROOT)})
    if blas is not None:
        env["OPENBLAS_NUM_THREADS"] = blas
    r = subprocess.run(
        [sys.executable, "-c", _THREADS, "report", "--help"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout.rpartition("@@threads ")[2].split()


def test_numpys_blas_starts_no_thread_in_a_netqual_process() -> None:
    """A command that imports numpy holds one thread: OpenBLAS's pool (one more thread per
    further core, spinning ~0.1 s after start: ~0.12 s of CPU per real-time lab agent)
    is never started. A user's own OPENBLAS_NUM_THREADS is kept."""
    assert _threads(None) == ["1", "1"]
    if (os.cpu_count() or 1) > 1:
        assert _threads("2")[1] == "2" and int(_threads("2")[0]) > 1
