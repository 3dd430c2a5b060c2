"""Where an engine role finds its own address (``agent.engine_serve._local``): an interface
list that could not be read (``ip`` failed or timed out: CI's loaded qemu guest) is said as
such, never as "no interface of this node has" the address."""

from __future__ import annotations

from typing import Any

import pytest

from netqual.agent import engine_serve
from netqual.agent.engine_request import EngineSpec
from netqual.engines import netdev
from netqual.engines.interface import EngineUnavailableError
from netqual.model.engine import EngineName

SPEC = EngineSpec(EngineName.MOONCAKE, "198.18.0.1", "198.18.0.2", 65536, (1,), 10.0)
NQA = [{"ifname": "nqa", "addr_info": [{"local": "198.18.0.1"}]}]


def _ip(listed: list[dict[str, Any]]) -> Any:
    return lambda *args: listed


def test_the_interface_holding_the_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netdev, "_ip_json", _ip(NQA))
    monkeypatch.setattr(netdev, "route_dev", lambda *a: "nqa")
    assert engine_serve._local(SPEC, "rxeA") == ("198.18.0.1", "nqa", "nqa")


def test_an_address_no_interface_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    other = [{"ifname": "eth0", "addr_info": [{"local": "10.0.0.1"}]}]
    monkeypatch.setattr(netdev, "_ip_json", _ip(other))
    with pytest.raises(EngineUnavailableError, match=r"no interface of this node has 198\.18"):
        engine_serve._local(SPEC, "rxeA")


def test_an_unreadable_interface_list_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netdev, "_ip_json", _ip([]))  # what a failed or timed-out `ip` gives
    with pytest.raises(EngineUnavailableError, match="cannot list this node's interfaces"):
        engine_serve._local(SPEC, "rxeA")
