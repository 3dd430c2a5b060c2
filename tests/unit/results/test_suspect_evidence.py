"""Typed suspect evidence (``netqual.model.suspects``, ``results.suspects_codec``): one record
per kind, the JSON form of results.json unchanged (files written before the types read
back), and a damaged entry rejected naming its field."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from factories import make_results
from railsdata import rail_results

from netqual.analysis.localise import suspects
from netqual.base.errors import ResultsFileError
from netqual.model.stats import Metric
from netqual.model.suspects import (
    EVIDENCE_OF,
    Cause,
    CauseKind,
    LinkEvidence,
    LinkSubject,
    NodeEvidence,
    NodeSubject,
    PathEvidence,
    Suspect,
    SuspectKind,
    with_cause,
)
from netqual.model.verdict import Verdict
from netqual.results import load, write_json
from netqual.results.suspects_codec import suspect_from_dict, suspect_to_dict

WORST = {"src": "a", "dst": "b", "verdict": "unsafe", "value_us": 812.0, "error": None}
SPREAD = {
    "metric": "p99",
    "bad_paths": 3,
    "paths": 4,
    "median_us": 700.0,
    "all_paths_median_us": 60.0,
    "worst": WORST,
}
# Entries as results.json held them before the types (the free dicts of 0d502da and the
# rails work): each must read back and write out unchanged, key order included.
OLD_ENTRIES: list[dict[str, Any]] = [
    {"kind": "node", "subject": "a", "evidence": SPREAD},
    {
        "kind": "node",
        "subject": "h2",
        "evidence": {
            **SPREAD,
            "counters": {"cause": "loss", "paths": 2, "example": "40 TCP retransmissions"},
            "nics": ["eth0", "eth1"],
        },
    },
    {"kind": "rack-pair", "subject": "r1<->r2", "evidence": {**SPREAD, "racks": ["r1", "r2"]}},
    {
        "kind": "link",
        "subject": "a->b",
        "evidence": {
            "metric": "p50",
            **WORST,
            "src_bad_elsewhere": 0,
            "src_paths_elsewhere": 5,
            "dst_bad_elsewhere": 1,
            "dst_paths_elsewhere": 5,
        },
    },
    {
        "kind": "asymmetry",
        "subject": "a<->b",
        "evidence": {
            "metric": "p99",
            "forward": WORST,
            "reverse": {**WORST, "src": "b", "dst": "a", "verdict": "offload-safe", "value_us": 40},
            "ratio": None,
        },
    },
    {
        "kind": "nic",
        "subject": "h3/eth1",
        "evidence": {
            **SPREAD,
            "node": "h3",
            "nic": "eth1",
            "rail": 1,
            "other_nics": [
                {"nic": "eth0", "rail": 0, "bad_paths": 0, "paths": 3, "median_us": 60.0},
                {"nic": "eth2", "rail": 2},
            ],
        },
    },
    {
        "kind": "rail",
        "subject": "rail 1",
        "evidence": {
            "metric": "p99",
            "rail": 1,
            "bad_nics": ["h1/eth1"],
            "nics": 2,
            "worst": WORST,
        },
    },
]


def _fix_order(entry: dict[str, Any]) -> dict[str, Any]:
    """The rack-pair's keys in the order localise always wrote them (racks second)."""
    if entry["kind"] != "rack-pair":
        return entry
    ev = entry["evidence"]
    return {**entry, "evidence": {"metric": ev["metric"], "racks": ev["racks"]} | ev}


@pytest.mark.parametrize("entry", OLD_ENTRIES, ids=lambda e: f"{e['kind']}-{e['subject']}")
def test_old_entries_read_typed_and_write_back_byte_for_byte(entry: dict[str, Any]) -> None:
    s = suspect_from_dict(entry)
    assert isinstance(s.evidence, EVIDENCE_OF[s.kind])
    wanted = _fix_order(entry)
    # an integer in an old file reads as a float and writes as one
    text = json.dumps(wanted).replace('"value_us": 40,', '"value_us": 40.0,')
    assert json.dumps(suspect_to_dict(s)) == text


