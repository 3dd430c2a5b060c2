"""Connection info, the responder's request plan, and per-node options: encode, decode, validate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netqual.agent.wire.messages import Fields
from netqual.base.errors import BadRequestError, ProtocolError, UsageError
from netqual.base.units import KIB, MIB
from netqual.model.plan import ProbePlan
from netqual.transports.interface import AgentLimits
from netqual.transports.rdma import RdmaOptions
from netqual.transports.rdma.conninfo import ConnInfo, ConnInfoError
from netqual.transports.rdma.gid import GidType, LinkLayer
from netqual.transports.rdma.session import SessionPlan
from netqual.transports.rdma.transport import transport_for_agent

ROCE = ConnInfo(
    qpn=0x1A2B,
    psn=0xABCDEF,
    lid=0,
    gid="0000:0000:0000:0000:0000:ffff:0a00:010b",
    gid_index=3,
    gid_type=GidType.ROCE_V2,
    link_layer=LinkLayer.ETHERNET,
    mtu=3,
    rkey=0xDEADBEEF,
    addr=0x7F12_3456_7000,
    length=12288 + 8 * MIB,
    recv_offset=0,
    bulk_offset=8192,
    bulk_bytes=8 * MIB,
    max_rd_atomic=16,
    max_dest_rd_atomic=16,
)


def test_round_trip_through_json_text() -> None:
    wire = json.loads(json.dumps(ROCE.to_json()))
    assert wire["addr"] == "0x7f1234567000" and wire["rkey"] == "0xdeadbeef"
    assert wire["gid_type"] == "RoCEv2"
    assert ConnInfo.from_json(wire) == ROCE


@given(
    qpn=st.integers(1, (1 << 24) - 1),
    psn=st.integers(0, (1 << 24) - 1),
    rkey=st.integers(0, (1 << 32) - 1),
    addr=st.integers(0, (1 << 64) - 1),
)
def test_round_trip_any_valid_numbers(qpn: int, psn: int, rkey: int, addr: int) -> None:
    info = ConnInfo(**{**ROCE.__dict__, "qpn": qpn, "psn": psn, "rkey": rkey, "addr": addr})
    assert ConnInfo.from_json(info.to_json()) == info


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("qpn", 0, "outside 1..16777215"),
        ("psn", 1 << 24, "outside"),
        ("qpn", "12", "expected an integer"),
        ("mtu", 6, "outside 1..5"),
        ("gid", "fe80::zz", "expected a GID"),
        ("gid_type", "RoCEv3", "expected IB, RoCEv1 or RoCEv2"),
        ("link_layer", "Ethernet2", "expected InfiniBand or Ethernet"),
        ("rkey", 1234, "expected a hex string"),
        ("addr", "0x1" + "0" * 16, "expected a hex string"),
        ("max_rd_atomic", 0, "outside 1..255"),
        ("bulk_bytes", 1 << 40, "runs past the end of the region"),
        ("gid", "::", "RoCE needs a non-zero GID"),
        ("psn", True, "expected an integer"),
        ("more_qps", [[0, 1]], "expected [qpn, psn], got [0, 1]"),
        ("more_qps", [[5, 1 << 24]], "expected [qpn, psn]"),
        ("more_qps", [[5, True]], "expected [qpn, psn]"),
        ("more_qps", [5, 6], "expected [qpn, psn], got 5"),
        ("more_qps", {"qpn": 5}, "expected a list of at most 15"),
        ("more_qps", [[5, 1]] * 16, "expected a list of at most 15"),
    ],
)
def test_bad_field_is_named(field: str, value: Any, words: str) -> None:
    wire = {**ROCE.to_json(), field: value}
    with pytest.raises(ConnInfoError) as info:
        ConnInfo.from_json(wire, peer="gpu02")
    assert info.value.field == field
    assert f"gpu02: bad rdma connection info: field '{field}'" in str(info.value)
    assert words in str(info.value)


def test_a_fetch_profiles_further_qps_round_trip_and_are_absent_with_one() -> None:
    assert "more_qps" not in ROCE.to_json()  # what an older agent sends and reads
    two = ConnInfo(**{**ROCE.__dict__, "more_qps": ((0x1A2C, 77),)})
    wire = json.loads(json.dumps(two.to_json()))
    assert wire["more_qps"] == [[0x1A2C, 77]] and ConnInfo.from_json(wire) == two


def test_missing_field_and_ib_without_lid() -> None:
    wire = ROCE.to_json()
    del wire["psn"]
    with pytest.raises(ConnInfoError, match=r"field 'psn': missing"):
        ConnInfo.from_json(wire)
    ib = {**ROCE.to_json(), "link_layer": "InfiniBand", "gid_type": "IB", "lid": 0}
    with pytest.raises(ConnInfoError, match=r"subnet manager"):
        ConnInfo.from_json(ib)
    assert isinstance(ConnInfoError("p", "x", "y"), ProtocolError)


def test_session_plan_from_probe_plan_and_back() -> None:
    plan = ProbePlan(iterations=500, warmup=50, chunks_bytes=(64 * KIB, 8 * MIB), depths=(1, 8))
    session = SessionPlan.from_plan(plan)
    assert session.rounds == 550 and session.max_chunk_bytes == 8 * MIB
    assert list(session.cells()) == [
        (64 * KIB, 1, plan.reads_for(64 * KIB)),
        (64 * KIB, 8, plan.reads_for(64 * KIB)),
        (8 * MIB, 1, plan.reads_for(8 * MIB)),
        (8 * MIB, 8, plan.reads_for(8 * MIB)),
    ]
    assert SessionPlan.from_json(json.loads(json.dumps(session.to_json()))) == session
    assert list(SessionPlan.from_plan(ProbePlan(bulk=False)).cells()) == []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"iterations": 2_000_000}, "iterations+warmup 2001000 exceeds max_iterations=1000000"),
        ({"size_bytes": 2 * MIB}, "exceeds max_message_bytes="),
        ({"chunks_bytes": [128 * MIB], "reads": [1]}, "exceeds max_chunk_bytes="),
        ({"chunks_bytes": [64 * MIB], "reads": [1000]}, "exceeds max_bulk_bytes="),
        ({"chunks_bytes": [64], "reads": [1 << 21]}, "exceed max_reads=1048576"),
        ({"depths": [65]}, "depth 65 exceeds max_depth=64"),
    ],
)
def test_limits(change: dict[str, Any], words: str) -> None:
    wire = {**SessionPlan.from_plan(ProbePlan()).to_json(), **change}
    over = SessionPlan.from_json(wire).over_limits(AgentLimits())
    assert over is not None and words in over


def test_session_plan_rejects_malformed_requests() -> None:
    with pytest.raises(ProtocolError, match=r"rdma.connect.plan.depths\[0\]: 0 outside"):
        SessionPlan.from_json({**SessionPlan.from_plan(ProbePlan()).to_json(), "depths": [0]})
    with pytest.raises(ProtocolError, match=r"one entry per chunk"):
        SessionPlan.from_json({**SessionPlan.from_plan(ProbePlan()).to_json(), "reads": [1]})


def test_options_from_env_json_and_precedence() -> None:
    env = {"NETQUAL_RDMA_DEVICE": "mlx5_1", "NETQUAL_RDMA_PORT": "2", "NETQUAL_RDMA_GID_INDEX": ""}
    mine = RdmaOptions.from_env(env)
    assert mine == RdmaOptions(device="mlx5_1", port=2, gid_index=None)
    asked = RdmaOptions.decode(Fields({"gid_index": 3}, "options", "peer"))
    assert asked.over(mine) == RdmaOptions(device="mlx5_1", port=2, gid_index=3)
    assert RdmaOptions.decode(Fields(mine.to_json(), "options", "peer")) == mine
    with pytest.raises(UsageError, match=r"NETQUAL_RDMA_PORT.*expected an integer"):
        RdmaOptions.from_env({"NETQUAL_RDMA_PORT": "one"})
    with pytest.raises(UsageError, match=r"--rdma-port.*1..255"):
        RdmaOptions(port=0)
    with pytest.raises(UsageError, match=r"--gid-index.*0..65535"):
        RdmaOptions(gid_index=70000)


@pytest.mark.parametrize(
    ("sent", "field", "problem"),
    [
        ({"gid_index": "3"}, "gid_index", "must be an integer"),
        ({"device": 5}, "device", "is not a node name"),  # was "command line: --rdma-device"
        ({"device": "mlx5_0\n" + "x" * 5000}, "device", "is not a node name"),  # was accepted
        ({"device": ""}, "device", "is not a node name"),
        ({"port": 0}, "port", "0 outside [1, 255]"),
        ({"port": True}, "port", "must be an integer"),
        ({"gid_index": 1 << 20}, "gid_index", "outside [0, 65535]"),
        ({"qp_timeout": 0}, "qp_timeout", "0 outside [1, 31]"),  # 0: wait forever
        ({"qp_timeout": 32}, "qp_timeout", "32 outside [1, 31]"),
        ({"qp_timeout": 14.5}, "qp_timeout", "must be an integer"),
    ],
)
def test_options_from_a_peer_are_bad_requests_naming_the_field(
    sent: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(BadRequestError) as info:
        RdmaOptions.decode(Fields(sent, "probe.options.rdma", "gpu01"))
    assert info.value.field == f"probe.options.rdma.{field}"
    assert problem in info.value.problem
    assert len(str(info.value)) < 300


def test_transport_for_agent_merges_request_over_agent_options() -> None:
    agent = RdmaOptions(device="mlx5_0", port=1)
    t = transport_for_agent("gpu01", RdmaOptions(gid_index=3), agent)
    assert t.options == RdmaOptions(device="mlx5_0", port=1, gid_index=3)
    assert t.peer_options == RdmaOptions(gid_index=3)
    assert t.node_name == "gpu01"
    plain = transport_for_agent("gpu02", None, agent)
    assert (plain.options, plain.peer_options) == (agent, None)
