#!/usr/bin/env python3
"""Simulated agents: many lightweight asyncio servers in one process that speak the real
control protocol (framing, the token handshake, MAC'd frames:
netqual.agent.wire.protocol and netqual.agent.wire.handshake) and answer ``info``,
``snapshot`` and ``probe`` like an agent, with synthetic samples after a modelled delay and
one synthetic configuration snapshot (``sim_snapshot``) instead of measuring.
The real coordinator runs against them, so what this exercises is the coordinator:
scheduling, connections, threads, results files, resume. Nothing here measures a network;
netqual never uses it outside bench/ and tests.

Each agent listens on its own loopback address (127.0.x.y, ``address``) so the scheduler
sees one host per agent, as on a cluster.

    PYTHONPATH=$PWD python3 bench/simagents.py --agents 1024 --out DIR [--delay-ms 1]
        [--kill-after S] [--limit-s S]

runs ``netqual run`` (the CLI, a child process) over them: full mesh, bulk on, a tiny plan;
``--kill-after S`` sends SIGKILL to the coordinator after S seconds and resumes with
``--resume``. The coordinator runs from a copy of the package taken at the start
(``freeze``: netqual/ with the report's templates), so a run of an hour or more is not
changed under it when the checkout moves. Prints wall time, modelled probe time,
coordinator overhead per pair, peak RSS, threads and file descriptors (sampled from /proc),
results.jsonl growth, the load average, and whether every pair is in results.json exactly
once; exit 0 only if so and the last run exited 0.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

import netqual
from netqual import __version__
from netqual.agent.wire.handshake import PROTOCOL_VERSION, ServerHandshake, SessionKeys
from netqual.agent.wire.protocol import (
    FRAME_BYTES,
    FRAME_JSON,
    HEADER,
    MAGIC,
    TAG_BYTES,
    check_header,
    decode_message,
    encode_message,
)
from netqual.base.auth import load_token, write_token
from netqual.codec.plan import plan_from_dict
from netqual.model.fleet import FLEET_KEYS, UNKNOWN
from netqual.report.html import templates_dir
from netqual.transports import AgentLimits

SEQ = struct.Struct("!Q")


def address(i: int) -> str:
    return f"127.{10 + i // 62500}.{i // 250 % 250}.{1 + i % 250}"


def _tag(key: bytes, seq: int, header: bytes, payload: bytes) -> bytes:
    # The frame tag of netqual.agent.wire.protocol: HMAC-SHA256 over sequence | header | payload.
    mac = hmac.new(key, SEQ.pack(seq), hashlib.sha256)
    mac.update(header)
    mac.update(payload)
    return mac.digest()


class _Frames:
    """One session's framing on asyncio streams, with the session keys once agreed."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.keys: SessionKeys | None = None
        self.sent = self.received = 0

    def send(self, frame_type: int, payload: bytes) -> None:
        header = HEADER.pack(MAGIC, PROTOCOL_VERSION, frame_type, len(payload))
        tag = b""
        if self.keys is not None:
            tag = _tag(self.keys.send, self.sent, header, payload)
            self.sent += 1
        self.writer.write(header + payload + tag)

    def message(self, kind: str, body: dict[str, Any]) -> None:
        self.send(FRAME_JSON, encode_message(kind, body))

    async def recv(self, peer: str) -> tuple[str, dict[str, Any]]:
        header = await self.reader.readexactly(HEADER.size)
        frame_type, length = check_header(header, 1 << 20, peer)
        payload = await self.reader.readexactly(length)
        if self.keys is not None:
            tag = await self.reader.readexactly(TAG_BYTES)
            if not hmac.compare_digest(tag, _tag(self.keys.recv, self.received, header, payload)):
                raise ConnectionError("frame failed its integrity check")
            self.received += 1
        if frame_type != FRAME_JSON:
            raise ConnectionError("expected a message frame")
        msg = decode_message(payload, peer)
        return msg.kind, msg.body


