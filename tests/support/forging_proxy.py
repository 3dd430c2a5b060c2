"""A man in the middle at a node's address (docs/security.md), as a process.

``python tests/support/forging_proxy.py UPSTREAM_PORT forge|relay [--delay-ms D]`` listens on
127.0.0.1 (kernel-picked port, printed as ``listening on 127.0.0.1:PORT``) and relays every
connection to the agent at 127.0.0.1:UPSTREAM_PORT byte for byte, the authenticated
handshake included (it holds no token). It follows the frames both ways to know where the
raw timed traffic starts and ends; with ``forge`` it answers that traffic itself the
moment it arrives:

* after a ``tcp.pingpong`` request: every ping is echoed back at once (and also passed on,
  so the real agent finishes its loop; its replies are dropped);
* after a ``tcp.bulk`` request: every read request is answered at once with a zero-filled
  chunk (and passed on; the agent's chunks are dropped).

``--delay-ms`` delays everything it relays from the agent (a slow path the forger hides).

``--tail PCT`` makes only PCT% of ping-pong rounds (at random places) slow (the tail that sets a
p99): with ``relay`` those rounds' replies are delayed by ``--delay-ms`` (an honest slow
tail), with ``forge`` they are answered at once with the initiator's own bytes (the ping
is still passed on and the agent's reply dropped); every other round is relayed as is.
Exits when its stdin closes (the test's end), so it never outlives the test.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import threading
import time

HEADER_BYTES = 8
TAG_BYTES = 32
# The agent's answer that starts the raw traffic (the end-of-loop answers carry a body).
ACCEPTED = b'{"kind":"ok","body":{}}'


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise ConnectionError("closed")
        buf += part
    return bytes(buf)


def read_frame(sock: socket.socket, tagged: bool) -> tuple[bytes, bytes]:
    """(whole frame bytes, JSON payload or b"")."""
    header = recv_exact(sock, HEADER_BYTES)
    length = int.from_bytes(header[4:8], "big")
    payload = recv_exact(sock, length)
    tag = recv_exact(sock, TAG_BYTES) if tagged else b""
    return header + payload + tag, payload if header[3] == 1 else b""


class Session:
    def __init__(
        self,
        client: socket.socket,
        upstream_port: int,
        forge: bool,
        delay_s: float,
        tail: float = 0.0,
    ):
        self.client = client
        self.tail = tail / 100  # the fraction of slow rounds (0: the whole stream)
        self.slow: list[bool] = []  # per round of the current ping-pong (tail mode)
        self.size = 0
        self.up = socket.create_connection(("127.0.0.1", upstream_port), timeout=60)
        self.forge = forge
        self.delay_s = delay_s
        self.raw_back = 0  # raw bytes from the agent after the next frame (timed traffic)
        self.lock = threading.Lock()

    def to_client(self, data: bytes) -> None:
        if self.delay_s and not self.tail:
            time.sleep(self.delay_s)
        with self.lock:
            self.client.sendall(data)

    def pump_back(self) -> None:
        """Agent -> client: frames (hello and welcome untagged), then dropped raw bytes."""
        frames = 0
        try:
            while True:
                frame, payload = read_frame(self.up, tagged=frames >= 2)
                frames += 1
                # Whether this answer starts raw traffic is read before the client has it:
                # once it has, its next request may set raw_back already (an "ok" to
                # counters.begin taken for the ping-pong's, whose own "ok" was then dropped
                # as a reply: the initiator never saw it accepted, seen on a loaded host)
                n = 0
                if payload == ACCEPTED:  # maybe the agent accepting a tcp.pingpong / tcp.bulk
                    n, self.raw_back = self.raw_back, 0
                self.to_client(frame)
                if not n:
                    continue
                if self.tail and self.size and n:
                    self.pump_tail(n // self.size)
                    continue
                while n > 0:  # the agent's replies: dropped when forging, else relayed
                    data = self.up.recv(min(n, 1 << 20))
                    if not data:
                        raise ConnectionError("closed")
                    n -= len(data)
                    if not self.forge:
                        self.to_client(data)
        except (ConnectionError, OSError):
            pass
        finally:
            self.client.close()

    def pump_tail(self, rounds: int) -> None:
        """One ping-pong's replies in tail mode: the slow rounds' dropped (forged) or
        delayed (relayed), the others relayed at once."""
        for i in range(rounds):
            reply = recv_exact(self.up, self.size)
            if not self.slow[i]:
                with self.lock:
                    self.client.sendall(reply)
            elif not self.forge:
                time.sleep(self.delay_s)
                with self.lock:
                    self.client.sendall(reply)

    def run(self) -> None:
        back = threading.Thread(target=self.pump_back, daemon=True)
        back.start()
        frames = 0
        try:
            while True:
                frame, payload = read_frame(self.client, tagged=frames >= 1)
                frames += 1
                msg = json.loads(payload) if payload else {}
                kind, body = msg.get("kind"), msg.get("body", {})
                if kind == "tcp.pingpong" and self.tail:
                    size, count = int(body["size_bytes"]), int(body["count"])
                    self.size, self.raw_back = size, size * count
                    chosen = set(random.sample(range(count), max(1, round(self.tail * count))))
                    self.slow = [i in chosen for i in range(count)]
                    self.up.sendall(frame)
                    for i in range(count):
                        ping = recv_exact(self.client, size)
                        if self.forge and self.slow[i]:
                            with self.lock:
                                self.client.sendall(ping)  # the forged echo, at once
                        self.up.sendall(ping)
                elif kind == "tcp.pingpong":
                    size, count = int(body["size_bytes"]), int(body["count"])
                    self.raw_back = size * count
                    self.up.sendall(frame)
                    for _ in range(count):
                        ping = recv_exact(self.client, size)
                        if self.forge:
                            with self.lock:
                                self.client.sendall(ping)  # the forged echo, at once
                        self.up.sendall(ping)
                elif kind == "tcp.bulk":
                    chunk, reads = int(body["chunk_bytes"]), int(body["reads"])
                    self.size, self.raw_back = 0, chunk * reads
                    self.up.sendall(frame)
                    zeros = bytes(chunk)
                    for _ in range(reads):
                        request = recv_exact(self.client, 8)
                        if self.forge:
                            with self.lock:
                                self.client.sendall(zeros)  # the forged chunk, at once
                        self.up.sendall(request)
                else:
                    self.up.sendall(frame)
        except (ConnectionError, OSError, ValueError):
            pass
        finally:
            self.up.close()
            back.join(timeout=5)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("upstream_port", type=int)
    parser.add_argument("mode", choices=("forge", "relay"))
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--tail", type=float, default=0.0)
    args = parser.parse_args()
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"listening on 127.0.0.1:{listener.getsockname()[1]}", flush=True)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            forge = args.mode == "forge"
            session = Session(conn, args.upstream_port, forge, args.delay_ms / 1e3, args.tail)
            session.up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=session.run, daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()  # until the test closes our stdin (or dies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
