"""Runs INSIDE the Soft-RoCE guest that tests/env/test_rxe_guest.py boots (not collected by pytest).

The guest has rxe0 on 198.18.0.1 and rxe1 on 198.18.0.2, and on a second link (rail 1)
rxe2 on 198.18.1.1 and rxe3 on 198.18.1.2 (netqual/vm/rxe-net.sh). This
script runs netqual's command line (doctor, three agents, probes) and
bench/rdma_vs_perftest there and writes one ``OUT/<case>.json`` per case ({argv, rc,
stdout, stderr, elapsed_s, ...}); the host test judges them.

Python under TCG needs 20-60 s (minutes on a loaded host) to import netqual, so this
script imports ``netqual.cli`` once and forks every netqual process from itself: each
child runs ``netqual.cli.main(argv)`` (what ``python -m netqual`` runs) with its own
stdout/stderr files, CPU affinity and, for the agent without RDMA, its own mount
namespace. The bench is run the same way, and so are the responder agents it starts
(``start_forked_agent``); the engine's workers are fresh interpreters.

Usage (in the guest): python tests/support/rxe_guest_cases.py OUT_DIR
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import re
import runpy
import secrets
import select
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from paths import REPO

START_S = 600.0  # a fresh netqual interpreter under TCG on a loaded host, generously
PROBE_S = 600.0  # one probe: the default plan at Soft-RoCE-under-TCG speed
LOW_MTU = 1000  # nqb's MTU for the MTU case: rxe1's active MTU drops to 512 (rxe0 stays 1024)
CLONE_NEWNS = 0x00020000
# Bytes per bulk cell (--bulk-bytes) for every probe here that reads: Soft-RoCE under TCG
# reads 3-16 MB/s, so the default 128 MiB a cell was most of this guest's time (the four
# cells below moved 512 MiB: 110 s of CI's guest lane). At 8 MiB each cell still reads at
# least 32 chunks (min_reads: the 1 MiB cells 32 MiB, the 64 KiB cells 128 reads), over
# real verbs, with every read checked against the session key.
BULK = ("--bulk-bytes", "8MiB")
# The cases with one 64 KiB cell that only need reads to happen over real verbs (the MTU
# case's at path MTU 512; the engine's cells next to the probe's): the fewest a cell takes,
# 32 chunks (min_reads), 2 MiB, where 8 MiB read 128.
ONE_CELL = ("--chunk", "64KiB", "--depth", "1", "--bulk-bytes", "2MiB")
# The default plan's ping-pong (10,000 kept + 1,000 warm-up) and depths (1, 8), with the
# 64 KiB and 1 MiB chunks only (the default's 8 MiB cells would read 32 x 8 MiB each) and
# BULK: 80 MiB in all. --timeout: the 120 s default is for real networks (600 s is the most
# an agent accepts by default).
DEFAULT_PLAN = ("--chunk", "64KiB", "--chunk", "1MiB", *BULK, "--timeout", "600")
# The bench's round trips per tool: its table side by side and both netqual loops on real
# QPs is what the test checks, never a figure (one round under TCG says nothing about
# speed: docs/performance.md). 2,000 took 30-50 s of spinning at load 12-15.
BENCH_ITERATIONS = 500
# rxe1 packets in before the responder is killed: past the killed probe's 100 warm-up
# round trips (one packet in each), well into its measured ones
KILLED_WARMUP = 100
MID_PROBE_PACKETS = 300

os.environ.update(
    {
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "NETQUAL_WIDTH": "100",
        "NETQUAL_AGENT_START_S": str(START_S),
        "OPENBLAS_NUM_THREADS": "1",
    }
)
sys.path.insert(0, str(REPO))


# The emulated machine runs Python 20-100x slower than a server, more when CI's other
# lanes (real-time lab agents among them) take the host's two cores: the agents' own
# timeouts for a handshake (5 s) and a silent session (120 s) get the same slack. Under
# CI's lanes mooncake's 8 ranks once lost their sessions to rxeB mid-probe ("connection
# closed by peer") in a step that took 186 s; --verbose logs each session's end
# (agent-*.stderr, printed by a failing test).
AGENT_SLACK = ("--auth-timeout", "60", "--idle-timeout", "900", "--verbose")


@dataclass(frozen=True)
class AgentSpec:
    name: str
    host: str
    port: int
    cpu: int | None
    args: tuple[str, ...]
    no_rdma: bool = False

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


A = AgentSpec("rxeA", "198.18.0.1", 18601, 0, ("--rdma-device", "rxe0"))
B = AgentSpec("rxeB", "198.18.0.2", 18602, 1, ("--rdma-device", "rxe1"))
# A node without RDMA: the same machine, but the agent's mount namespace hides every RDMA
# device (sysfs classes and /dev/infiniband), as on a host without an RDMA NIC.
PLAIN = AgentSpec("plain", "198.18.0.2", 18604, None, (), no_rdma=True)
# Two nodes with a NIC on each rail (docs/rails.md): their agents answer on every address.
RA = AgentSpec("railA", "0.0.0.0", 18611, 0, ())
RB = AgentSpec("railB", "0.0.0.0", 18612, 1, ())
RAILS_INVENTORY = """
[[node]]
name = "railA"
address = "198.18.0.1"
port = 18611
rack = "r1"
nics = [{ name = "nqa", address = "198.18.0.1", device = "rxe0", rail = 0 },
        { name = "nqc", address = "198.18.1.1", device = "rxe2", rail = 1 }]
