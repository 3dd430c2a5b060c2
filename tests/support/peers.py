"""Helpers shared by tests (from test_trust.py)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from agentpool import AgentProc
from e2e_cli import netqual_here

from netqual.agent.wire.handshake import PROTOCOL_VERSION
from netqual.agent.wire.protocol import (
    HEADER,
    MAGIC,
)
from netqual.model.node import Node
from netqual.model.plan import ProbePlan

SMALL = ProbePlan(iterations=300, warmup=30, chunks_bytes=(64 * 1024,), depths=(1,), timeout_s=20)


SMALL_CLI = ["--iterations", "300", "--warmup", "30", "--chunk", "64KiB", "--depth", "1"]


def node(a: AgentProc) -> Node:
    return Node(name=a.name, address="127.0.0.1", port=a.port)


class Server:
    """A listener in a thread; ``handle`` runs per connection until ``close``."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.handle = handle
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.accepter = threading.Thread(target=self._accept, daemon=True)
        self.accepter.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._one, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _one(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            self.handle(conn)

    def close(self) -> None:
        self.stopping.set()
        self.accepter.join(timeout=5)
        self.listener.close()
        for t in self.threads:
            t.join(timeout=5)


@contextlib.contextmanager
def serving(handle: Callable[[socket.socket], None]) -> Iterator[Server]:
    server = Server(handle)
    try:
        yield server
    finally:
        server.close()


def frame(payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, PROTOCOL_VERSION, 1, len(payload)) + payload


def write_inventory(path: Path, nodes: list[tuple[str, int]], token_file: Path) -> None:
    lines = [f'[defaults]\ntoken_file = "{token_file}"\n']
    for name, port in nodes:
        lines.append(f'[[node]]\nname = "{name}"\naddress = "127.0.0.1"\nport = {port}\n')
    path.write_text("\n".join(lines))


def run_cli(inventory: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``netqual run`` through the CLI entry point in this process (``netqual_here``):
    what the tests check is the run's output and files, not its process."""
    args = ["run", str(inventory), "--out", str(out), *SMALL_CLI]
    args += ["--allow-short-plan"]  # below the default policy's min_samples on purpose
    return netqual_here(*args, *extra)


# A short run without bulk cells, below the policy's min_samples on purpose.
SHORT = ["--iterations", "200", "--warmup", "10", "--no-bulk", "--allow-short-plan"]
