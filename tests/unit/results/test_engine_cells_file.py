"""A path's engine cells in the results file and in results.jsonl: written with the keys
docs/results.md lists, read back as the same records, schema-valid, hostile values
refused by field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from factories import make_results, write_results

from netqual.base.errors import ResultsFileError
from netqual.model.engine import EngineCell, EngineEvidence, EngineName, EngineOp, EngineTransport
from netqual.results import journal, load
from netqual.results.encode import path_to_dict
from netqual.table.run import Results

CONTRACT_KEYS = {
    "name", "version", "transport", "device", "chunk_bytes", "depth", "op", "completion_us",
    "goodput_gbps", "first_op_us", "vs_probe", "fallback",
}  # fmt: skip


def cells() -> tuple[EngineCell, ...]:
    ev = EngineEvidence(
        claimed=("installed transport: tcp",), carried_by="to-sw", peer_carried_by="to-sw",
        intended="to-sw", peer_intended="to-sw", bytes_moved=14 << 20,
        settings=("initialize(198.18.1.10, P2PHANDSHAKE, tcp, device filter none)",),
        start_s=0.41, peer_start_s=0.52, connect_us=None, data_ok=True,
    )  # fmt: skip
    read = EngineCell(
        EngineName.MOONCAKE, "mooncake-transfer-engine-non-cuda 0.3.13.post1", EngineOp.READ,
        65536, 1, EngineTransport.TCP, "to-sw", 200, 28.125, 5116.5, 4.66, 23766.2, 1.7,
        None, None, ev,
    )  # fmt: skip
    write = dataclasses.replace(read, op=EngineOp.WRITE, fallback="left through eth0, not eth1")
    failed = EngineCell(
        EngineName.MOONCAKE, None, EngineOp.READ, 65536, 8, EngineTransport.UNKNOWN, None,
        error="initiator on h1: worker silent past its deadline: killed (last phase: connect)",
    )  # fmt: skip
    return (read, write, failed)


def with_engine(results: Results) -> Results:
    first = results.paths.key(0)
    return dataclasses.replace(results, paths=results.paths.with_engine({first: cells()}))


def test_cells_round_trip_through_results_json_with_the_contract_keys(tmp_path: Path) -> None:
    results = with_engine(make_results(4))
    doc = json.loads(write_results(tmp_path / "results.json", results).read_text())
    first = doc["paths"][0]["engine"]
    assert [c["op"] for c in first] == ["read", "write", "read"]
    for c in first:
        assert c.keys() >= CONTRACT_KEYS
        assert set(c["completion_us"]) == {"p50", "p99"}
    assert first[0]["completion_us"] == {"p50": 28.125, "p99": 5116.5}
    assert first[0]["vs_probe"] == 1.7 and first[1]["fallback"].startswith("left through")
    assert "engine" not in doc["paths"][1]  # a path without cells has no key
    back = load(tmp_path / "results.json")  # schema-checked on the way
    assert back.paths.row(0).engine == cells()
    assert back.paths.row(1).engine == ()


def test_cells_are_journalled_and_read_back(tmp_path: Path) -> None:
    results = make_results(4)
    path = results.paths.row(0)
    jsonl = tmp_path / "results.jsonl"
    with jsonl.open("w") as out:
        journal.append_path(out, path)
        journal.append_engine(out, path.key, cells())
    held = journal.read(jsonl)
    assert held.engine == {path.key: cells()}
    table = journal.measured_paths(held.done, held.pending, engine=held.engine)
    assert table.row(0).engine == cells()


@pytest.mark.parametrize(
    ("cell", "problem"),
    [
        ({"op": "delete"}, "op"),
        ({"transport": "carrier-pigeon"}, "transport"),
        ({"chunk_bytes": 0}, "chunk_bytes"),
        ({"completion_us": {"p50": -1, "p99": 2}}, "p50"),
        ({"vs_probe": -2.0}, "vs_probe"),
        ({"fallback": "x" * 5000}, "fallback"),
    ],
)
def test_a_hostile_cell_in_a_results_file_is_refused_by_field(
    tmp_path: Path, cell: dict[str, object], problem: str
) -> None:
    results = make_results(3)
    doc = json.loads(write_results(tmp_path / "results.json", results).read_text())
    good = path_to_dict(with_engine(results).paths.row(0))["engine"][0]
    doc["paths"][0]["engine"] = [{**good, **cell}]
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError) as caught:
        load(tmp_path / "bad.json")
    assert problem in str(caught.value)