[[node]]
name = "railB"
address = "198.18.0.2"
port = 18612
rack = "r1"
nics = [{ name = "nqb", address = "198.18.0.2", device = "rxe1", rail = 0 },
        { name = "nqd", address = "198.18.1.2", device = "rxe3", rail = 1 }]
"""
HIDDEN = ("/sys/class/infiniband", "/sys/class/infiniband_verbs", "/dev/infiniband")


def _hide_rdma() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    for path in HIDDEN:
        if Path(path).exists():
            subprocess.run(["mount", "-t", "tmpfs", "none", path], check=True)


class Proc:
    """One forked netqual process (``argv`` after ``netqual``, or a script path)."""

    def __init__(
        self,
        out: Path,
        case: str,
        argv: list[str],
        *,
        script: Path | None = None,
        cpu: int | None = None,
        no_rdma: bool = False,
        forked_agents: bool = False,
    ) -> None:
        self.case, self.argv = case, ([str(script)] if script else ["netqual"]) + argv
        self.stdout, self.stderr = out / f"{case}.stdout", out / f"{case}.stderr"
        self.start = time.monotonic()
        self.rc: int | None = None
        files = [
            os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            for p in (self.stdout, self.stderr)
        ]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            self.pid = pid
            for fd in files:
                os.close(fd)
            return
        code = 70
        try:
            os.dup2(files[0], 1)
            os.dup2(files[1], 2)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            if cpu is not None:  # the two spinning ends on different vCPUs
                os.sched_setaffinity(0, {cpu})
            if no_rdma:
                _hide_rdma()
            if forked_agents:
                from netqual.run import localagents

                localagents.start_agent = start_forked_agent  # type: ignore[assignment]
            sys.argv = list(self.argv)
            if script:
                runpy.run_path(str(script), run_name="__main__")
                code = 0
            else:
                from netqual.cli import main

                code = main(argv)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def poll(self) -> int | None:
        if self.rc is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.rc = os.waitstatus_to_exitcode(status)
        return self.rc

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; on timeout kill it. True when it ended on its own."""
        end = time.monotonic() + timeout_s
        while self.poll() is None:
            if time.monotonic() > end:
                self.kill()
                os.waitpid(self.pid, 0)
                self.rc = -9
                return False
            time.sleep(0.2)
        return True

    def record(self, timeout_s: float, **extra: object) -> dict[str, object]:
        ended = self.wait(timeout_s)
        return {
            "argv": self.argv,
            "rc": self.rc,
            "timed_out": not ended,
            "stdout": self.stdout.read_text(errors="replace"),
            "stderr": self.stderr.read_text(errors="replace"),
            "elapsed_s": round(time.monotonic() - self.start, 1),
            **extra,
        }


