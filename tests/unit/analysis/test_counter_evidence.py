"""What a path's counters say (netqual.analysis.counter_evidence): carried_by, the cause of a tail,
two phases merged, and the order of 'What to do' (docs/evidence.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from factories import make_results

from netqual.analysis import counter_evidence
from netqual.model.fleet import FleetOutlier, FleetResult
from netqual.model.plan import ProbePlan
from netqual.render.terminal import suspect_line
from netqual.report.recommend import recommend
from netqual.results.suspects_codec import suspect_from_dict
from netqual.table.paths import PathTable


def test_pause_frames_on_one_side_point_at_that_node_unless_shared() -> None:
    pause = {
        "eth2": {
            "tx_bytes": 10,
            "rx_bytes": 10,
            "tx_packets": 1,
            "rx_packets": 1,
            "rx_prio3_pause": 812,
        }
    }
    quiet: dict[str, Any] = {"interfaces": {}, "rdma": {}, "tcp_retrans": 0, "shared": False}
    details = {"counters": {"src": quiet, "dst": {**quiet, "interfaces": pause}}}
    c = counter_evidence.cause(details, "gpu01", "stor01")
    assert c is not None and c.kind == "congestion" and c.node == "stor01"
    assert c.text == "rx_prio3_pause 812 on stor01 eth2"
    shared = {"counters": {"src": quiet, "dst": {**quiet, "interfaces": pause, "shared": True}}}
    assert counter_evidence.cause(shared, "gpu01", "stor01") is None


def test_rdma_asked_but_only_an_ip_interface_moved_is_flagged_as_tcp() -> None:
    ifs = {"eth0": {"tx_bytes": 600_000, "rx_bytes": 600_000, "tx_packets": 900, "rx_packets": 900}}
    side = {
        "interfaces": ifs,
        "rdma": {},
        "tcp_retrans": None,
        "shared": False,
        "rdma_ports_read": 1,
    }
    moved: dict[str, Any] = {"src": side, "dst": None, "probe_bytes": 1_000_000}
    details: dict[str, Any] = {"device": "mlx5_0", "port": 1, "counters": moved}
    carried = counter_evidence.carried_by(details, "rdma")
    assert carried is not None and carried["src"] == "eth0"
    assert (
        "no RDMA port moved the bytes; IP interface eth0 did (TCP, not RDMA)" in carried["problem"]
    )
    # A host whose RDMA counters cannot be read says nothing either way.
    blind = {**details, "counters": {**moved, "src": {**side, "rdma_ports_read": 0}}}
    assert counter_evidence.carried_by(blind, "rdma") == {"src": None, "dst": None, "problem": None}


def test_phases_add_up() -> None:
    a = {
        "probe_bytes": 10,
        "src": {
            "interfaces": {"lo": {"tx_bytes": 5, "rx_bytes": 5}},
            "rdma": {},
            "tcp_retrans": 1,
            "shared": False,
        },
        "dst": None,
    }
    b = {
        "probe_bytes": 30,
        "src": {
            "interfaces": {"lo": {"tx_bytes": 20, "rx_bytes": 20}, "eth0": {"tx_bytes": 1}},
            "rdma": {},
            "tcp_retrans": None,
            "shared": True,
        },
        "dst": None,
    }
    m = counter_evidence.merge(a, b)
    assert m["probe_bytes"] == 40 and m["dst"] is None
    assert m["src"]["interfaces"] == {
        "lo": {"tx_bytes": 25, "rx_bytes": 25},
        "eth0": {"tx_bytes": 1},
    }
    assert m["src"]["tcp_retrans"] == 1 and m["src"]["shared"] is True


def test_probe_bytes_count_both_directions_and_every_bulk_cell() -> None:
    plan = ProbePlan(
        iterations=1000, warmup=100, size_bytes=64, chunks_bytes=(65536,), depths=(1, 8)
    )
    reads = plan.reads_for(65536)
    assert counter_evidence.probe_bytes(plan) == 2 * 1100 * 64 + 2 * reads * 65536


def test_tcp_bytes_on_another_nic_than_the_inventory_names_are_flagged() -> None:
    moved = {"tx_bytes": 700_000, "rx_bytes": 700_000, "tx_packets": 1000, "rx_packets": 1000}
    side = {"interfaces": {"eth0": moved}, "rdma": {}, "tcp_retrans": 0, "shared": False}
    details = {"counters": {"src": side, "dst": side, "probe_bytes": 1_000_000}}
    carried = counter_evidence.carried_by(details, "tcp", "eth1", "eth0")
    assert carried == {
        "src": "eth0",
        "dst": "eth0",
        "problem": "src: the bytes left through eth0, not eth1",
    }
    c = counter_evidence.cause({**details, "carried_by": carried}, "gpu01", "gpu02")
    assert c is not None and c.kind == "routing"
    # Without NICs in the inventory nothing is intended, so nothing is flagged.
    assert counter_evidence.carried_by(details, "tcp") == {
        "src": "eth0",
        "dst": "eth0",
        "problem": None,
    }


def test_what_to_do_names_configuration_then_the_counters_then_the_hardware() -> None:
    results = make_results(8, slow_nodes=["gpu03"], bulk=False)
    lossy = {"tx_bytes": 9_000, "rx_bytes": 9_000, "tx_packets": 1_000, "rx_packets": 1_000}
    side = {"interfaces": {"eth0": lossy}, "rdma": {}, "tcp_retrans": 40, "shared": False}
    moved = {"counters": {"src": side, "dst": side, "probe_bytes": 1}}
    rows = [results.paths.row(i) for i in range(len(results.paths))]
    rows = [replace(p, details=moved) if "gpu03" in (p.src, p.dst) else p for p in rows]
    outlier = FleetOutlier("gpu03", "mtu", "1400", majority="9000", majority_nodes=("gpu01",))
    results = replace(
        results,
        paths=PathTable.from_paths(rows, results.paths.names),
        fleet=FleetResult((), (outlier,)),
    )
    titles = [r.title for r in recommend(results)]
    config = titles.index("Fix the configuration of gpu03 first")
    loss = next(i for i, t in enumerate(titles) if t.startswith("Packet loss behind the tail"))
    hardware = titles.index("Keep gpu03 on local NVMe")
    assert config < loss < hardware, titles
    text = recommend(results)[loss].text
    assert "80 TCP retransmissions" in text and "gpu01 -> gpu02" not in text


def test_a_hostile_name_in_a_results_file_reaches_the_terminal_escaped() -> None:
    ev = {"metric": "p99", "src": "a", "dst": "b", "verdict": "unsafe", "value_us": 900.0,
          "error": None, "src_bad_elsewhere": 0, "src_paths_elsewhere": 1,
          "dst_bad_elsewhere": 0, "dst_paths_elsewhere": 1,
          "counters": {"cause": "congestion", "paths": 1,
                       "example": "rx_prio3_pause 4 on b eth0\x1b[2J\x07"}}  # fmt: skip
    line = suspect_line(suspect_from_dict({"kind": "link", "subject": "a->b", "evidence": ev}))
    assert "\x1b" not in line and "\x07" not in line
    assert line.endswith("; counters: congestion (rx_prio3_pause 4 on b eth0\\x1b[2J\\x07)")
