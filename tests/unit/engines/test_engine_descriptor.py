"""A target's descriptor from the network is checked field by field before an initiator
dials anything in it (EngineDescriptor.from_wire): the address must be the path's peer,
the buffer must hold the job, base64 must be bounded and decode."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from netqual.base.errors import BadRequestError
from netqual.engines.interface import MAX_METADATA_B64, EngineDescriptor
from netqual.model.engine import EngineName

PEER = "198.18.1.11"


def good(kind: EngineName = EngineName.MOONCAKE, **over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "engine": kind.value,
        "version": "mooncake-transfer-engine-non-cuda 0.3.13.post1",
        "address": PEER,
        "session": f"{PEER}:15588",
        "buffer_addr": 94013269978400,
        "length_bytes": 8 << 20,
        "metadata_b64": None,
        "claimed": ["installed transport: tcp"],
        "netdev": None,
        "start_s": 0.6,
    }
    if kind is EngineName.NIXL:
        d["session"] = "netqual-target-4242"
        d["metadata_b64"] = base64.b64encode(b"\x01" * 300).decode()
    d.update(over)
    return d


def decode(
    body: object, engine: EngineName = EngineName.MOONCAKE, need: int = 1 << 20
) -> EngineDescriptor:
    return EngineDescriptor.from_wire(
        body, "engine.descriptor", "h2", engine=engine, peer_address=PEER, need_bytes=need
    )


def test_good_descriptors_of_both_engines_decode() -> None:
    m = decode(good())
    assert (m.session, m.length_bytes, m.metadata_b64) == (f"{PEER}:15588", 8 << 20, None)
    n = decode(good(EngineName.NIXL), EngineName.NIXL)
    assert n.session == "netqual-target-4242" and n.metadata_b64 is not None


@pytest.mark.parametrize(
    ("over", "field", "problem"),
    [
        ({"address": "198.18.1.99"}, "address", "is not the path's peer"),
        ({"address": "10.0.0.1"}, "address", "is not the path's peer"),
        ({"address": "not an address!"}, "address", "not an IP address or host name"),
        ({"session": "198.18.1.99:15588"}, "session", "is not the path's peer"),
        ({"session": f"{PEER}:0"}, "session", "is not IP:PORT"),
        ({"session": f"{PEER}:99999"}, "session", "is not IP:PORT"),
        ({"session": PEER}, "session", "is not IP:PORT"),
        ({"session": "x" * 301}, "session", "longer than 300"),
        ({"session": f"{PEER}:1\n2"}, "session", "control character"),
        ({"length_bytes": 4096}, "length_bytes", "< 1048576 the job moves"),
        ({"length_bytes": 1 << 40}, "length_bytes", "outside"),
        ({"length_bytes": -1}, "length_bytes", "outside"),
        ({"length_bytes": "8MiB"}, "length_bytes", "must be an integer"),
        ({"buffer_addr": 0}, "buffer_addr", "outside"),
        ({"buffer_addr": 1 << 64}, "buffer_addr", "outside"),
        ({"buffer_addr": True}, "buffer_addr", "must be an integer"),
        ({"engine": "nixl"}, "engine", "the job is mooncake"),
        ({"engine": "rm -rf"}, "engine", "is not one of"),
        ({"metadata_b64": "AAAA"}, "metadata_b64", "not for mooncake"),
        ({"version": "v" * 65}, "version", "longer than 64"),
        ({"claimed": ["\x1b[31mred"]}, "claimed[0]", "printable"),
        ({"claimed": ["x"] * 65}, "claimed", "at most 64"),
        ({"netdev": "an-interface-name-too-long"}, "netdev", "longer than 15"),
        ({"start_s": float("nan")}, "start_s", "outside"),
    ],
)
def test_hostile_mooncake_fields_are_refused_by_name(
    over: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(BadRequestError) as caught:
        decode(good(**over))
    assert caught.value.problem  # the message names the field and what is wrong
    text = str(caught.value)
    assert f"engine.descriptor.{field}" in text, text
    assert problem in text, text


@pytest.mark.parametrize(
    ("over", "field", "problem"),
    [
        ({"metadata_b64": None}, "metadata_b64", "must be a string"),
        ({"metadata_b64": "!!not base64!!"}, "metadata_b64", "not base64"),
        ({"metadata_b64": "A" * (MAX_METADATA_B64 + 4)}, "metadata_b64", "longer than"),
        ({"session": "two words"}, "session", "printable agent name"),
        ({"session": ""}, "session", "printable agent name"),
    ],
)
def test_hostile_nixl_fields_are_refused_by_name(
    over: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(BadRequestError) as caught:
        decode(good(EngineName.NIXL, **over), EngineName.NIXL)
    assert f"engine.descriptor.{field}" in str(caught.value)
    assert problem in str(caught.value)


@pytest.mark.parametrize("body", [None, [], "descriptor", 42])
def test_a_descriptor_that_is_not_an_object_is_refused(body: object) -> None:
    with pytest.raises(BadRequestError, match="must be an object"):
        decode(body)


def test_a_missing_field_is_named() -> None:
    body = good()
    del body["buffer_addr"]
    with pytest.raises(BadRequestError, match=r"engine.descriptor.buffer_addr.*missing"):
        decode(body)
