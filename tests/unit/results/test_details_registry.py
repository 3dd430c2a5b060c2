"""A path's ``details`` keys come from one registry (netqual/model/details.py): every key
the code writes by name is in it and every key in it is written somewhere; reading a
results file checks each known key's type (a wrong one names the file and the field) and
keeps the keys it does not know; docs/results.md's table lists exactly the registry's keys.
The keys real probes write are held to it in tests/unit/transports/test_details_keys.py."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run_in_process
from factories import make_results, write_results

from netqual.agent.probe_request import ProbeResult
from netqual.base.errors import BadRequestError, ResultsFileError
from netqual.model.details import DETAILS, Key, Value, docs_table, unregistered, walk
from netqual.model.plan import ProbePlan
from netqual.results import journal, load, results_to_dict

ROOT = Path(__file__).parents[3]
DOCS = ROOT / "docs" / "results.md"
DATA = ROOT / "tests" / "data" / "demo-lab" / "results.json"


def _is_details(node: ast.expr) -> bool:
    """``details``, ``x.details``, ``dict(x.details)``, ``details["counters"]``."""
    if isinstance(node, ast.Call) and node.args:
        return _is_details(node.args[0])
    if isinstance(node, ast.Subscript):
        return _is_details(node.value)
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name.endswith("details")


def _constant(node: ast.expr | None) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value


def _keys(d: ast.Dict) -> Iterator[str]:
    for k in d.keys:
        yield from _constant(k)


def written_keys(tree: ast.AST) -> Iterator[str]:
    """Every key a module writes into a details mapping by name: ``details["k"] = ...``,
    ``{**x.details, "k": ...}``, a dict literal bound to ``details`` (a variable, a keyword,
    a ``"details"`` key) or returned by a function named ``*details``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and _is_details(t.value):
                    yield from _constant(t.slice)
                bound = isinstance(t, ast.Name) and t.id == "details"
                if bound and isinstance(node.value, ast.Dict):
                    yield from _keys(node.value)
        elif isinstance(node, ast.keyword) and node.arg == "details":
            if isinstance(node.value, ast.Dict):
                yield from _keys(node.value)
        elif isinstance(node, ast.Dict):
            spread = [v for k, v in zip(node.keys, node.values, strict=True) if k is None]
            if any(_is_details(v) for v in spread):
                yield from _keys(node)
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "details" and isinstance(v, ast.Dict):
                    yield from _keys(v)
        elif isinstance(node, ast.FunctionDef) and node.name.endswith("details"):
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict):
                    yield from _keys(ret.value)


def _sources() -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted((ROOT / "netqual").rglob("*.py")):
        if path.name != "details.py" or path.parent.name != "model":
            yield path, ast.parse(path.read_text(), str(path))


def test_every_key_the_code_writes_by_name_is_registered() -> None:
    names = {key.name for _, key in walk()}  # at any depth: the responder's ``peer`` too
    found: dict[str, set[str]] = {}
    for path, tree in _sources():
        for k in written_keys(tree):
            found.setdefault(k, set()).add(str(path.relative_to(ROOT)))
    assert {k: sorted(v) for k, v in found.items() if k not in names} == {}
    # the scan sees the writers it must (transports, agent, coordinator, journal)
    assert set(found) >= {
        "tcp_nodelay", "size_bytes", "device", "gid_reason", "pingpong_method", "node",
        "responder_rounds", "counters", "initiator", "carried_by", "forward_hops",
        "phase_windows_s", "pingpong_counters", "bulk_pairs", "pending", "probe_bytes",
    }, sorted(found)  # fmt: skip


