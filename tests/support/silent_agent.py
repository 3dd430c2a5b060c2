"""A silent node as a real process: it answers the handshake and ``info`` like an agent
(so it passes the pre-flight check; it refuses the configuration, host path, NIC and
counter requests the way an agent without them does), then sits on every request it
should measure for, without a word, until the other side gives up. No real agent can be
made to do that.

    python tests/support/silent_agent.py NAME [TOKEN_FILE]   # prints its port, serves until killed

Each request it sits on is printed (its kind), so a test can count them."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from pathlib import Path

from netqual.agent.wire.protocol import Channel, server_handshake
from netqual.base.errors import ErrorCode

REFUSED = frozenset({"snapshot", "hostpath", "nics"})  # pre-flight extras it lacks
HOLD_S = 300.0  # how long it sits on one request at most (a test's bound, never reached)


def handle(conn: socket.socket, name: str, token: bytes | None) -> None:
    with conn, contextlib.suppress(Exception):
        conn.settimeout(HOLD_S)
        ch = Channel(conn, "peer")
        server_handshake(ch, token, name, "0")
        while (msg := ch.recv()).kind != "bye":
            if msg.kind == "info":
                ch.send("info", {"name": name, "measuring": 0})
                continue
            if msg.kind in REFUSED or msg.kind.startswith("counters."):
                # what an agent without these requests answers; the run goes on without them
                ch.send_error(ErrorCode.BAD_REQUEST, f"unknown request {msg.kind!r}")
                continue
            print(msg.kind, flush=True)
            while conn.recv(65536):  # whatever comes next goes unanswered too, until it closes
                pass
            return


def main() -> None:
    name = sys.argv[1]
    token = Path(sys.argv[2]).read_bytes().strip() if len(sys.argv) > 2 else None
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn, name, token), daemon=True).start()


if __name__ == "__main__":
    main()
