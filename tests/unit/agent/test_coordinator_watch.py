"""CoordinatorWatch: a probe's watcher of the coordinator's channel (agent side).

close() ends the watcher at once: it used to wait out the watcher's select timeout
(POLL_S, 0.2 s), which every probe request paid at its end (the ping-pong phase of one
loopback pair: 0.21 s for 0.03 s of round trips). Here POLL_S is an hour, so a close()
that waited for it would hang the test; the watcher still stops the probe's connections
when the coordinator leaves, and leaves no file descriptor behind.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from netqual.agent.probe_request import CoordinatorWatch


@dataclass
class _Channel:
    sock: socket.socket


class _SlowWatch(CoordinatorWatch):
    POLL_S = 3600.0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def channel() -> Iterator[tuple[socket.socket, socket.socket]]:
    agent_end, coordinator_end = socket.socketpair()
    yield agent_end, coordinator_end
    agent_end.close()
    coordinator_end.close()


def test_close_wakes_the_watcher_at_once_and_frees_its_descriptor(
    channel: tuple[socket.socket, socket.socket],
) -> None:
    agent_end, _ = channel
    before = _fds()
    watch = _SlowWatch(_Channel(agent_end))  # type: ignore[arg-type]
    assert _fds() == before + 1  # its wake-up descriptor
    t0 = time.monotonic()
    watch.close()
    assert time.monotonic() - t0 < 60  # not the hour of its select timeout
    assert not watch._thread.is_alive()
    assert not watch.gone.is_set()
    assert _fds() == before
    watch.close()  # a second close (the probe's finally) does nothing
    assert _fds() == before


def test_a_coordinator_that_leaves_still_stops_the_probe_connections(
    channel: tuple[socket.socket, socket.socket],
) -> None:
    agent_end, coordinator_end = channel
    peer_a, peer_b = socket.socketpair()
    with peer_a, peer_b:
        watch = _SlowWatch(_Channel(agent_end))  # type: ignore[arg-type]
        watch.attach(peer_a)
        coordinator_end.close()  # the coordinator is killed
        assert watch.gone.wait(30)
        peer_b.settimeout(30)
        assert peer_b.recv(1) == b""  # the probe's connection was shut down
        watch.close()
        assert not watch._thread.is_alive()


def test_a_coordinator_that_speaks_mid_probe_leaves_its_message_to_the_session(
    channel: tuple[socket.socket, socket.socket],
) -> None:
    agent_end, coordinator_end = channel
    watch = _SlowWatch(_Channel(agent_end))  # type: ignore[arg-type]
    coordinator_end.sendall(b"x")
    watch._thread.join(30)
    assert not watch._thread.is_alive() and not watch.gone.is_set()
    watch.close()
    assert agent_end.recv(1) == b"x"  # peeked, not consumed
