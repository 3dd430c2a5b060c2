"""What the engines say they used, read from their own words: UCX_PROTO_INFO tables (the
literal lines UCX 1.23 printed here, docs/engines.md) and Mooncake's log."""

from __future__ import annotations

from netqual.engines import mooncake, ucxinfo
from netqual.model.engine import EngineOp, EngineTransport

P = "[1796459162.357347] [vm:10524:0]   "
PINNED_TCP = f"""\
{P}+--------------------------------+---------------------------------------------------------+
{P}| nq-initiator-10524 inter-node cfg#1                                                      |
{P}| remote memory read by ucp_get*(multi) into host memory from host                        |
{P}+--------------------------------+---------------------------------------------------------+
{P}| 0..inf | software emulation | tcp/nqe-b0                         |
{P}+--------------------------------+---------------------------------------------------------+
{P}| nq-initiator-10524 inter-node cfg#1                                                      |
{P}| remote memory write by ucp_put* from host memory to host                                 |
{P}| 0..inf | zero-copy   | 50% on tcp/nqe-b0 and 50% on tcp/nqe-b1   |
"""
SAME_HOST = f"""\
{P}| nq-initiator-9992 intra-node cfg#1                                                       |
{P}| remote memory read by ucp_get*(multi) into host memory from host                         |
{P}| Range  | Description |                  Config                   |
{P}| 0..inf | zero-copy   | cma/memory                                |
"""
SELF = f"""\
{P}| nq-initiator-9992 self cfg#0                                                             |
{P}| remote memory write by ucp_put* from host memory to host                                 |
{P}| 0..inf | zero-copy | 50% on tcp/to-mgmt and 50% on tcp/to-rail0 |
"""
RDMA = f"""\
{P}| nq-initiator-77 inter-node cfg#2                                                         |
{P}| remote memory read by ucp_get* into host memory from host                                |
{P}| 0..8192 | short | rc_mlx5/mlx5_0:1 |
{P}| 8193..inf | multi-frag zero-copy | rc_mlx5/mlx5_0:1 |
"""


def test_the_lanes_of_each_operation_are_read_from_the_literal_tables() -> None:
    rows = ucxinfo.parse(PINNED_TCP)
    read = ucxinfo.rows_for(rows, EngineOp.READ)
    write = ucxinfo.rows_for(rows, EngineOp.WRITE)
    assert [(r.size_range, r.protocol, r.lanes) for r in read] == [
        ("0..inf", "software emulation", "tcp/nqe-b0")
    ]
    assert ucxinfo.lanes(read) == (("tcp", "nqe-b0"),)
    # unpinned: UCX split the WRITE over two interfaces, and says so
    assert ucxinfo.lanes(write) == (("tcp", "nqe-b0"), ("tcp", "nqe-b1"))
    assert read[0].scope == "inter-node"


def test_a_same_host_copy_is_shm_and_self_tables_are_not_the_peer() -> None:
    rows = ucxinfo.parse(SAME_HOST + SELF)
    assert [r.lanes for r in rows] == ["cma/memory"]  # the self table is NIXL's own loopback
    transport, _device = ucxinfo.lanes(rows)[0]
    assert ucxinfo.classify(transport) is EngineTransport.SHM


def test_transport_names_classify_as_the_wire_they_are() -> None:
    assert ucxinfo.classify("tcp") is EngineTransport.TCP
    for name in ("rc_mlx5", "rc_verbs", "ud_verbs", "ud_mlx5", "dc_mlx5"):
        assert ucxinfo.classify(name) is EngineTransport.RDMA, name
    for name in ("cma", "posix", "sysv", "xpmem", "knem"):
        assert ucxinfo.classify(name) is EngineTransport.SHM, name
    assert ucxinfo.classify("gibberish") is EngineTransport.UNKNOWN


def test_rdma_rows_keep_their_ranges_and_protocols() -> None:
    rows = ucxinfo.rows_for(ucxinfo.parse(RDMA), EngineOp.READ)
    assert [r.text() for r in rows] == [
        "inter-node | 0..8192 | short | rc_mlx5/mlx5_0:1",
        "inter-node | 8193..inf | multi-frag zero-copy | rc_mlx5/mlx5_0:1",
    ]
    assert ucxinfo.lanes(rows) == (("rc_mlx5", "mlx5_0:1"),)


def test_lines_without_tables_give_nothing() -> None:
    assert ucxinfo.parse("") == ()
    assert ucxinfo.parse("[1] [h:1:0] UCX WARN something\n| a | b | c |\n") == ()


MOONCAKE_TCP = """\
I0101 12:00:00.000001  4242 transfer_engine_impl.cpp:120] Topology discovery complete. Found 0 HCAs.
E0101 12:00:00.000002  4242 transfer_metadata.cpp:300] Local segment descriptor not found
I0101 12:00:00.000003  4242 tcp_transport.cpp:250] TcpTransport: listen on port 15588
"""
MOONCAKE_RDMA = """\
I0101 12:00:00.000001  4242 transfer_engine_impl.cpp:120] Topology discovery complete. Found 2 HCAs.
I0101 12:00:00.000002  4242 multi_transport.cpp:200] installTransport, type=rdma
"""
MOONCAKE_NO_RNIC = """\
I0101 12:00:00.000001  4242 config.cpp:10] MC_FORCE_HCA is set
E0101 12:00:00.000002  4242 rdma_transport.cpp:80] RdmaTransport: No available RNIC
E0101 12:00:00.000003  4242 multi_transport.cpp:210] Failed to install transport, type=rdma
"""


def test_mooncake_tcp_is_read_from_its_listen_line_and_the_benign_error_is_dropped() -> None:
    log = mooncake.parse_log(MOONCAKE_TCP)
    assert log.transports == ("tcp",)
    assert log.transport is EngineTransport.TCP
    assert log.hcas == 0
    assert log.errors == ()  # "Local segment descriptor not found" is printed on every start
    assert log.claimed() == ("installed transport: tcp", "RDMA devices found: 0")


def test_mooncake_rdma_is_read_from_install_transport() -> None:
    log = mooncake.parse_log(MOONCAKE_RDMA)
    assert log.transport is EngineTransport.RDMA
    assert log.hcas == 2


def test_mooncake_errors_are_kept_in_order() -> None:
    log = mooncake.parse_log(MOONCAKE_NO_RNIC)
    assert log.transport is EngineTransport.UNKNOWN
    assert log.errors == (
        "RdmaTransport: No available RNIC",
        "Failed to install transport, type=rdma",
    )
