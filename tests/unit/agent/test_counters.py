"""Host counters around a probe phase (netqual.agent.counters): sysfs trees shaped like
mlx5 and Soft-RoCE, TCP_INFO on a real socket, ethtool -S text, a hostile peer's counters
(docs/evidence.md "Counters")."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from netqual.agent import counters, ethtool
from netqual.analysis import counter_evidence
from netqual.base.errors import BadRequestError


def _port(root: Path, dev: str, port: int, group: str, values: dict[str, int]) -> None:
    d = root / dev / "ports" / str(port) / group
    d.mkdir(parents=True, exist_ok=True)
    for name, value in values.items():
        (d / name).write_text(f"{value}\n")


def _snap(root: Path, retrans: int | None = None, dev: Path | None = None) -> counters.Snapshot:
    src = counters.Sources(
        proc_net_dev=dev or Path("/nonexistent"), sys_infiniband=root, pause=False
    )
    snap = counters.snapshot(counters.Activity(), counters.Tally(), None, src)
    return counters.Snapshot(snap.interfaces, snap.rdma, retrans, 0, 0)


def test_mlx5_style_sysfs_counters_give_the_deltas_of_the_ports_that_moved(tmp_path: Path) -> None:
    mlx = {"port_xmit_data": 1000, "port_rcv_data": 2000, "port_xmit_packets": 10}
    hw = {"out_of_sequence": 0, "np_cnp_sent": 5, "rp_cnp_handled": 1, "not_kept": 9}
    _port(tmp_path, "mlx5_0", 1, "counters", mlx)
    _port(tmp_path, "mlx5_0", 1, "hw_counters", hw)
    _port(tmp_path, "mlx5_1", 1, "counters", mlx)
    before = _snap(tmp_path, retrans=3)
    assert before.rdma["mlx5_0/1"]["np_cnp_sent"] == 5 and "not_kept" not in before.rdma["mlx5_0/1"]
    _port(
        tmp_path,
        "mlx5_0",
        1,
        "counters",
        {
            "port_xmit_data": 1000 + 250_000,
            "port_rcv_data": 2000 + 250_000,
            "port_xmit_packets": 60,
        },
    )
    _port(
        tmp_path,
        "mlx5_0",
        1,
        "hw_counters",
        {"out_of_sequence": 7, "np_cnp_sent": 45, "rp_cnp_handled": 1},
    )
    after = _snap(tmp_path, retrans=5)
    w = counters.side(before, after)
    assert w["rdma"] == {
        "mlx5_0/1": {
            "port_xmit_data": 250_000,
            "port_rcv_data": 250_000,
            "port_xmit_packets": 50,
            "out_of_sequence": 7,
            "np_cnp_sent": 40,
        },
    }
    assert w["tcp_retrans"] == 2 and w["shared"] is False and w["rdma_ports_read"] == 2
    # An RDMA probe of 2 MB (port data counts 4-byte words) on mlx5_0/1, as intended.
    details = {
        "device": "mlx5_0",
        "port": 1,
        "peer": {"device": "mlx5_1", "port": 1},
        "counters": {"src": w, "dst": None, "probe_bytes": 2_000_000},
    }
    carried = counter_evidence.carried_by(details, "rdma")
    assert carried == {"src": "mlx5_0/1", "dst": None, "problem": None}
    # The same bytes when the probe meant mlx5_1: flagged.
    other = counter_evidence.carried_by({**details, "device": "mlx5_1"}, "rdma")
    assert other is not None and other["src"] == "mlx5_0/1"
    assert other["problem"] == "src: the bytes left through mlx5_0/1, not mlx5_1/1"
    # Sequence errors there: the path's tail is loss (counted even with the CNPs).
    c = counter_evidence.cause({**details, "carried_by": carried}, "a", "b")
    assert c is not None and c.kind == "loss" and "out_of_sequence 7 on a mlx5_0/1" in c.text


def test_rxe_has_packet_counts_only_and_they_bound_the_bytes(tmp_path: Path) -> None:
    _port(tmp_path, "rxe0", 1, "hw_counters", {"sent_pkts": 100, "rcvd_pkts": 100})
    _port(tmp_path, "rxe1", 1, "hw_counters", {"sent_pkts": 100, "rcvd_pkts": 100})
    before = _snap(tmp_path)
    _port(tmp_path, "rxe0", 1, "hw_counters", {"sent_pkts": 400, "rcvd_pkts": 400})
    _port(tmp_path, "rxe1", 1, "hw_counters", {"sent_pkts": 101, "rcvd_pkts": 100})
    w = counters.side(before, _snap(tmp_path))
    assert set(w["rdma"]) == {"rxe0/1", "rxe1/1"}
    details = {
        "device": "rxe1",
        "port": 1,
        "counters": {"src": w, "dst": None, "probe_bytes": 1_000_000},
    }
    carried = counter_evidence.carried_by(details, "rdma")
    # rxe1 moved 1 packet: it cannot have carried 1 MB; rxe0 moved 600 (<= 2.4 MB) and did.
    assert carried is not None and carried["src"] == "rxe0/1"
    assert carried["problem"] == "src: the bytes left through rxe0/1, not rxe1/1"


@pytest.mark.parametrize(
    ("window", "problem"),
    [
        ({"interfaces": {"eth0\x1b[31m": {"tx_bytes": 1}}}, "malformed name"),
        ({"interfaces": {"eth0": {"tx_bytes": -1}}}, "outside [0,"),
        ({"interfaces": {"eth0": {"tx_bytes": 1 << 70}}}, "outside [0,"),
        ({"interfaces": {"eth0": {"tx_bytes": "1"}}}, "must be an integer"),
        ({"interfaces": {"eth0": {"bad name": 1}}}, "malformed counter name"),
        ({"interfaces": {f"e{i}": {} for i in range(9)}}, "more than 8 entries"),
        ({"rdma": {"mlx5_0/1": {"np_cnp_sent": True}}}, "must be an integer"),
        ({"tcp_retrans": 2.5}, "must be an integer"),
        ({"shared": "yes"}, "must be true or false"),
    ],
)
def test_a_peers_counters_are_checked(window: dict[str, Any], problem: str) -> None:
    with pytest.raises(BadRequestError) as err:
        counters.checked({"src": window, "dst": None}, "probe.result.details.counters", "gpu01")
    assert problem in str(err.value) and "probe.result.details.counters.src" in str(err.value)


def test_tcp_info_counts_this_connections_retransmissions() -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname(), timeout=5)
        peer, _ = srv.accept()
        with client, peer:
            client.sendall(b"x" * 100_000)
            peer.recv(100_000)
            assert counters.tcp_retrans(client) == 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert counters.tcp_retrans(udp) is None


def test_ethtool_s_text_keeps_pause_counters_only() -> None:
    text = (
        "NIC statistics:\n     rx_packets: 12\n     rx_prio3_pause: 40\n"
        "     tx_pause_ctrl_phy: 2\n     rx_pfc_ena_frames_pri3: 7\n"
    )
    assert ethtool.parse_ethtool_s(text) == {
        "rx_prio3_pause": 40,
        "tx_pause_ctrl_phy": 2,
        "rx_pfc_ena_frames_pri3": 7,
    }


def test_a_host_with_many_busy_interfaces_keeps_the_largest_within_the_bound() -> None:
    busy = {f"veth{i:04d}": {f"rx_prio{k}_pause": 10**12 + k for k in range(32)} for i in range(8)}
    window = {"interfaces": busy, "rdma": {}, "tcp_retrans": 0, "shared": True}
    moved = counters.bounded({"src": dict(window), "dst": dict(window)})
    assert len(json.dumps(moved)) <= counters.MAX_JSON_CHARS
    assert moved["src"]["truncated"] is True
    assert next(iter(moved["src"]["interfaces"])) == "veth0000"
    # What the peer sends back passes its own check (truncated is part of the format).
    assert counters.checked(moved, "probe.result.details.counters", "gpu01")["src"]["truncated"]
    small = {"src": {"interfaces": {"lo": {"tx_bytes": 1}}, "rdma": {}}, "dst": None}
    assert counters.bounded(small) == small


def test_the_responders_snapshot_is_waited_for_within_the_probes_deadline() -> None:
    """A silent responder: counters.begin gives up when the probe's time is up (at most
    WAIT_S), never a fixed WAIT_S past a short --timeout."""
    import time as _time

    from netqual.agent.counters import ProbeWindow

    class Counting:
        def snapshot(self, sock: object) -> object:
            return object()

    class Silent:
        sock = None

        def __init__(self) -> None:
            self.timeouts: list[float] = []

        def set_timeout(self, s: float) -> None:
            self.timeouts.append(s)

        def request(self, kind: str, body: object) -> None:
            raise TimeoutError

    ch = Silent()
    w = ProbeWindow(Counting(), ch, tcp=False, deadline=_time.monotonic() + 1.0)  # type: ignore[arg-type]
    assert not w.remote
    assert 0 < ch.timeouts[0] <= 1.0
    ProbeWindow(Counting(), ch, tcp=False, deadline=_time.monotonic() - 3)  # type: ignore[arg-type]
    assert ch.timeouts[1] <= 0.05
    ProbeWindow(Counting(), ch, tcp=False)  # type: ignore[arg-type]
    assert ch.timeouts[2] == ProbeWindow.WAIT_S
