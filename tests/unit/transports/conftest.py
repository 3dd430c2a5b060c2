"""Fixtures of the RDMA transport's unit tests: the fake verbs fabric (both ping-pong
loops) and a real agent (a thread) whose RDMA transport runs on it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from rdma_fakeverbs import Fabric, module

from netqual.transports.interface import AgentLimits
from netqual.transports.rdma import hotloop, verbs


@pytest.fixture(params=["python", "compiled"])
def fabric(request: pytest.FixtureRequest) -> Fabric:
    """Every test runs both ping-pong loops: the Python one and hotloop.c (where built),
    the latter on the fake verbs' C-level twins (tests/support/rdma_fakeverbs_c.py)."""
    fab = Fabric()
    if request.param == "compiled":
        lib = hotloop.library()
        if isinstance(lib, str):
            pytest.skip(lib)
        fab.compiled = True
    return fab


@pytest.fixture
def fake_agent(fabric: Fabric, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A real netqual agent (thread) whose RDMA transport runs on the fake verbs."""
    from netqual.agent.server import Agent

    monkeypatch.setitem(verbs._loaded, "pyverbs", module(fabric))
    agent = Agent("127.0.0.1", 0, None, name="fakeB", limits=AgentLimits())
    _host, port = agent.bind()
    thread = threading.Thread(target=agent.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        agent.stop()
        thread.join(5)