class ForkedAgent:
    """An agent forked from this process: what the bench and ``localagents.stop_agents``
    use of the ``subprocess.Popen`` that ``localagents.start_agent`` returns."""

    def __init__(self, pid: int, stdout: io.TextIOWrapper) -> None:
        self.pid, self.stdout = pid, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while (rc := self.poll()) is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"agent {self.pid}", timeout or 0.0)
            time.sleep(0.05)
        return rc


def start_forked_agent(
    name: str,
    token_file: Path,
    host: str = "127.0.0.1",
    timeout_s: float | None = None,
    extra_args: tuple[str, ...] = (),
    netns: str | None = None,
) -> tuple[ForkedAgent, int]:
    """``localagents.start_agent`` for the bench in this guest: the same ``netqual agent``
    command line (``cli.main``, with the environment the bench set for it: its device, and
    ``NETQUAL_RDMA_LOOP`` for the Python loop on both ends), forked from this process that
    has imported netqual instead of a fresh interpreter: each of the bench's two responders
    spent ~20 s of the guest's CPU importing netqual under TCG before it listened."""
    from netqual.run.localagents import _READY

    assert netns is None, "the guest has one network namespace"
    argv = ["agent", "--listen", f"{host}:0", "--name", name, "--token-file", str(token_file)]
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.close(read)
            os.dup2(write, 1)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            from netqual.cli import main as cli_main

            code = cli_main([*argv, *extra_args])
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(write)
    proc = ForkedAgent(pid, io.TextIOWrapper(io.FileIO(read, "r"), encoding="utf-8"))
    end = time.monotonic() + (timeout_s or START_S)
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        line = proc.stdout.readline() if ready else ""
        if not line:
            break
        if m := _READY.search(line):
            return proc, int(m.group(2))
    proc.kill()
    proc.wait()
    raise RuntimeError(f"agent {name} did not start within {timeout_s or START_S:g} s")


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout


def active_mtu(device: str) -> int | None:
    m = re.search(r"active_mtu:\s*(\d+)", sh("ibv_devinfo", "-d", device))
    return int(m.group(1)) if m else None


def received_packets(device: str) -> int:
    """RoCE packets ``device`` has received (rxe's hardware counter)."""
    path = Path(f"/sys/class/infiniband/{device}/ports/1/hw_counters/rcvd_pkts")
    return int(path.read_text())


class Cases:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.token = out / "guest.token"
        fd = os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        self.agents: dict[str, Proc] = {}

    def save(self, case: str, record: dict[str, object]) -> None:
        (self.out / f"{case}.json").write_text(json.dumps(record, indent=1))

    def run(
        self,
        case: str,
        argv: list[str],
        script: Path | None = None,
        cpu: int | None = None,
        no_rdma: bool = False,
        forked_agents: bool = False,
    ) -> Proc:
        return Proc(
            self.out, case, argv, script=script, cpu=cpu, no_rdma=no_rdma,
            forked_agents=forked_agents,
        )  # fmt: skip

    def start_agent(self, spec: AgentSpec) -> None:
        argv = ["agent", "--listen", spec.endpoint, "--name", spec.name]
        argv += ["--token-file", str(self.token), *AGENT_SLACK, *spec.args]
        self.agents[spec.name] = self.run(
            f"agent-{spec.name}", argv, cpu=spec.cpu, no_rdma=spec.no_rdma
        )

    def wait_agents(self, timeout_s: float) -> dict[str, float]:
        """Seconds until each agent listened; an agent that died or never did is absent."""
        ready: dict[str, float] = {}
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and len(ready) < len(self.agents):
            for name, proc in self.agents.items():
                if name not in ready and "listening on" in proc.stdout.read_text(errors="replace"):
                    ready[name] = round(time.monotonic() - proc.start, 1)
            if any(p.poll() is not None for n, p in self.agents.items() if n not in ready):
                break
            time.sleep(0.5)
        return ready

    def probe(self, case: str, src: AgentSpec, dst: AgentSpec, *extra: str) -> Proc:
        argv = ["probe", src.endpoint, dst.endpoint, "--transport", "rdma"]
        return self.run(case, [*argv, "--token-file", str(self.token), *extra])

    def stop(self) -> None:
        for proc in self.agents.values():
            proc.kill(signal.SIGTERM)
        for proc in self.agents.values():
            proc.wait(20)


