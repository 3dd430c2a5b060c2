"""Can a probe reach the agent at a NIC address (``agent/reach.py``): the agent binds the
address (is it this host's?) and connects to it at its own port (does it listen there?);
it never connects to an address that is not its own."""

from __future__ import annotations

import socket

import pytest

from netqual.agent import reach
from netqual.base.errors import BadRequestError


def test_a_listening_local_address_passes_and_a_silent_one_is_refused() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert reach.check("127.0.0.1", port, "127.0.0.1") is None
        refused = reach.check("127.0.0.7", port, "127.0.0.1")
    assert refused == (
        f"connection refused at 127.0.0.7:{port}: the agent listens on 127.0.0.1 only"
    )


def test_an_address_of_another_host_is_named_and_never_connected_to() -> None:
    # 198.18.0.0/15 (benchmarking, never routed here): not an address of this host
    problem = reach.check("198.18.250.250", 9, "0.0.0.0")
    assert problem is not None and problem.startswith(
        "198.18.250.250 is not an address of this host"
    )


def test_the_request_and_the_answer_are_checked() -> None:
    with pytest.raises(BadRequestError, match=r"reach.addresses\[0\]"):
        reach.serve({"addresses": ["gpu01.example"]}, 1, "0.0.0.0", "peer")
    with pytest.raises(BadRequestError, match="missing"):
        reach.from_peer({"addresses": {}}, ["10.0.0.1"], "peer")
    with pytest.raises(BadRequestError, match="text or null"):
        reach.from_peer({"addresses": {"10.0.0.1": 5}}, ["10.0.0.1"], "peer")
    assert reach.from_peer({"addresses": {"10.0.0.1": None}}, ["10.0.0.1"], "p") == {
        "10.0.0.1": None
    }