def sim_snapshot() -> dict[str, str]:
    """A well-formed configuration snapshot, the same on every simulated agent (no outlier):
    every fleet key, one up NIC and one active RoCE port, values that say 'sim' where a host
    would show its own. Nothing in it was read from a host."""
    values = {key: UNKNOWN for key in FLEET_KEYS}
    values |= {"kernel": "sim", "os": "simulated", "netqual": __version__, "mtu": "9000"}
    values |= {"link_speed_mbps": "100000", "driver": "sim", "roce_mtu": "4096"}
    values |= {"roce_gid_type": "RoCE v2", "gid_index": "3", "tcp_congestion_control": "cubic"}
    nic, port = "nic.sim0", "rdma.sim_0/1"
    values |= {f"{nic}.mtu": "9000", f"{nic}.operstate": "up", f"{nic}.speed_mbps": "100000"}
    values |= {f"{port}.state": "ACTIVE", f"{port}.active_mtu": "4096"}
    values |= {f"{port}.gid.3": "RoCE v2 IPv4 sim0", f"{port}.gid_index": "3"}
    return values


class SimAgents:
    """``count`` simulated agents a0000.. on their own loopback addresses, served by one
    asyncio loop in a background thread; ``delay_s`` models each probe phase's duration."""

    def __init__(
        self, count: int, token: bytes | None, delay_s: float = 0.001, seed: int = 1
    ) -> None:
        self.count, self.token, self.delay_s = count, token, delay_s
        self.rng = np.random.default_rng(seed)
        self.ports: list[int] = []
        self.probes = 0
        self.sessions = 0  # authenticated sessions (the coordinator reuses them)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def name(self, i: int) -> str:
        return f"a{i:04d}"

    def start(self, timeout_s: float = 60.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError("simulated agents did not start")

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def inventory(self, path: Path, token_file: Path, rack_size: int = 32) -> Path:
        lines = ["[defaults]", f'token_file = "{token_file}"', ""]
        for i, port in enumerate(self.ports):
            lines += ["[[node]]", f'name = "{self.name(i)}"', f'address = "{address(i)}"']
            lines += [f"port = {port}", f'rack = "r{i // rack_size:03d}"', ""]
        path.write_text("\n".join(lines))
        return path

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        servers = []
        for i in range(self.count):

            async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter, i: int = i) -> None:
                await self._session(r, w, self.name(i))

            server = await asyncio.start_server(handle, address(i), 0, backlog=64)
            servers.append(server)
            self.ports.append(server.sockets[0].getsockname()[1])
        self._ready.set()
        await self._stop.wait()
        for s in servers:
            s.close()
        # sessions still open (a coordinator killed, or one that keeps sessions) end here
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _session(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, name: str) -> None:
        f, peer = _Frames(r, w), name
        try:
            hs = ServerHandshake(self.token, name, __version__)
            f.message("hello", hs.hello.to_body())
            kind, body = await asyncio.wait_for(f.recv(peer), 10)
            welcome, keys = hs.answer(kind, body, peer)
            f.message("welcome", welcome)
            f.keys = keys
            self.sessions += 1
            while True:
                kind, body = await asyncio.wait_for(f.recv(peer), 60)
                if kind == "bye":
                    break
                if kind == "info":
                    f.message(
                        "info",
                        {
                            "name": name,
                            "version": __version__,
                            "pid": os.getpid(),
                            "host": "sim",
                            "transports": ["tcp"],
                            "limits": asdict(AgentLimits()),
                            "time_ns": time.time_ns(),
                        },
                    )
                elif kind == "snapshot":  # the run's fleet check (docs/evidence.md)
                    f.message("snapshot", {"values": sim_snapshot()})
                elif kind == "probe":
                    await self._probe(f, name, body)
                else:
                    f.message("error", {"code": "bad-request", "message": f"unknown {kind[:40]!r}"})
                await w.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, Exception):
            pass  # a simulated agent drops a broken session, as the real one does
        finally:
            w.close()

    async def _probe(self, f: _Frames, name: str, body: dict[str, Any]) -> None:
        """Synthetic result after the modelled delay: RTT samples around 20 us, bulk cells
        at a modelled 80 Gbit/s."""
        plan = plan_from_dict(body.get("plan", {}))
        self.probes += 1
        await asyncio.sleep(self.delay_s)
        rtt = (20_000 + self.rng.integers(0, 5_000, plan.iterations)).astype("<i8")
        cells, frames = [], [rtt.tobytes()]
        if plan.bulk:
            for chunk in plan.chunks_bytes:
                for depth in plan.depths:
                    reads = plan.reads_for(chunk)
                    each_ns = int(chunk * 8 / 80.0) + 10_000
                    completion = np.full(reads, each_ns, dtype="<i8")
                    cells.append(
                        {
                            "chunk_bytes": chunk,
                            "depth": depth,
                            "reads": reads,
                            "elapsed_ns": each_ns * reads // depth,
                            "error": None,
                        }
                    )
                    frames.append(completion.tobytes())
        f.message(
            "probe.result",
            {
                "responder_agent": str(body.get("peer", {}).get("name")),
                "warmup_discarded": plan.warmup,
                "rtt_count": plan.iterations,
                "hops": 2,
                "forward_hops": 2,
                "bulk": cells,
                "details": {"simulated": True, "initiator_agent": name},
            },
        )
        for data in frames:
            f.send(FRAME_BYTES, data)