def fanin_case(token_file: Path) -> dict[str, object]:
    """B as storage, A its one reader: the fan-in sweep with ``plain`` (whole-chunk READs)
    and ``mooncake`` (64 KiB slices over 2 QPs, 8 ranks); then one rank of ``mooncake``
    and of ``nixl`` (8 KiB slices, 64 outstanding) as probes, for the ``details.fetch``
    each ran with on the devices. Seconds per step in ``steps_s``."""
    from netqual.agent.probe_request import request_probe
    from netqual.base.auth import load_token
    from netqual.model.fanin import FaninConfig
    from netqual.model.node import Node, Role
    from netqual.results.fanin_codec import to_list
    from netqual.run.fanin import SweepContext, plan_for, sweep
    from netqual.transports import TransportKind, TransportOptions
    from netqual.transports.rdma import RdmaOptions

    nodes = [
        Node(A.name, A.host, A.port, role=Role.COMPUTE),
        Node(B.name, B.host, B.port, role=Role.STORAGE),
    ]
    # QP timeout 18 (1.07 s per try), as --rdma-qp-timeout 18: under TCG the emulated rxe
    # responder takes longer than the default 67 ms (14) to answer mooncake's ~1 MiB of
    # outstanding READs (8 ranks x 2 QPs); on an idle host the reader retried 87 times
    # (completer_retry_err; the responder saw 174 duplicate requests, no packet lost,
    # 34 MB on the wire for 21 MB of chunks), and in CI the retries ran out
    # (IBV_WC_RETRY_EXC_ERR). The run's options reach both ends, as run's flag does.
    slow = TransportOptions(rdma=RdmaOptions(qp_timeout=18))
    ctx = SweepContext(TransportKind.RDMA, load_token(token_file), slow, 2.0, 300.0)
    t0 = time.monotonic()
    out: dict[str, object] = {}
    steps: dict[str, float] = {}
    try:
        # mooncake's 8 ranks x 4 chunks of 256 KiB: 8 MiB. Soft-RoCE under TCG moves a few
        # hundred KB/s: 10 chunks (20 MiB) took 201 s of CI's guest lane, its longest step
        for name, chunk, chunks in (("plain", 64 << 10, 20), ("mooncake", 256 << 10, 4)):
            started = time.monotonic()
            out[name] = to_list(sweep(nodes, FaninConfig((1,), name, chunk, chunks), ctx))
            steps[name] = round(time.monotonic() - started, 1)
        for name, chunk in (("mooncake", 256 << 10), ("nixl", 64 << 10)):
            started = time.monotonic()
            plan = plan_for(FaninConfig((1,), name, chunk, 10), 300.0)
            raw = request_probe(
                nodes[0], nodes[1], ctx.transport, plan, ctx.token, 315.0, ctx.options
            ).raw
            peer = raw.details.get("peer")
            out[f"probe_{name}"] = {
                "fetch": raw.details.get("fetch"),
                "rd_atomic": raw.details.get("max_rd_atomic"),
                "qp_timeout": [  # what each end's QPs ran under
                    raw.details.get("qp_timeout"),
                    peer.get("qp_timeout") if isinstance(peer, dict) else None,
                ],
                "cells": [[b.chunk_bytes, len(b.completion_ns), b.error] for b in raw.bulk],
            }
            steps[f"probe_{name}"] = round(time.monotonic() - started, 1)
    except Exception as err:
        out["error"] = repr(err)
    return {**out, "steps_s": steps, "elapsed_s": round(time.monotonic() - t0, 1)}


