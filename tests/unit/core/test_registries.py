"""One definition each: the percentile registry, "worst first", the node order, the
microsecond format that every output shares, and the transports registry."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from factories import make_results, rank_key

from netqual.agent.probe_request import PeerRef, ProbeRequest
from netqual.analysis.matrix import STATISTICS, build_matrix
from netqual.analysis.stats import rtt_stats
from netqual.base.choices import ChoiceError, parse_choice
from netqual.base.errors import UsageError
from netqual.base.units import format_us
from netqual.model.limits import AgentLimits
from netqual.model.node import Node, Role
from netqual.model.path import PathResult
from netqual.model.plan import ProbePlan
from netqual.model.stats import RTT_FIELDS, RTT_STATISTICS, Metric, RttStats
from netqual.model.verdict import Verdict
from netqual.report.fmt import us
from netqual.report.grid import report_nodes
from netqual.table.columns import RttColumns
from netqual.table.paths import PathTable
from netqual.transports import TransportKind, TransportOptions, get_transport
from netqual.transports.rdma import RdmaOptions
from netqual.transports.rdma.transport import RdmaTransport
from netqual.transports.tcp import TcpTransport


def test_every_metric_names_its_quantile_and_field() -> None:
    rtt = rtt_stats(np.arange(1, 20_001, dtype=np.int64) * 1000)  # 1..20000 us
    assert {f.name for f in dataclasses.fields(RttStats)} >= {m.field for m in Metric}
    for m in Metric:
        assert rtt.value(m) == getattr(rtt, m.field) == rtt.statistic(m.value)
        # numpy type 7 over 1..n: the q quantile sits at 1 + q * (n - 1)
        assert rtt.value(m) == pytest.approx(1 + m.quantile * 19_999)
    assert [m.value for m in Metric] == [n for n in RTT_STATISTICS if n.startswith("p")]
    assert set(STATISTICS) >= set(RTT_STATISTICS)


def test_every_rtt_statistic_names_its_field_once() -> None:
    """RTT_FIELDS is the one name -> field rule: RttStats, the path table's RTT columns and
    the percentiles (Metric.field) all hold it."""
    assert list(RTT_FIELDS) == list(RTT_STATISTICS)
    record = {f.name for f in dataclasses.fields(RttStats)}
    columns = {f.name for f in dataclasses.fields(RttColumns)}
    assert set(RTT_FIELDS.values()) <= record & columns
    assert all(m.field == RTT_FIELDS[m.value] for m in Metric)
    rtt = rtt_stats(np.arange(1, 1001, dtype=np.int64) * 1000)
    table = PathTable.from_paths([PathResult("a", "b", "tcp", Verdict.SAFE, (), rtt)])
    for name, field in RTT_FIELDS.items():
        assert table.rtt[name][0] == rtt.statistic(name) == getattr(rtt, field)


def test_rank_key_puts_class_before_speed_and_no_samples_last_in_its_class() -> None:
    base = make_results(4, seed=3, all_safe=True).paths[0]
    rtt0 = base.rtt
    assert rtt0 is not None

    def path(verdict: Verdict, p99_us: float | None) -> PathResult:
        rtt = None if p99_us is None else dataclasses.replace(rtt0, p99_us=p99_us)
        return dataclasses.replace(base, verdict=verdict, rtt=rtt)

    slow_safe, fast_unsafe = path(Verdict.SAFE, 450.0), path(Verdict.UNSAFE, 5.0)
    failed, marginal = path(Verdict.UNSAFE, None), path(Verdict.MARGINAL, 300.0)
    ranked = sorted(
        [slow_safe, failed, marginal, fast_unsafe],
        key=lambda p: rank_key(p, Metric.P99),
        reverse=True,
    )
    assert ranked == [failed, fast_unsafe, marginal, slow_safe]
    # ranked by the metric asked for: p50 is untouched by the edited p99
    assert rank_key(slow_safe, Metric.P50) == (0, rtt0.p50_us)


def test_terminal_and_report_order_nodes_alike() -> None:
    res = make_results(8, seed=1, rack_size=4, storage_every=2)
    assert {n.name for n in res.nodes} >= {"gpu01", "stor01", "gpu04", "stor04"}
    nodes = [
        *(n for n in res.nodes if n.name != "gpu04"),  # gpu04: only in paths (hand-edited)
        Node("zz-unracked", "10.9.0.1"),
        Node("aa-unracked", "10.9.0.2", role=Role.STORAGE),
        Node("far01", "10.8.0.1", rack="r01", labels={"site": "b"}),
    ]
    res = dataclasses.replace(res, nodes=tuple(reversed(nodes)))
    terminal = build_matrix(res.nodes, res.paths, STATISTICS["p99"].value).names
    report = tuple(n.name for n in report_nodes(res))
    assert terminal == report
    # racks together, storage after compute inside a rack, unracked last, other site after
    assert report[:4] == ("gpu01", "gpu02", "stor01", "stor02")
    assert report[-4:] == ("gpu04", "zz-unracked", "aa-unracked", "far01")


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (3.414, "3.41"), (48.25, "48.2"), (812.0, "812.0"), (1250.4, "1,250")],
)
def test_one_microsecond_format(value: float | None, text: str) -> None:
    assert format_us(value) == text
    assert us(value) == (text if value is None else f"{text} us")


def test_transports_are_built_by_the_registry_from_typed_options() -> None:
    with pytest.raises(UsageError, match=r"unknown transport 'udp' \(tcp or rdma\)"):
        TransportKind.parse("udp")
    assert isinstance(get_transport("tcp"), TcpTransport)
    # a run's options travel in the probe request (a typed field) and win over the agent's
    run_opts = TransportOptions.from_flags(gid_index=3)
    own = TransportOptions.from_flags("mlx5_0", 1)
    sent = ProbeRequest(PeerRef("gpu02", "127.0.0.1", 1), "rdma", ProbePlan(), options=run_opts)
    got = ProbeRequest.decode(json.loads(json.dumps(sent.to_body())), AgentLimits(), "coord")
    assert got == sent
    assert (
        ProbeRequest.decode(
            {k: v for k, v in sent.to_body().items() if k != "options"}, AgentLimits(), "coord"
        ).options
        == TransportOptions()
    )
    t = get_transport(TransportKind.RDMA, node_name="gpu01", options=own, run=got.options)
    assert isinstance(t, RdmaTransport)
    assert t.options == RdmaOptions(device="mlx5_0", port=1, gid_index=3)
    assert t.peer_options == RdmaOptions(gid_index=3)
    assert t.node_name == "gpu01"
    plain = get_transport("rdma", node_name="gpu02", options=own)
    assert isinstance(plain, RdmaTransport)
    assert (plain.options, plain.peer_options) == (own.rdma, None)


def test_parse_choice_names_the_field_and_lists_the_enum_values() -> None:
    assert parse_choice(Metric, "p999", "policy.metric") is Metric.P999
    with pytest.raises(ChoiceError) as got:
        parse_choice(Metric, "p95", "policy.metric")
    assert got.value.where == "policy.metric"
    assert got.value.problem == "unknown metric 'p95' (p50, p90, p99 or p999)"
    with pytest.raises(ChoiceError, match=r"unknown role 'gpu' \(compute, storage or any\)"):
        parse_choice(Role, "gpu", "node[0].role")
