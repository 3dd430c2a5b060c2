"""What a path's engine cells say (netqual.analysis.engine): the NIC that carried them, a
fallback from what was asked, the ratio to the probe, the findings."""

from __future__ import annotations

import dataclasses

import pytest

from netqual.analysis import engine as judge
from netqual.model.engine import EngineCell, EngineEvidence, EngineName, EngineOp, EngineTransport
from netqual.model.path import PathResult
from netqual.model.policy import Policy
from netqual.model.stats import BulkStats
from netqual.model.verdict import Verdict

TCP, RDMA, SHM = EngineTransport.TCP, EngineTransport.RDMA, EngineTransport.SHM
MIB = 1 << 20


def test_the_carrier_moved_nine_tenths_of_the_bytes() -> None:
    assert judge.carrier({"eth1": 95 * MIB, "eth0": 2 * MIB}, 100 * MIB) == "eth1"
    assert judge.carrier({"eth1": 50 * MIB, "eth0": 50 * MIB}, 100 * MIB) is None
    assert judge.carrier({}, 100 * MIB) is None
    assert judge.carriers({"eth1": 50 * MIB, "eth0": 50 * MIB, "lo": 100}, 100 * MIB) == (
        "eth0",
        "eth1",
    )


@pytest.mark.parametrize(
    ("want", "got", "carried", "intended", "split", "expected"),
    [
        (TCP, TCP, "eth1", "eth1", (), None),
        (TCP, TCP, None, "eth1", (), None),  # no counters: nothing to hold against it
        (RDMA, TCP, "eth1", "eth1", (), "moved over tcp, not rdma (installed transport: tcp)"),
        (TCP, RDMA, None, None, (), "moved over rdma, not tcp (installed transport: tcp)"),
        (TCP, SHM, None, "eth1", (), "copied memory on one host, not over the network"),
        (TCP, TCP, "eth0", "eth1", (), "left through eth0, not the path's NIC eth1"),
        (TCP, TCP, None, "eth1", ("eth0", "eth1"), "split over eth0 and eth1"),
        (TCP, EngineTransport.UNKNOWN, None, "eth1", (), None),  # failed: the error says
    ],
)
def test_fallbacks_are_named_in_order_of_what_they_hide(
    want: EngineTransport,
    got: EngineTransport,
    carried: str | None,
    intended: str | None,
    split: tuple[str, ...],
    expected: str | None,
) -> None:
    found = judge.fallback(want, got, ("installed transport: tcp",), carried, intended, split)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.startswith(expected), found


def cell(op: EngineOp = EngineOp.READ, p50: float | None = 300.0, **over: object) -> EngineCell:
    base = EngineCell(
        EngineName.MOONCAKE, "0.3.13", op, MIB, 1, TCP, "eth1", 100, p50, 2 * (p50 or 0)
    )
    return dataclasses.replace(base, **over)  # type: ignore[arg-type]


BULK = (
    BulkStats(MIB, 1, 128, 40.0, 100.0, 150.0, 200.0),
    BulkStats(MIB, 8, 128, 60.0, 700.0, 900.0, 1000.0),
    BulkStats(64 << 10, 1, 128, 10.0, 20.0, 30.0, 40.0),
)


def test_vs_probe_is_the_p50_over_the_probes_p50_at_the_same_chunk_and_depth() -> None:
    assert judge.vs_probe(cell(), BULK) == pytest.approx(3.0)
    assert judge.vs_probe(cell(depth=8, completion_p50_us=1400.0), BULK) == pytest.approx(2.0)
    assert judge.vs_probe(cell(chunk_bytes=8 * MIB), BULK) is None  # no such probe cell
    assert judge.vs_probe(cell(p50=None), BULK) is None
    failed = (BulkStats(MIB, 1, 0, 0.0, 0.0, 0.0, 0.0, error="timed out"),)
    assert judge.vs_probe(cell(), failed) is None


def path_with(*cells: EngineCell) -> PathResult:
    return PathResult("a", "b", "tcp", Verdict.SAFE, (), bulk=BULK, engine=cells)


def test_a_slow_engine_is_a_finding_naming_the_ratio_and_its_likely_cause() -> None:
    slow = cell(vs_probe=4.2, evidence=EngineEvidence(claimed=("installed transport: tcp",)))
    found = judge.path_findings(path_with(slow, cell(op=EngineOp.WRITE, vs_probe=1.2)), Policy())
    assert [f.kind for f in found] == ["slow"]
    text = found[0].text
    assert "mooncake read) is 4.2x slower than the fabric here" in text
    assert "limit 3x): configuration" in text
    assert "the engine's own TCP path" in text
    assert found[0].subject == "a -> b"


def test_the_threshold_is_the_policys() -> None:
    slow = cell(vs_probe=4.2)
    assert judge.path_findings(path_with(slow), Policy(max_engine_vs_probe=5.0)) == ()


def test_fallbacks_and_failures_are_findings_and_the_cause_follows_the_evidence() -> None:
    fell = cell(fallback="split over eth0 and eth1, not the path's NIC alone", vs_probe=6.0)
    broke = cell(op=EngineOp.WRITE, error="initiator on a: worker silent", p50=None)
    found = judge.path_findings(path_with(fell, broke), Policy())
    assert [f.kind for f in found] == ["fallback", "slow", "failed"]
    assert "likely cause: split over eth0 and eth1" in found[1].text
    emulated = cell(
        name=EngineName.NIXL,
        evidence=EngineEvidence(claimed=("inter-node | 0..inf | software emulation | tcp/eth1",)),
    )
    assert "READ is emulated over TCP" in judge.likely_cause(emulated)
    fragments = cell(evidence=EngineEvidence(claimed=("0..inf | multi-frag zero-copy | tcp/eth1",)))
    assert "splits each 1MiB chunk into fragments" in judge.likely_cause(fragments)