# The commands the cases run: their modules are the one slow import, done once here and
# shared by every fork (the other ten, duckdb's campaign store and the labs among them, no
# case runs).
COMMANDS = ("agent", "doctor", "probe", "run")
# What more than one forked process imported on its own after the fork, under TCG seconds
# each: the agents' request handlers (rxeA, rxeB, railA and railB answer the pre-flight and
# probes; the doctor reads the same), the RDMA transport and pyverbs (doctor, four agents,
# the forged-echo script), and the codec a socket's host name goes through (every agent
# and probe). Importing pyverbs opens no device: the agent without RDMA still finds none in
# its own mount namespace.
PRELOAD = (
    "encodings.idna",
    "netqual.agent.doctor",
    "netqual.agent.engine_serve",
    "netqual.agent.fleet_snapshot",
    "netqual.agent.nicreport",
    "netqual.agent.pcisysfs",
    "netqual.agent.probe_request",
    "netqual.agent.reach",
    "netqual.codec.hostpath",
    "netqual.transports.rdma.transport",
)


def preload() -> None:
    import importlib

    from netqual.transports.rdma import verbs

    for name in PRELOAD:
        importlib.import_module(name)
    with contextlib.suppress(Exception):  # without pyverbs each process says so itself
        verbs.load()


def main() -> int:
    t0 = time.monotonic()
    from netqual.cli import main as cli_main
    from netqual.cli import register

    for command in COMMANDS:
        register([command])
    preload()
    # ... and what each command line builds before it runs: the click command tree and
    # typer's parameter conversion (pydantic, imported on the first parse). A child built
    # and imported them again: about 4 s of every forked netqual process under TCG (a
    # probe's profile), 13 of them.
    with contextlib.redirect_stdout(io.StringIO()):
        cli_main(["probe", "--help"])

    cases = Cases(Path(sys.argv[1]))
    imported_s = round(time.monotonic() - t0, 1)
    # The probes whose ping-pong nothing judges but that it ran over the devices it should
    # (rails: each rail's path on its NICs' devices; MTU, engine: the bulk cell; wrong GID
    # index, no RDMA: they fail before it): 200 round trips, where 2,000 spun both vCPUs
    # for tens of seconds (the rails' two paths at once: 22 s at load 12)
    small = ["--iterations", "200", "--warmup", "20"]
    try:
        # 1. doctor and every agent at once.
        doctor = cases.run("doctor", ["doctor"])
        for spec in (A, B, PLAIN, RA, RB):
            cases.start_agent(spec)
        ready = cases.wait_agents(START_S)
        wanted = [A.name, B.name, PLAIN.name, RA.name, RB.name]
        cases.save("agents", {"ready_s": ready, "wanted": wanted})
        cases.save("doctor", doctor.record(START_S))
        if len(ready) < len(wanted):
            return 2
        # 2. the default plan, alone on the two vCPUs: A initiates, B responds.
        default = cases.probe("probe_default", A, B, *DEFAULT_PLAN, "--json")
        cases.save("probe_default", default.record(PROBE_S + 60))
        # 3. the quick failures together.
        gid = cases.probe("gid_index", A, B, *small, "--no-bulk", "--gid-index", "7")
        no_rdma = cases.probe("no_rdma", A, PLAIN, *small, "--no-bulk")
        cases.save("gid_index", gid.record(PROBE_S))
        cases.save("no_rdma", no_rdma.record(PROBE_S))
        # 3b. the fan-in sweep over real verbs (docs/fanin.md), in this process (no Python
        # start): B as storage, A its one reader; plain and mooncake, and nixl's probe.
        cases.save("fanin_rdma", fanin_case(cases.token))
        # 3b'. Mooncake's Transfer Engine over the same verbs (docs/engines.md): required
        # to use RDMA, with each agent's own --rdma-device as its device filter.
        engine = cases.probe(
            "engine_mooncake", A, B, *small, *ONE_CELL, "--timeout", "600",
            "--engine", "mooncake", "--engine-require", "rdma", "--json",
        )  # fmt: skip
        cases.save("engine_mooncake", engine.record(START_S + PROBE_S))
        # 3c. forged and replayed echoes against the session-key check, both loops.
        forged = cases.run(
            "forged_echo", [], script=REPO / "tests" / "support" / "rxe_forged_echo.py"
        )
        cases.save("forged_echo", forged.record(PROBE_S))
        # 3d. a run NIC to NIC over both rails (docs/rails.md): rail 0 on rxe0 <-> rxe1,
        # rail 1 on rxe2 <-> rxe3, each end opening the device its inventory NIC names.
        # Ping-pong only: a bulk cell of 128 MiB a path made the step 57 s instead of 31 s
        # at one load, and a probe reads over the QP its ping-pong used (probe_default, mtu
        # and forged_echo read over real verbs).
        inventory = cases.out / "rails.toml"
        inventory.write_text(RAILS_INVENTORY)
        rails = cases.run(
            "rails",
            ["run", str(inventory), "--transport", "rdma", "--rails", "same",
             "--out", str(cases.out / "rails-run"), "--token-file", str(cases.token), *small,
             "--no-bulk", "--timeout", "600", "--allow-short-plan",
             "--interference-sample", "0",
             # the pre-flight's requests take seconds each under TCG
             "--check-timeout", "300"],
        )  # fmt: skip
        cases.save("rails", rails.record(PROBE_S))
        # 4. perftest and netqual side by side on rxe0 (loopback; a responder agent for each
        # loop, forked: start_forked_agent).
        bench_argv = ["--iterations", str(BENCH_ITERATIONS)]
        bench = cases.run(
            "bench", bench_argv, script=REPO / "bench" / "rdma_vs_perftest", forked_agents=True
        )
        cases.save("bench", bench.record(START_S + PROBE_S))
        # 5. rxe1's netdev MTU lowered: the path MTU must follow the lower end.
        sh("ip", "link", "set", "nqb", "mtu", str(LOW_MTU))
        mtus = {"rxe0": active_mtu("rxe0"), "rxe1": active_mtu("rxe1")}
        mtu = cases.probe("mtu", A, B, *small, *ONE_CELL, "--json")
        cases.save("mtu", mtu.record(PROBE_S, active_mtu_bytes=mtus))
        # 6. the responder dies mid-probe: a ping-pong far longer than the test runs.
        before = received_packets("rxe1")
        killed = cases.probe(
            "responder_killed",
            A,
            B,
            *("--iterations", "990000", "--warmup", str(KILLED_WARMUP), "--no-bulk"),
            *("--timeout", "300", "--json"),
        )
        # Mid-probe: rxe1 has received the warm-up's writes and more (each round trip
        # is one packet in), so both QPs are in RTS and the ping-pong is running.
        connected = False
        while killed.poll() is None and time.monotonic() - killed.start < PROBE_S:
            if received_packets("rxe1") - before > MID_PROBE_PACKETS:
                connected = True
                break
            time.sleep(0.5)
        cases.agents[B.name].kill()
        killed_at_s = round(time.monotonic() - killed.start, 1)
        cases.save(
            "responder_killed",
            killed.record(PROBE_S, pingpong_running=connected, killed_at_s=killed_at_s),
        )
        return 0
    finally:
        cases.stop()
        cases.save("total", {"elapsed_s": round(time.monotonic() - t0, 1), "import_s": imported_s})


if __name__ == "__main__":
    sys.exit(main())
