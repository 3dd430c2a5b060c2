#!/usr/bin/env python3
"""netqual's RDMA ping-pong next to perftest's ib_write_lat and ib_read_lat, on one device.

Runs, on the same device and port (loopback: server and client on this host):
  ib_write_lat  -> prints HALF the round trip (write ping-pong, polls the last byte)
  ib_read_lat   -> prints the FULL round trip of one RDMA READ
  netqual       -> full round trip of its write ping-pong, timed at the initiator by the
                   loop netqual uses (the compiled one, hotloop.c, where it is built)
  netqual-python -> the same with NETQUAL_RDMA_LOOP=python (the pyverbs fallback loop)
and prints p50 / p99 of each as a full RTT, and netqual's ratio to each; then, per netqual
loop, its ratio to 2 x ib_write_lat at p50 (target <= 1.2) and the initiator thread's user
and system CPU time per round trip (both ends busy-poll, as perftest does).

Usage: bench/rdma_vs_perftest [--device mlx5_0] [--port 1] [--gid-index 3] [--iterations N]
                              [--rounds R]
With --rounds R > 1 each round runs all four (order reversed every other round) and the
table shows medians over rounds; the ratio lines are medians of per-round ratios.
Without an RDMA device it says so and exits 1.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from netqual.base.errors import NetqualError
from netqual.transports.rdma import RdmaOptions, devices, hotloop, verbs
from netqual.transports.rdma.gid import Family, GidType, LinkLayer
from netqual.transports.rdma.transport import RdmaTransport


@dataclass(frozen=True)
class Latency:
    tool: str
    measures: str
    p50_us: float  # as printed by the tool
    p99_us: float
    full_rtt_factor: float  # multiply by this to get a full round trip

    @property
    def rtt_p50_us(self) -> float:
        return self.p50_us * self.full_rtt_factor

    @property
    def rtt_p99_us(self) -> float:
        return self.p99_us * self.full_rtt_factor


def parse_perftest(text: str) -> tuple[float, float]:
    """(t_typical, 99% percentile) in microseconds from a perftest latency report."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "t_typical" in line:
            for data in lines[i + 1 :]:
                fields = data.split()
                if len(fields) >= 8 and fields[0].isdigit():
                    return float(fields[4]), float(fields[7])
    raise ValueError("no latency table in perftest output")


# --pin A,B: the initiating end (perftest client, netqual initiator) on CPU A, the
# responding end (perftest server, netqual's responder agent) on CPU B, for every tool.
PIN: list[tuple[int, int]] = []


def _pin(pid: int, side: int) -> None:
    """Pin a just-started process to the initiating (0) or responding (1) end's CPU."""
    if PIN:
        os.sched_setaffinity(pid, {PIN[0][side]})


PERFTEST_TCP_PORT = 18_600  # perftest's exchange port; its default 18515 is netqual's agent port