@contextmanager
def simulated(count: int, work: Path, delay_s: float = 0.001) -> Iterator[tuple[SimAgents, Path]]:
    """Started agents and their inventory (token in ``work``); stopped on exit."""
    token_file = work / "token"
    write_token(token_file)
    agents = SimAgents(count, load_token(token_file), delay_s)
    agents.start()
    try:
        yield agents, agents.inventory(work / "inventory.toml", token_file)
    finally:
        agents.stop()


def proc_figures(pid: int) -> tuple[int, int, int, int]:
    """(VmHWM KiB, VmRSS KiB, threads, open fds) of a live process; zeros once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0, 0, 0, 0
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if "VmHWM" not in fields:
        return 0, 0, 0, 0
    hwm, rss = (int(fields[k].split()[0]) for k in ("VmHWM", "VmRSS"))
    return hwm, rss, int(fields["Threads"]), fds


RUN_ARGS = [
    "--iterations",
    "20",
    "--warmup",
    "0",
    "--chunk",
    "64KiB",
    "--depth",
    "1",
    "--allow-short-plan",
    "--interference-sample",
    "8",
]


def freeze(dest: Path) -> Path:
    """A copy of the running package for the coordinator child: ``dest/netqual`` with the
    report's templates inside it, where an installed wheel has them (``templates_dir``
    looks there first). A copy of netqual/ alone once ran 4,000 s, wrote results.json, then
    failed the HTML report for want of templates (exit 1). Checked before any run starts:
    the copy must import from ``dest`` and find every template. Returns ``dest`` (the
    child's PYTHONPATH)."""
    package = Path(netqual.__file__).resolve().parent
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package, dest / "netqual", ignore=ignore)
    shutil.copytree(templates_dir(), dest / "netqual" / "templates", dirs_exist_ok=True)
    probe = (
        "import sys; from netqual.report.html import environment, templates_dir; "
        "print(templates_dir()); [environment().get_template(t) for t in sys.argv[1:]]"
    )
    wanted = sorted(p.name for p in templates_dir().glob("*.j2"))
    found = subprocess.run(
        [sys.executable, "-c", probe, *wanted],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(dest)},
        cwd=dest,  # python -c / -m put the working directory first on sys.path
        check=False,
    )
    where = Path(found.stdout.strip() or "?")
    if found.returncode != 0 or not where.is_relative_to(dest):
        raise RuntimeError(f"frozen package in {dest} is incomplete: {found.stderr[-500:]}")
    return dest


