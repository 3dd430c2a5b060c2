"""On RDMA hardware: a loopback pair on one device, both probes, sane numbers.

The responder is a real agent process (its own interpreter, so two spinning Python loops
do not share a GIL); the initiator is this test. Skips, with the reason, without a device.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from netqual.agent.wire.protocol import connect
from netqual.base.errors import TransportUnavailableError
from netqual.base.units import KIB, MIB
from netqual.model.plan import ProbePlan
from netqual.transports.rdma import RdmaOptions, devices, verbs
from netqual.transports.rdma.gid import Family, LinkLayer
from netqual.transports.rdma.transport import RdmaTransport

pytestmark = pytest.mark.rdma


def _port() -> tuple[str, int, str]:
    """(device, port, address the agent should listen on) for the first usable port."""
    try:
        RdmaTransport().check_available()
        found = devices.scan(verbs.load())
    except TransportUnavailableError as err:
        pytest.skip(f"no RDMA here: {err}")
    for dev in found:
        for port in dev.ports:
            if not port.active:
                continue
            if port.link_layer is LinkLayer.INFINIBAND:
                return dev.name, port.num, "127.0.0.1"
            for gid in port.gids:
                if gid.gid_type.value == "RoCEv2" and gid.family is Family.IPV4:
                    return dev.name, port.num, str(gid.ip)
    pytest.skip("no ACTIVE port with a RoCE v2 IPv4 GID or InfiniBand LID")


@pytest.fixture(scope="module")
def responder() -> Iterator[tuple[str, int, RdmaOptions, bytes | None]]:
    from netqual.base.auth import load_token, write_token
    from netqual.run.localagents import start_agent, stop_agents

    device, port, host = _port()
    options = RdmaOptions(device=device, port=port)
    saved = dict(os.environ)
    os.environ.update({"NETQUAL_RDMA_DEVICE": device, "NETQUAL_RDMA_PORT": str(port)})
    with tempfile.TemporaryDirectory() as tmp:
        token_file = Path(tmp) / "token"
        write_token(token_file)
        proc, agent_port = start_agent("hwB", token_file, host)
        try:
            yield host, agent_port, options, load_token(token_file)
        finally:
            stop_agents([proc])
            os.environ.clear()
            os.environ.update(saved)


def test_loopback_pingpong_and_bulk_read(
    responder: tuple[str, int, RdmaOptions, bytes | None],
) -> None:
    host, agent_port, options, token = responder
    plan = ProbePlan(
        iterations=10_000,
        warmup=1_000,
        size_bytes=64,
        chunks_bytes=(64 * KIB, 1 * MIB),
        depths=(1, 8),
        bulk_bytes=64 * MIB,
    )
    ch, _hello = connect(host, agent_port, token, peer="hwB")
    with ch:
        raw = RdmaTransport(options=options, node_name="hwA").initiate(
            ch, plan, time.monotonic() + 120, host
        )
    rtt = raw.rtt_ns
    p50_us, p99_us = np.percentile(rtt, 50) / 1e3, np.percentile(rtt, 99) / 1e3
    print(f"\nRTT p50 {p50_us:.2f} us  p99 {p99_us:.2f} us")
    assert rtt.shape == (10_000,) and (rtt > 0).all()
    assert np.percentile(rtt, 50) < 1_000_000  # < 1 ms even through Python
    assert len(raw.bulk) == 4
    for cell in raw.bulk:
        goodput_gbps = cell.chunk_bytes * len(cell.completion_ns) * 8 / cell.elapsed_ns
        print(f"{cell.chunk_bytes} B x{cell.depth}: {goodput_gbps:.1f} Gb/s")
        assert cell.error is None and goodput_gbps > 0
        assert (cell.completion_ns > 0).all()
    assert raw.details["device"] == options.device
    assert raw.details["responder_rounds"] == 11_000
