"""The QP local ACK timeout (``--rdma-qp-timeout``, ``RdmaOptions.qp_timeout``): checked,
read from the environment and from a peer, merged run-over-agent, set on every QP of both
ends (the fake verbs record each transition's attributes), recorded in the probe's details
and named in a retry-exceeded error."""

from __future__ import annotations

import time

import pytest
from rdma_fakeverbs import Fabric, module

from netqual.agent.wire.messages import Fields
from netqual.agent.wire.protocol import connect
from netqual.base.errors import ProbeError, UsageError
from netqual.model.plan import ProbePlan
from netqual.transports.rdma import RdmaOptions, devices
from netqual.transports.rdma.endpoint import QP_RETRY_CNT, QP_TIMEOUT, Endpoint
from netqual.transports.rdma.errors import ack_timeout_ms, completion_error
from netqual.transports.rdma.transport import RdmaTransport, transport_for_agent


def test_range_env_json_and_precedence() -> None:
    for bad in (0, 32, -1):
        with pytest.raises(UsageError, match=r"--rdma-qp-timeout.*1\.\.31.*0, wait forever"):
            RdmaOptions(qp_timeout=bad)
    assert RdmaOptions(qp_timeout=1).qp_timeout == 1 and RdmaOptions(qp_timeout=31).qp_timeout
    mine = RdmaOptions.from_env({"NETQUAL_RDMA_QP_TIMEOUT": "16", "NETQUAL_RDMA_DEVICE": "rxe0"})
    assert mine == RdmaOptions(device="rxe0", qp_timeout=16)
    assert RdmaOptions.from_env({"NETQUAL_RDMA_QP_TIMEOUT": " "}).qp_timeout is None
    with pytest.raises(UsageError, match=r"NETQUAL_RDMA_QP_TIMEOUT.*expected an integer"):
        RdmaOptions.from_env({"NETQUAL_RDMA_QP_TIMEOUT": "1s"})
    assert RdmaOptions.decode(Fields(mine.to_json(), "options", "peer")) == mine
    assert "qp_timeout" not in RdmaOptions(device="rxe0").to_json()  # as older agents sent
    run = RdmaOptions(qp_timeout=18)
    assert not run.empty and RdmaOptions().empty
    assert run.over(mine) == RdmaOptions(device="rxe0", qp_timeout=18)
    assert RdmaOptions(gid_index=1).over(mine).qp_timeout == 16  # the agent's own stays
    t = transport_for_agent("gpu01", run, mine)  # the run's wins, and goes to the responder
    assert t.options.qp_timeout == 18 and t.peer_options == run


def _endpoints(fabric: Fabric, qp_timeout: int | None) -> tuple[Endpoint, Endpoint]:
    pv = module(fabric)
    sel = devices.choose(devices.scan(pv), RdmaOptions(), local_ip="127.0.0.1")
    a = Endpoint(pv, sel, msg_bytes=64, bulk_bytes=4096, send_wr=64, qps=2, qp_timeout=qp_timeout)
    b = Endpoint(pv, sel, msg_bytes=64, bulk_bytes=4096, send_wr=64, qps=2)
    a.connect(b.conninfo())
    b.connect(a.conninfo())
    return a, b


def test_every_qp_goes_to_rts_with_the_chosen_timeout(fabric: Fabric) -> None:
    a, b = _endpoints(fabric, 18)
    try:
        assert [qp.attrs["RTS"]["timeout"] for qp in a.all_qps] == [18, 18]
        assert [qp.attrs["RTS"]["timeout"] for qp in b.all_qps] == [QP_TIMEOUT] * 2 == [14] * 2
        assert {qp.attrs["RTS"]["retry_cnt"] for qp in a.all_qps} == {QP_RETRY_CNT}
    finally:
        a.close()
        b.close()


def test_retry_exceeded_names_the_timeout_and_the_flag() -> None:
    assert ack_timeout_ms(14) == pytest.approx(67.108864)
    text = str(completion_error("RDMA READ", 12, 0, ack=(18, 6)))
    assert text == (
        "rdma RDMA READ completion failed: IBV_WC_RETRY_EXC_ERR (retry exceeded: peer "
        "unreachable or QP gone); no ACK within 1074 ms, 6 retries (QP timeout 18: raise "
        "--rdma-qp-timeout for a slow responder, e.g. rxe/siw on a loaded host, or a "
        "long-haul link)"
    )
    assert "\n" not in text
    other = str(completion_error("RDMA READ", 10, 0, ack=(18, 6)))  # not a timeout: no hint
    assert "qp-timeout" not in other


def test_the_run_timeout_reaches_the_responder_and_the_details(
    fake_agent: int, fabric: Fabric
) -> None:
    """A real agent (fake verbs) answers rdma.connect: the run's value is on its QPs, it
    says so in its details, and the initiator records its own."""
    run = RdmaOptions(qp_timeout=20)
    plan = ProbePlan(iterations=50, warmup=5, size_bytes=64, bulk=False)
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch:
        raw = RdmaTransport(options=run, peer_options=run, node_name="fakeA").initiate(
            ch, plan, time.monotonic() + 60, "127.0.0.1"
        )
    assert raw.details["qp_timeout"] == 20
    assert raw.details["peer"]["qp_timeout"] == 20


def test_a_responder_stopped_by_retries_names_the_run_timeout(
    fake_agent: int, fabric: Fabric
) -> None:
    fabric.fail_write = (next(fabric.qpns) + 2, 3)  # the responder's QP; its third round
    run = RdmaOptions(qp_timeout=20)
    plan = ProbePlan(iterations=50, warmup=5, size_bytes=64, bulk=False)
    ch, _hello = connect("127.0.0.1", fake_agent, None, peer="fakeB")
    with ch, pytest.raises(ProbeError) as caught:
        RdmaTransport(options=run, peer_options=run, node_name="fakeA").initiate(
            ch, plan, time.monotonic() + 60, "127.0.0.1"
        )
    assert "IBV_WC_RETRY_EXC_ERR" in str(caught.value)
    assert "no ACK within 4295 ms, 6 retries (QP timeout 20: raise --rdma-qp-timeout" in str(
        caught.value
    )