class _LineCounter:
    """Lines of a growing file, reading only what was appended since the last call: reading
    the whole results.jsonl (800 MB at 1,024 agents) every 0.2 s held the GIL long enough
    to stall the simulated agents' event loop in this process past the coordinator's 10 s
    handshake timeout (one round of 512 pairs failed 'unreachable' that way)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.count = path, 0, 0

    def lines(self) -> int:
        if self.path.exists():
            if self.path.stat().st_size < self.offset:  # rewritten (--resume dedups the file)
                self.offset = self.count = 0
            with self.path.open("rb") as f:
                f.seek(self.offset)
                while chunk := f.read(1 << 20):
                    self.count += chunk.count(b"\n")
                    self.offset += len(chunk)
        return self.count


def coordinator(
    inventory: Path,
    out: Path,
    resume: bool,
    kill_after: float | None,
    limit_s: float,
    kill_at_lines: int | None = None,
    extra: tuple[str, ...] = (),
    package: Path | None = None,
) -> dict[str, Any]:
    """One ``netqual run`` over the simulated agents, watched from /proc every 0.5 s;
    SIGKILL after ``kill_after`` s, at ``kill_at_lines`` lines of results.jsonl, or at
    ``limit_s``. ``package``: run the coordinator from this copy (``freeze``)."""
    inventory, out = inventory.resolve(), out.resolve()
    cmd = [sys.executable, "-m", "netqual", "run", str(inventory), "--out", str(out), *RUN_ARGS]
    cmd += [*extra, *(["--resume"] if resume else [])]
    jsonl = out / "results.jsonl"
    counter = _LineCounter(jsonl)
    lines_before = counter.lines()
    # CPU of the coordinator alone (the agents are threads of this process): the children's
    # rusage grows by the coordinator's once it is reaped.
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "NETQUAL_WIDTH": "100",
            **({"PYTHONPATH": str(package)} if package is not None else {}),
        },
        cwd=package,  # -m puts the working directory first on sys.path: not the checkout
    )
    peak = {"rss_kib": 0, "threads": 0, "fds": 0}
    # (s, lines in results.jsonl, threads, fds, RSS MiB)
    samples: list[tuple[float, int, int, int, int]] = []
    killed = False
    while proc.poll() is None:
        elapsed = time.perf_counter() - t0
        hwm, rss, th, fds = proc_figures(proc.pid)
        peak = {
            "rss_kib": max(peak["rss_kib"], hwm),
            "threads": max(peak["threads"], th),
            "fds": max(peak["fds"], fds),
        }
        lines = counter.lines()
        samples.append((round(elapsed, 1), lines, th, fds, rss // 1024))
        due = kill_after is not None and elapsed > kill_after
        due = due or (kill_at_lines is not None and lines >= kill_at_lines)
        if due or elapsed > limit_s:
            proc.send_signal(signal.SIGKILL)
            killed = True
            proc.wait()
            break
        time.sleep(0.2 if kill_at_lines is not None else 0.5)
    stderr = proc.stderr.read() if proc.stderr else ""
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    return {
        "cpu_s": cpu_s,
        "pairs_written": counter.lines() - lines_before,
        "wall_s": time.perf_counter() - t0,
        "rc": proc.returncode,
        "killed": killed,
        **peak,
        "samples": samples,
        "stderr": stderr[-1500:],
    }


def check_once(out: Path, pairs: int) -> tuple[bool, int, int]:
    """(every pair exactly once in results.json and results.jsonl, paths, finished pairs in
    results.jsonl)."""
    doc = json.loads((out / "results.json").read_text())
    keys = [(p["src"], p["dst"]) for p in doc["paths"]]
    lines = [ln for ln in (out / "results.jsonl").read_text().splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]
    # finished pairs are bare path objects; a pair's ping-pong record (before its bulk
    # phase) and the interference check's records are other kinds (docs/results.md)
    jl = [(r["src"], r["dst"]) for r in records if "record" not in r]
    pp = [(r["path"]["src"], r["path"]["dst"]) for r in records if r.get("record") == "pingpong"]
    once = len(keys) == len(set(keys)) == pairs and len(jl) == len(set(jl)) == pairs
    once = once and len(pp) == len(set(pp))  # no ping-pong measured twice
    return once, len(keys), len(jl)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--delay-ms", type=float, default=1.0, help="modelled time of one probe phase")
    ap.add_argument(
        "--kill-after", type=float, default=None, help="SIGKILL the coordinator, then --resume"
    )
    ap.add_argument(
        "--kill-at-lines",
        type=int,
        default=None,
        help="SIGKILL the coordinator once results.jsonl has this many lines",
    )
    ap.add_argument(
        "--limit-s", type=float, default=3600.0, help="stop (SIGKILL) any run after this"
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--run-arg", action="append", default=[], help="extra `netqual run` argument")
    args = ap.parse_args()
    n, pairs = args.agents, args.agents * (args.agents - 1) // 2
    work = Path(tempfile.mkdtemp(prefix="netqual-sim-"))
    out = args.out or work / "run"
    package = freeze(work / "package")
    print(f"coordinator runs from {package}/netqual (a copy with its templates)", flush=True)
    load_before = os.getloadavg()
    extra = tuple(args.run_arg)
    with simulated(n, work, args.delay_ms / 1000) as (agents, inventory):
        runs = [
            coordinator(
                inventory,
                out,
                False,
                args.kill_after,
                args.limit_s,
                args.kill_at_lines,
                extra,
                package,
            )
        ]
        runs[0]["requests"] = agents.probes
        if runs[0]["killed"] and (args.kill_after is not None or args.kill_at_lines is not None):
            runs.append(coordinator(inventory, out, True, None, args.limit_s, None, extra, package))
            runs[1]["requests"] = agents.probes - runs[0]["requests"]
        probes = agents.probes
    load_after = os.getloadavg()
    wall = sum(r["wall_s"] for r in runs)
    modelled = probes * args.delay_ms / 1000
    print(
        f"simulated agents {n}  pairs {pairs}  probe requests {probes}  delay {args.delay_ms:g} ms"
    )
    for i, r in enumerate(runs):
        what = "killed (SIGKILL)" if r["killed"] else f"exit {r['rc']}"
        print(
            f"run {i + 1}: {r['wall_s']:.1f} s, {what}; peak RSS {r['rss_kib'] / 1024:.0f} MiB, "
            f"threads {r['threads']}, fds {r['fds']}"
        )
        # A pair is two probe requests (ping-pong, bulk); the aligned schedule writes a pair
        # only after its bulk, so CPU per request is the figure that survives a kill.
        per_request = 1000 * r["cpu_s"] / max(1, r["requests"])
        print(
            f"  coordinator CPU {r['cpu_s']:.1f} s for {r['requests']} probe requests "
            f"({r['pairs_written']} pairs written): {per_request:.2f} ms per request, "
            f"{2 * per_request:.2f} ms per pair (start-up, pre-flight, planning included)"
        )
        if r["rc"] not in (0, None) and not r["killed"]:
            print(r["stderr"])
        every = r["samples"]
        growth = [*every[: -1 : max(1, len(every) // 8)], *every[-1:]]
        print("  (s, results.jsonl lines, threads, fds, RSS MiB): " + ", ".join(map(str, growth)))
    done = (out / "results.json").exists()
    once, paths, lines = check_once(out, pairs) if done else (False, 0, 0)
    # The modelled probe time runs concurrently (a round's pairs at once): per pair, the
    # coordinator's share is the wall time over pairs; the modelled part is bounded above
    # by one delay per probe phase per round.
    print(
        f"wall {wall:.1f} s for {paths} paths: {1000 * wall / max(1, paths):.2f} ms per pair "
        f"(modelled probe time in sequence {modelled:.1f} s)"
    )
    print(f"every pair exactly once in results.json and results.jsonl: {once} ({paths}, {lines})")
    print(
        "load average before "
        + " ".join(f"{x:.1f}" for x in load_before)
        + ", after "
        + " ".join(f"{x:.1f}" for x in load_after)
    )
    print(f"run directory: {out}")
    # the last run must have finished too: results.json alone is not the whole run (the
    # report files come after it)
    finished = runs[-1]["rc"] == 0 and not runs[-1]["killed"]
    print(f"last run finished with exit 0: {finished}")
    return 0 if once and finished else 1


if __name__ == "__main__":
    raise SystemExit(main())