def test_every_kind_a_run_finds_round_trips_through_results_json(tmp_path: Path) -> None:
    runs = [
        make_results(24, rack_size=4, slow_nodes=["gpu05"], slow_rack_pairs=[("r02", "r04")],
                     slow_paths=[("gpu01", "gpu14", 650.0)]),
        rail_results(4, slow={("h3", 1): 700.0}),
        rail_results(4, slow={(f"h{i}", 1): 700.0 for i in range(1, 5)}),
        rail_results(4, slow={("h2", 0): 700.0, ("h2", 1): 700.0}),
    ]  # fmt: skip
    seen: set[SuspectKind] = set()
    for i, run in enumerate(runs):
        r = dataclasses.replace(run, suspects=suspects(run))
        write_json(tmp_path / f"{i}.json", r)
        back = load(tmp_path / f"{i}.json")
        assert back.suspects == r.suspects
        seen |= {s.kind for s in r.suspects or ()}
    assert seen >= {SuspectKind.NODE, SuspectKind.RACK_PAIR, SuspectKind.LINK,
                    SuspectKind.NIC, SuspectKind.RAIL}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (["evidence", "bad_paths"], "3", "evidence.bad_paths: expected a non-negative integer"),
        (["evidence", "worst", "verdict"], "fine", "evidence.worst.verdict: unknown verdict"),
        (["evidence", "worst", "value_us"], "fast", "evidence.worst.value_us: expected a finite"),
        (["evidence", "metric"], "p95", "evidence.metric: unknown metric"),
        (["evidence", "worst"], None, "evidence.worst: expected an object"),
        (["evidence", "counters", "example"], 7, "evidence.counters.example: expected a string"),
        (["evidence", "nics"], "eth0", "evidence.nics: expected a list of strings"),
    ],
)
def test_a_damaged_entry_names_its_field(path: list[str], value: object, words: str) -> None:
    entry = copy.deepcopy(OLD_ENTRIES[1])
    target = entry
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        suspect_from_dict(entry)


def test_a_results_file_with_a_damaged_suspect_exits_2_naming_it(tmp_path: Path) -> None:
    r = make_results(16, rack_size=4, slow_nodes=["gpu03"])
    write_json(tmp_path / "r.json", dataclasses.replace(r, suspects=suspects(r)))
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["suspects"][0]["evidence"]["worst"]["src"] = 5
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError) as info:
        load(tmp_path / "r.json")
    assert info.value.exit_code == 2
    assert "suspects[0]" in str(info.value) and "evidence.worst.src" in str(info.value)


def test_a_suspect_holds_the_evidence_and_subject_of_its_kind_and_a_cause_where_it_fits() -> None:
    worst = PathEvidence("a", "b", Verdict.UNSAFE, 812.0, None)
    node = NodeEvidence(Metric.P99, 3, 4, 700.0, 60.0, worst)
    with pytest.raises(TypeError, match="a link suspect needs LinkEvidence"):
        Suspect(SuspectKind.LINK, LinkSubject("a", "b"), node)
    with pytest.raises(TypeError, match="a node suspect names a NodeSubject"):
        Suspect(SuspectKind.NODE, LinkSubject("a", "b"), node)
    cause = Cause(CauseKind.LOSS, 2, "40 TCP retransmissions", 3)
    counted = with_cause(Suspect(SuspectKind.NODE, NodeSubject("a"), node), cause)
    assert isinstance(counted.evidence, NodeEvidence) and counted.evidence.cause == cause
    assert counted.subject == "a" and counted.about.nodes == ("a",)
    rail = suspect_from_dict(OLD_ENTRIES[-1])
    with pytest.raises(TypeError, match="has no cause"):
        with_cause(rail, cause)
    assert isinstance(suspect_from_dict(OLD_ENTRIES[3]).evidence, LinkEvidence)


def test_the_localisation_and_the_contrasts_go_through_the_file(tmp_path: Path) -> None:
    """What each suspect was judged on (``contrast``: its level, its peers', the ratio and
    the run's repeatability) and the run-wide ``localisation`` read back as written; a
    file without them still loads (older runs), a damaged one names the field."""
    from netqual.analysis.localise import localisation

    run = make_results(16, rack_size=4, slow_nodes=["gpu03"])
    found, loc = localisation(run)
    r = dataclasses.replace(run, suspects=found, localisation=loc)
    write_json(tmp_path / "r.json", r)
    back = load(tmp_path / "r.json")
    assert back.suspects == found and back.localisation == loc
    (node,) = [s for s in found if s.kind is SuspectKind.NODE]
    assert isinstance(node.evidence, NodeEvidence) and node.evidence.contrast is not None
    assert node.evidence.contrast.threshold == loc.repeatability.ratio
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["localisation"]["repeatability"]["measures"][0]["ratio"] = 0.5
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError) as info:
        load(tmp_path / "bad.json")
    assert "localisation.repeatability.measures[0].ratio" in str(info.value)
