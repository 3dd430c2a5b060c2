"""The storage node's counter window around a fan-in level (``run.fanin.StorageWindow``):
it waits as long as a rank's request may, never less than WAIT_S (outside the level's
timing, waiting costs nothing; 5 s alone lost the counters on a loaded emulated guest)."""

from __future__ import annotations

from typing import Any

import pytest

from netqual.agent import counters
from netqual.model.node import Node, Role
from netqual.run import fanin

STORAGE = Node("st", "127.0.0.1", role=Role.STORAGE)


class Channel:
    peer = "st"

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def set_timeout(self, seconds: float) -> None:
        self.timeouts.append(seconds)

    def request(self, kind: str, body: dict[str, Any], reply: str | None = None) -> Any:
        return {"interfaces": {}} if kind == "counters.end" else {}

    def send(self, kind: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.mark.parametrize(("request_s", "waited_s"), [(60.0, 60.0), (1.0, 5.0)])
def test_the_window_waits_as_long_as_a_rank_may(
    request_s: float, waited_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    ch = Channel()
    connected: list[float] = []

    def connect(*args: Any, **kw: Any) -> tuple[Channel, None]:
        connected.append(args[4])
        return ch, None

    monkeypatch.setattr(fanin, "connect", connect)
    monkeypatch.setattr(counters, "checked_window", lambda body, *_: body)
    window = fanin.StorageWindow(STORAGE, None, request_s)
    assert window.close() == {"interfaces": {}}
    assert connected == [waited_s] and ch.timeouts == [waited_s, waited_s]


@pytest.fixture
def short_idle_agent() -> Any:
    """A real agent (a thread) that ends a session silent for 2 s."""
    import threading

    from netqual.agent.server import Agent
    from netqual.transports.interface import AgentLimits

    agent = Agent("127.0.0.1", 0, None, name="st", limits=AgentLimits(idle_timeout_s=2.0))
    _host, port = agent.bind()
    thread = threading.Thread(target=agent.serve_forever, daemon=True)
    thread.start()
    try:
        yield Node("st", "127.0.0.1", port, role=Role.STORAGE)
    finally:
        agent.stop()
        thread.join(5)


def test_a_level_longer_than_the_agents_idle_timeout_keeps_its_counters(
    short_idle_agent: Node,
) -> None:
    """The window learns the agent's idle timeout from ``info`` and keeps the session alive
    at a quarter of it (0.5 s): 4 s of level (2 idle timeouts; the keeper may be starved for
    1.5 s) and the counters are there. The agent ends a silent session as it should: the
    same window without the keeper loses them (the defect, seen as a missing
    ``storage_counters`` in CI's emulated guest)."""
    import time

    kept = fanin.StorageWindow(short_idle_agent, None, 5.0)
    assert kept._keeper is not None and kept._keeper.is_alive()
    time.sleep(4.0)
    moved = kept.close()
    assert moved is not None and "interfaces" in moved, moved

    silent = fanin.StorageWindow(short_idle_agent, None, 5.0)
    silent._stop.set()  # its keeper ends at once: the session goes silent
    assert silent._keeper is not None
    silent._keeper.join(5)
    time.sleep(4.5)  # the agent ends it 2 s in: 2.5 s to spare
    assert silent.close() is None