def test_every_registered_key_is_written_somewhere() -> None:
    """No key left in the registry (and the docs) after its writer went."""
    texts: set[str] = set()
    for _, tree in _sources():
        texts |= {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
    assert [name for name, key in walk() if key.name not in texts] == []


def test_docs_list_every_details_key_and_no_other() -> None:
    section = DOCS.read_text().split("### A path's details", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows == docs_table().splitlines()
    documented = [m[1] for line in rows[2:] if (m := re.match(r"\| `([a-z0-9_.]+)` \|", line))]
    assert documented == [name for name, _ in walk()]
    assert len(documented) == len(rows) - 2


def test_every_key_has_a_unit_and_a_meaning_and_objects_their_keys() -> None:
    words = {Value.TEXT: "text", Value.FLAG: "flag", Value.OBJECT: "object"}
    for name, key in walk():
        assert key.meaning and "|" not in key.unit, name
        if key.value in words:
            assert key.unit == words[key.value], name
        assert not (key.keys and key.each), name  # an object has keys or is a map
        if key.unit in ("bytes", "s", "ns"):  # a measure: its name says its unit
            assert f"_{key.unit}" in name, name


def test_unregistered_names_unknown_keys_at_every_declared_level() -> None:
    details = {
        "size_bytes": 64,
        "simulated": True,
        "counters": {"src": {"tcp_retrans": 0, "new_counter": 1}, "probe_bytes": 1},
        "bulk_depth_effective": {"8": 8},  # a map: its names vary
    }
    assert unregistered(details) == ["simulated", "counters.src.new_counter"]


# -- reading results files ----------------------------------------------------------------------


def _doc(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    return json.loads(DATA.read_text()), tmp_path / "results.json"


@pytest.mark.parametrize(
    ("key", "value", "field", "problem"),
    [
        ("counters", "lo", "details.counters", "expected object, got string"),
        ("size_bytes", 1.5, "details.size_bytes", "expected integer, got number"),
        ("tcp_nodelay", 1, "details.tcp_nodelay", "expected boolean, got integer"),
        ("carried_by", {"src": 3}, "details.carried_by.src",
         "expected string or null, got integer"),
        ("phase_windows_s", {"bulk": [1.0, "x"]}, "details.phase_windows_s.bulk[1]",
         "expected number, got string"),
        ("forward_hops", -1, "details.forward_hops", "expected integer, at the minimum of 0"),
    ],
)  # fmt: skip
def test_a_known_key_of_the_wrong_type_names_the_file_and_the_field(
    tmp_path: Path, key: str, value: object, field: str, problem: str
) -> None:
    doc, path = _doc(tmp_path)
    doc["paths"][3]["details"][key] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError) as caught:
        load(path)
    assert str(caught.value) == f"{path}: paths[3].{field}: {problem}"


def test_a_nested_counter_of_the_wrong_type_names_its_field(tmp_path: Path) -> None:
    doc, path = _doc(tmp_path)
    doc["paths"][0]["details"]["counters"]["dst"]["shared"] = "no"
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError, match=r"paths\[0\]\.details\.counters\.dst\.shared: "):
        load(path)


def test_the_commands_stop_with_exit_2_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, path = _doc(tmp_path)
    doc["paths"][1]["details"]["counters"] = [1, 2]
    path.write_text(json.dumps(doc))
    r = run_in_process(["report", str(path)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 2
    assert "results.json: paths[1].details.counters: expected object, got array" in r.stderr


def test_a_journal_line_of_the_wrong_type_names_its_line(tmp_path: Path) -> None:
    res = make_results(2)
    path = tmp_path / "results.jsonl"
    with path.open("w") as f:
        journal.append_path(f, res.paths[0])
    line = json.loads(path.read_text())
    line["details"] = {"bulk_wave_pairs": "8"}
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n" + json.dumps(line) + "\n")  # not the torn last one
    with pytest.raises(ResultsFileError) as caught:
        journal.read(path)
    assert str(caught.value).endswith(
        "line 2.details.bulk_wave_pairs: expected integer, got string"
    )


def test_unknown_keys_are_kept_as_read_and_written_back(tmp_path: Path) -> None:
    doc, path = _doc(tmp_path)
    newer = {"from_a_newer_netqual": {"x": [1, "two"]}, "size_bytes": 64}
    doc["paths"][2]["details"].update(newer)
    doc["paths"][2]["details"]["counters"]["src"]["new_counter_group"] = {"q": 1}
    path.write_text(json.dumps(doc))
    res = load(path)
    got = res.paths.details[2]
    assert got is not None
    assert got == doc["paths"][2]["details"]
    written = results_to_dict(res)["paths"][2]["details"]
    assert written["from_a_newer_netqual"] == {"x": [1, "two"]}
    assert written["counters"]["src"]["new_counter_group"] == {"q": 1}


def test_files_written_before_the_registry_load_their_details_unchanged(tmp_path: Path) -> None:
    """The demo-lab run (tests/data, an older version's file) and the factories' files."""
    doc = json.loads(DATA.read_text())
    res = load(DATA)
    assert [res.paths.details[i] for i in range(len(res.paths))] == [
        p["details"] or None for p in doc["paths"]
    ]
    made = write_results(tmp_path / "results.json", make_results(6))
    assert len(load(made).paths) == 15


def test_the_registry_is_keyed_by_name() -> None:
    assert list(DETAILS) == [k.name for k in DETAILS.values()]
    assert all(isinstance(k, Key) for k in DETAILS.values())


# -- an agent's probe result -------------------------------------------------------------------


def _result(details: dict[str, Any]) -> ProbeResult:
    body = {"responder_agent": "gpu02", "rtt_count": 0, "bulk": [], "details": details}
    return ProbeResult.decode(body, ProbePlan(), "gpu01")


@pytest.mark.parametrize(
    ("details", "problem"),
    [
        ({"size_bytes": True}, "size_bytes: expected integer >= 0"),
        ({"peer": {"port": "1"}}, "peer.port: expected integer >= 0"),
        ({"phase_windows_s": {"bulk": [1.0, "x"]}},
         "phase_windows_s.bulk[1]: expected number (an item of phase_windows_s.bulk)"),
        ({"carried_by": {"problem": 0}}, "carried_by.problem: expected string or null"),
    ],
)  # fmt: skip
def test_an_agents_details_of_the_wrong_type_are_a_bad_request(
    details: dict[str, Any], problem: str
) -> None:
    """Checked where they arrive, so that no run writes a results file it cannot read."""
    with pytest.raises(BadRequestError) as caught:
        _result(details)
    assert str(caught.value) == f"gpu01: probe.result.details.{problem}"


def test_an_agents_unknown_details_are_kept() -> None:
    details = {"from_a_newer_agent": {"x": [1]}, "size_bytes": 64, "peer": {"gpu": "GPU0"}}
    assert _result(details).details == details