def _listening(port: int) -> bool:
    """Whether some socket listens on TCP ``port`` (/proc/net/tcp*: state 0A). Probing with
    connect() would use up the perftest server's one accept."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def run_perftest(
    tool: str, device: str, port: int, gid: int | None, host: str, iters: int, size: int
) -> str:
    args = [tool, "-d", device, "-i", str(port), "-s", str(size), "-n", str(iters), "-F"]
    args += ["-p", str(PERFTEST_TCP_PORT)]
    if gid is not None:
        args += ["-x", str(gid)]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _pin(server.pid, 1)
    try:
        # Let the server listen on its TCP exchange port (slow to start under emulation).
        end = time.monotonic() + 60
        while not _listening(PERFTEST_TCP_PORT) and time.monotonic() < end:
            if server.poll() is not None:
                out = server.stdout.read() if server.stdout else ""
                raise RuntimeError(f"{tool} server exited: {out[-800:]}")
            time.sleep(0.1)
        client_proc = subprocess.Popen(
            [*args, host], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        _pin(client_proc.pid, 0)
        try:
            out, err = client_proc.communicate(timeout=120)
        finally:
            if client_proc.poll() is None:
                client_proc.kill()
                client_proc.wait()
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    if client_proc.returncode != 0:
        raise RuntimeError(f"{tool} failed: {out[-800:]}{err[-800:]}")
    return out


def measure_perftest(
    tool: str, device: str, port: int, gid: int | None, host: str, iters: int, size: int
) -> tuple[float, float]:
    """perftest's (p50, p99). It times in CPU cycles and calibrates cycles against the clock
    first; on a starved (emulated, loaded) CPU that calibration can fail and every number
    comes out ``inf``: run it again, up to three times."""
    for _ in range(3):
        p50, p99 = parse_perftest(run_perftest(tool, device, port, gid, host, iters, size))
        if math.isfinite(p50) and math.isfinite(p99):
            return p50, p99
    raise RuntimeError(f"{tool} printed no finite latency in three runs (clock calibration?)")


def pick_port(options: RdmaOptions) -> tuple[str, int, int | None, str]:
    """Device, port, GID index for perftest, and the address to run the exchange over."""
    found = devices.scan(verbs.load())
    for dev in found:
        if options.device and dev.name != options.device:
            continue
        for port in dev.ports:
            if not port.active or (options.port and port.num != options.port):
                continue
            if port.link_layer is LinkLayer.INFINIBAND:
                return dev.name, port.num, None, "127.0.0.1"
            for gid in port.gids:
                if options.gid_index is not None and gid.index != options.gid_index:
                    continue
                if gid.gid_type is GidType.ROCE_V2 and gid.family is Family.IPV4:
                    return dev.name, port.num, gid.index, str(gid.ip)
    raise SystemExit("no ACTIVE port with a RoCE v2 IPv4 GID or an InfiniBand LID")


def run_netqual(
    options: RdmaOptions, host: str, iters: int, size: int, loop: str | None
) -> tuple[np.ndarray, dict[str, Any]]:
    """One probe through a fresh responder agent; ``loop`` "python" forces the Python loop
    on both ends (the agent inherits the environment)."""
    saved = os.environ.get(hotloop.LOOP_ENV)
    os.environ[hotloop.LOOP_ENV] = loop or ""
    try:
        return _run_netqual(options, host, iters, size)
    finally:
        if saved is None:
            os.environ.pop(hotloop.LOOP_ENV, None)
        else:
            os.environ[hotloop.LOOP_ENV] = saved


def _run_netqual(
    options: RdmaOptions, host: str, iters: int, size: int
) -> tuple[np.ndarray, dict[str, Any]]:
    from netqual.agent.wire.protocol import connect
    from netqual.base.auth import load_token, write_token
    from netqual.model.plan import ProbePlan
    from netqual.run.localagents import start_agent, stop_agents

    env = {
        "NETQUAL_RDMA_DEVICE": options.device or "",
        "NETQUAL_RDMA_PORT": str(options.port or ""),
    }
    if options.gid_index is not None:
        env["NETQUAL_RDMA_GID_INDEX"] = str(options.gid_index)
    os.environ.update(env)  # the responder agent inherits them
    with tempfile.TemporaryDirectory() as tmp:
        token_file = Path(tmp) / "token"
        write_token(token_file)
        proc, agent_port = start_agent("bench-responder", token_file, host)
        mine = os.sched_getaffinity(0)
        _pin(proc.pid, 1)  # its session threads, made later, inherit its main thread's mask
        _pin(0, 0)
        try:
            ch, _ = connect(host, agent_port, load_token(token_file), peer="bench-responder")
            with ch:
                raw = RdmaTransport(options=options, node_name="bench").initiate(
                    ch,
                    ProbePlan(
                        iterations=iters, warmup=min(1000, iters), size_bytes=size, bulk=False
                    ),
                    time.monotonic() + 300,
                    host,
                )
        finally:
            os.sched_setaffinity(0, mine)
            stop_agents([proc])
    return raw.rtt_ns, dict(raw.details)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device")
    ap.add_argument("--port", type=int)
    ap.add_argument("--gid-index", type=int)
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument(
        "--rounds", type=int, default=1, help="repeat all four, order flipped every round"
    )
    ap.add_argument("--pin", metavar="A,B", help="initiating end on CPU A, responding on B")
    args = ap.parse_args()
    if args.pin:
        a, b = (int(c) for c in args.pin.split(","))
        PIN.append((a, b))
    try:
        RdmaTransport().check_available()
    except NetqualError as err:
        print(f"rdma_vs_perftest needs an RDMA device and pyverbs: {err}", file=sys.stderr)
        return 1
    device, port, gid, host = pick_port(RdmaOptions(args.device, args.port, args.gid_index))
    options = RdmaOptions(device, port, gid)
    print(
        f"device {device} port {port} gid index {gid} via {host}; {args.iterations} x {args.size} B"
    )
    per_round = [
        one_round(options, device, port, gid, host, args.iterations, args.size, flip=r % 2 == 1)
        for r in range(args.rounds)
    ]
    if args.rounds > 1:
        for r, results in enumerate(per_round, 1):
            ratio = results[2][0].rtt_p50_us / results[0][0].rtt_p50_us
            print(
                f"round {r}: RTT p50 us "
                + ", ".join(f"{m.tool} {m.rtt_p50_us:.2f}" for m, _ in results)
                + f"; netqual / 2 x ib_write_lat {ratio:.2f}"
            )
        print(f"medians over {args.rounds} rounds:")
    rows = [_median_row([rnd[i] for rnd in per_round]) for i in range(len(per_round[0]))]
    print(
        f"{'tool':14} {'measures':36} {'p50 us':>8} {'p99 us':>8} {'RTT p50':>8} "
        f"{'RTT p99':>8} {'netqual/tool p50':>17}"
    )
    first = rows[2][0]
    for row, _ in rows:
        ratio = first.rtt_p50_us / row.rtt_p50_us if row.rtt_p50_us else float("nan")
        print(
            f"{row.tool:14} {row.measures:36} {row.p50_us:8.2f} {row.p99_us:8.2f} "
            f"{row.rtt_p50_us:8.2f} {row.rtt_p99_us:8.2f} {ratio:17.2f}"
        )
    for i in (2, 3):
        measured, details = rows[i]
        ratios = [rnd[i][0].rtt_p50_us / rnd[0][0].rtt_p50_us for rnd in per_round]
        print(
            f"{measured.tool}: p50 {float(np.median(ratios)):.2f} x 2 x ib_write_lat (median of "
            f"per-round ratios); mean RTT {details['rtt_mean_us']:.2f} us; CPU per round "
            f"trip: user {details['pingpong_user_cpu_ns_per_round'] / 1e3:.2f} us, system "
            f"{details['pingpong_sys_cpu_ns_per_round'] / 1e3:.2f} us; loop: "
            f"{details['pingpong_loop']}; responder loop: {details['peer_loop']}"
        )
    return 0


Measured = tuple[Latency, dict[str, Any]]


def one_round(
    options: RdmaOptions,
    device: str,
    port: int,
    gid: int | None,
    host: str,
    iters: int,
    size: int,
    *,
    flip: bool,
) -> list[Measured]:
    """ib_write_lat, ib_read_lat, netqual (its own loop), netqual-python: always in that
    order in the result; run in reverse order when ``flip`` (alternate rounds)."""
    jobs = ["ib_write_lat", "ib_read_lat", "netqual", "netqual-python"]
    done: dict[str, Measured] = {}
    for tool in reversed(jobs) if flip else jobs:
        if tool.startswith("ib_"):
            factor, what = (
                (2.0, "half RTT (write ping-pong)")
                if tool == "ib_write_lat"
                else (1.0, "full RTT (one RDMA READ)")
            )
            p50, p99 = measure_perftest(tool, device, port, gid, host, iters, size)
            done[tool] = (Latency(tool, what, p50, p99, full_rtt_factor=factor), {})
            continue
        loop = "python" if tool == "netqual-python" else None
        rtt_ns, details = run_netqual(options, host, iters, size, loop)
        rtt_us = rtt_ns / 1e3
        kind = str(details.get("pingpong_loop", "?")).split(" ", 1)[0]
        summary = {
            "rtt_mean_us": float(np.mean(rtt_us)),
            "pingpong_user_cpu_ns_per_round": details.get("pingpong_user_cpu_ns_per_round", 0),
            "pingpong_sys_cpu_ns_per_round": details.get("pingpong_sys_cpu_ns_per_round", 0),
            "pingpong_loop": details.get("pingpong_loop", "?"),
            "peer_loop": details.get("peer", {}).get("pingpong_loop", "?"),
        }
        measured = Latency(
            tool,
            f"full RTT (write ping-pong, {kind})",
            float(np.percentile(rtt_us, 50)),
            float(np.percentile(rtt_us, 99)),
            1.0,
        )
        done[tool] = (measured, summary)
    return [done[tool] for tool in jobs]


def _median_row(values: list[Measured]) -> Measured:
    """Per tool, the median over rounds of its p50, p99 and CPU figures."""
    first, summary = values[0]
    med = Latency(
        first.tool,
        first.measures,
        float(np.median([m.p50_us for m, _ in values])),
        float(np.median([m.p99_us for m, _ in values])),
        first.full_rtt_factor,
    )
    out = dict(summary)
    for key in ("rtt_mean_us", "pingpong_user_cpu_ns_per_round", "pingpong_sys_cpu_ns_per_round"):
        if key in summary:
            out[key] = float(np.median([d[key] for _, d in values]))
    return med, out


if __name__ == "__main__":
    sys.exit(main())
