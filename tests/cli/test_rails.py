"""Rails (docs/rails.md): NICs in the inventory, the per-NIC plan, per-path NIC fields."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cli_helpers import run_in_process
from railsdata import rail_results

from netqual.analysis.multirail import judge
from netqual.base.errors import InventoryError, UsageError
from netqual.model.multirail import RailLevel
from netqual.model.node import Nic, Node, node_nics
from netqual.model.path import PathResult
from netqual.model.run import Mode
from netqual.model.suspects import NicEvidence, RailEvidence
from netqual.model.verdict import Verdict
from netqual.planning.inventory import load_inventory
from netqual.planning.rails import (
    Rails,
    build,
    default_rails,
    rail_plans,
    split_endpoint,
)
from netqual.render.console import LiteralConsole
from netqual.render.terminal import print_results
from netqual.results import load, write_json
from netqual.table.paths import PathTable
from netqual.table.run import Results


def _node(i: int, rails: int = 2) -> str:
    nics = ", ".join(
        f'{{ name = "eth{r}", address = "198.18.{10 + r}.{i}", device = "mlx5_{r}", rail = {r} }}'
        for r in range(rails)
    )
    return f'[[node]]\nname = "h{i}"\naddress = "198.18.0.{i}"\nnics = [{nics}]\n'


def _inventory(tmp_path: Path, n: int = 4, rails: int = 2, extra: str = "") -> Path:
    path = tmp_path / "inv.toml"
    path.write_text("\n".join(_node(i, rails) for i in range(1, n + 1)) + extra)
    return path


def test_nics_are_read_with_their_rails(tmp_path: Path) -> None:
    inv = load_inventory(_inventory(tmp_path, 2))
    assert inv.node("h1").nics == (
        Nic("eth0", "198.18.10.1", 0, "mlx5_0"),
        Nic("eth1", "198.18.11.1", 1, "mlx5_1"),
    )
    assert default_rails(inv.nodes) is Rails.SAME


@pytest.mark.parametrize(
    ("nics", "field", "words"),
    [
        ('[{ name = "eth0", address = "10.0.0.1" }]', "node[0].nics[0].rail", "missing"),
        ('[{ name = "eth0", address = "nic-a", rail = 0 }]', "nics[0].address", "not an IP"),
        ('[{ name = "eth/0", address = "10.0.0.1", rail = 0 }]', "nics[0].name", "interface"),
        ('[{ name = "eth0", address = "10.0.0.1", rail = -1 }]', "nics[0].rail", ">= 0"),
        ('[{ name = "e", address = "10.0.0.1", rail = 0, speed = 1 }]', "nics[0].speed", "unknown"),
        (
            '[{ name = "a", address = "10.0.0.1", rail = 0 }, '
            '{ name = "b", address = "10.0.0.2", rail = 0 }]',
            "nics[1].rail",
            "rail 0 is also NIC 'a' of node 'h1'",
        ),
        ('{ name = "a" }', "node[0].nics", "array of tables"),
    ],
)
def test_bad_nics_name_file_node_and_field(
    tmp_path: Path, nics: str, field: str, words: str
) -> None:
    path = tmp_path / "inv.toml"
    path.write_text(f'[[node]]\nname = "h1"\naddress = "10.9.0.1"\nnics = {nics}\n')
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    text = str(caught.value)
    assert str(path) in text and field in text and words in text, text


def test_a_nic_address_used_twice_names_both(tmp_path: Path) -> None:
    path = tmp_path / "inv.toml"
    one = '[[node]]\nname = "{n}"\naddress = "10.9.0.{i}"\n'
    nic = 'nics = [{{ name = "eth1", address = "10.1.0.1", rail = 1 }}]\n'
    path.write_text((one + nic).format(n="a", i=1) + (one + nic).format(n="b", i=2))
    with pytest.raises(InventoryError, match=r"node\[1\]\.nics\[0\]\.address.*also NIC a/eth1"):
        load_inventory(path)


def _ends(sched: object) -> list[tuple[str, str]]:
    from netqual.planning.schedule import Schedule

    assert isinstance(sched, Schedule)
    return [(a.name, b.name) for r in sched.rounds() for a, b in r]


def _nodes(tmp_path: Path, n: int = 4, rails: int = 2) -> tuple[Node, ...]:
    return load_inventory(_inventory(tmp_path, n, rails)).nodes


def test_same_pairs_rail_i_with_rail_i_in_rounds_disjoint_per_nic(tmp_path: Path) -> None:
    sched = build(_nodes(tmp_path, 4), Mode.FULL_MESH, Rails.SAME)
    pairs = _ends(sched)
    assert sched.pair_count == len(pairs) == 6 * 2
    assert all(a.split("/")[1] == b.split("/")[1] for a, b in pairs)  # eth0-eth0, eth1-eth1
    assert ("h1/eth1", "h2/eth1") in pairs and ("h1/eth0", "h2/eth1") not in pairs
    for r in sched.rounds():
        used = [e.name for pair in r for e in pair]
        assert len(used) == len(set(used))  # no NIC twice in a round
    # the two rails of one node pair share its round: 3 rounds, as for the nodes alone
    assert sched.round_count == 3


def test_all_pairs_every_nic_pair_between_nodes(tmp_path: Path) -> None:
    sched = build(_nodes(tmp_path, 3), Mode.FULL_MESH, Rails.ALL)
    pairs = _ends(sched)
    assert len(pairs) == 3 * 4 and len(set(pairs)) == 12
    assert all(split_endpoint(a)[0] != split_endpoint(b)[0] for a, b in pairs)
    for r in sched.rounds():
        used = [e.name for pair in r for e in pair]
        assert len(used) == len(set(used))


def test_none_is_one_address_per_node(tmp_path: Path) -> None:
    sched = build(_nodes(tmp_path, 4), Mode.FULL_MESH, Rails.NONE)
    assert _ends(sched)[0] == ("h1", "h4") and sched.pair_count == 6


def test_rails_need_every_nodes_nics(tmp_path: Path) -> None:
    nodes = (*_nodes(tmp_path, 2), Node(name="bare", address="10.0.0.9"))
    with pytest.raises(UsageError, match=r"node\(s\) bare list no nics"):
        build(nodes, Mode.FULL_MESH, Rails.SAME)


def test_dry_run_shows_endpoints_and_pairs_per_rail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = _inventory(tmp_path, 3)
    r = run_in_process(["run", str(inv), "--dry-run", "--no-bulk"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert "nodes 3  mode full-mesh" in r.stdout
    assert "rounds 3  pairs 6" in r.stdout
    assert "rails same: probes NIC to NIC, rounds disjoint per NIC" in r.stdout
    assert (
        "  rail 0: 3 pairs; h1/eth0 198.18.10.1, h2/eth0 198.18.10.2, h3/eth0 198.18.10.3"
        in r.stdout
    )
    assert "  rail 1: 3 pairs; h1/eth1 198.18.11.1" in r.stdout
    # one agent per node, as `check` finds them: not one per NIC (issue 36: "8 agents")
    assert "one pass over 3 agents" in r.stdout, r.stdout
    r = run_in_process(
        ["run", str(inv), "--dry-run", "--json", "--rails", "all"], tmp_path, monkeypatch, capsys
    )
    d = json.loads(r.stdout)
    assert d["rails"] == "all" and d["pairs"] == 12
    assert [(x["rail"], x["pairs"]) for x in d["per_rail"]] == [(0, 3), (1, 3), (None, 6)]
    r = run_in_process(
        ["run", str(inv), "--dry-run", "--json", "--rails", "none"], tmp_path, monkeypatch, capsys
    )
    assert json.loads(r.stdout)["per_rail"] == [] and json.loads(r.stdout)["pairs"] == 3


def test_dry_run_uses_the_nic_rate_the_inventory_states_for_every_nic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: a rails run with nic_gbps = 0.5 was estimated at 100 Gbit/s."""
    text = "\n".join(_node(i).replace("\nnics =", "\nnic_gbps = 0.5\nnics =") for i in range(1, 5))
    inv = tmp_path / "inv.toml"
    inv.write_text(text)
    r = run_in_process(["run", str(inv), "--dry-run"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stdout.split())
    assert "bulk request at <= 0.5 Gbit/s" in said, r.stdout
    slow = json.loads(
        run_in_process(
            ["run", str(inv), "--dry-run", "--json"], tmp_path, monkeypatch, capsys
        ).stdout
    )
    inv.write_text(text.replace("nic_gbps = 0.5\n", ""))
    fast = json.loads(
        run_in_process(
            ["run", str(inv), "--dry-run", "--json"], tmp_path, monkeypatch, capsys
        ).stdout
    )
    # 1 MiB x depth 8 at 10 Gbit/s (the TCP model) vs at 0.5: the bulk phase takes far longer
    assert (
        slow["estimate"]["phases"]["bulk"]["unit_s"]
        > 10 * fast["estimate"]["phases"]["bulk"]["unit_s"]
    )


def test_bad_rails_value_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = _inventory(tmp_path, 2)
    r = run_in_process(
        ["run", str(inv), "--dry-run", "--rails", "some"], tmp_path, monkeypatch, capsys
    )
    assert r.returncode == 2
    assert "--rails" in r.stderr and "same, all or none" in r.stderr


def test_rail_plans_count_pairs_per_rail(tmp_path: Path) -> None:
    plans = rail_plans(build(_nodes(tmp_path, 4, rails=3), Mode.FULL_MESH, Rails.SAME))
    assert [(p.rail, p.pairs, len(p.endpoints)) for p in plans] == [(0, 6, 4), (1, 6, 4), (2, 6, 4)]


def _path(src: str, dst: str, **nics: object) -> PathResult:
    return PathResult(src, dst, "tcp", Verdict.SAFE, ("ok",), **nics)  # type: ignore[arg-type]


def test_path_nic_fields_survive_the_table_and_old_paths_have_none() -> None:
    table = PathTable.from_paths(
        [_path("h1/eth1", "h2/eth1", src_nic="eth1", dst_nic="eth1", rail=1), _path("a", "b")]
    )
    assert table.nics is not None and table.nics.rails() == [1]
    one, two = table.row(0), table.row(1)
    assert (one.src_nic, one.dst_nic, one.rail) == ("eth1", "eth1", 1)
    assert (two.src_nic, two.dst_nic, two.rail) == (None, None, None)
    assert table.take([1, 0]).row(1).rail == 1
    assert PathTable.from_paths([_path("a", "b")]).nics is None


def test_results_file_keeps_nics_and_old_files_load(tmp_path: Path) -> None:
    res = rail_results(3)
    write_json(tmp_path / "results.json", res)
    raw = json.loads((tmp_path / "results.json").read_text())
    first = raw["paths"][0]
    assert (first["src"], first["src_nic"], first["dst_nic"], first["rail"]) == (
        "h1/eth0", "eth0", "eth0", 0,
    )  # fmt: skip
    assert raw["nodes"][1]["agent"] == "h1" and raw["nodes"][1]["nic"]["name"] == "eth1"
    back = load(tmp_path / "results.json")
    assert back.paths.row(0).rail == 0 and back.nodes[1].nic == res.nodes[1].nic
    assert back.nodes[1].agent == "h1" and back.nodes[1].agent_address == "198.18.0.1"
    for p in raw["paths"]:  # a file from before rails: no NIC keys at all
        for key in ("src_nic", "dst_nic", "rail"):
            del p[key]
    (tmp_path / "old.json").write_text(json.dumps(raw))
    old = load(tmp_path / "old.json")
    assert old.paths.nics is None and old.paths.row(0).rail is None


def _kinds(res: Results) -> list[tuple[str, str]]:
    return [(s.kind.value, s.subject) for s in res.suspects or ()]


def test_one_slow_nic_is_a_nic_suspect_and_its_other_rail_is_fine() -> None:
    res = rail_results(4, slow={("h3", 1): 700.0})
    assert _kinds(res) == [("nic", "h3/eth1")]
    (s,) = res.suspects or ()
    e = s.evidence
    assert isinstance(e, NicEvidence)
    assert e.node == "h3" and e.rail == 1
    assert e.bad_paths == e.paths == 3
    (other,) = e.other_nics
    assert other.nic == "eth0" and other.bad_paths == 0 and other.paths == 3


def test_a_whole_rail_is_a_rail_suspect_and_a_whole_node_a_node_suspect() -> None:
    plane = rail_results(4, slow={(f"h{i}", 1): 700.0 for i in range(1, 5)})
    assert _kinds(plane) == [("rail", "rail 1")]
    assert plane.suspects and isinstance(ev := plane.suspects[0].evidence, RailEvidence)
    assert ev.bad_nics == ("h1/eth1", "h2/eth1", "h3/eth1", "h4/eth1")
    host = rail_results(4, slow={("h2", 0): 700.0, ("h2", 1): 700.0})
    assert _kinds(host) == [("node", "h2")]


def test_terminal_reads_per_rail_and_names_the_nic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json(tmp_path / "results.json", rail_results(4, slow={("h3", 1): 700.0}))
    r = run_in_process(["report", "results.json"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert "| 8 NICs on 4 nodes |" in " ".join(r.stdout.split())
    # the report says the same (it said "8 nodes in 1 rack")
    h = run_in_process(
        ["report", "results.json", "--html", "r.html"], tmp_path, monkeypatch, capsys
    )
    assert h.returncode == 0, h.stderr
    assert "Cluster: <b>8 NICs on 4 nodes in 1 rack," in (tmp_path / "r.html").read_text()
    assert "by rail (us)" in r.stdout
    rows = {
        " ".join(cells[:2]): cells[2:]
        for x in r.stdout.splitlines()
        if (cells := x.replace("│", " ").split())[:1] == ["rail"]
    }
    # paths, p50 median, p99 worst, safe, marginal, unsafe
    assert rows["rail 0"] == ["6", "30.0", "60.0", "6", "0", "0"], r.stdout
    assert rows["rail 1"] == ["6", "190.0", "700.0", "3", "0", "3"], r.stdout
    text = " ".join(r.stdout.split())  # the suspect line wraps at 100 columns
    assert (
        "nic h3/eth1: 3 of 3 paths not offload-safe, same-rack p99 700.0 us vs 60.0 us on its "
        "peers, x11.7 > x1.20 (floor); worst h1/eth1 -> h3/eth1 p99 700.0 us (unsafe); other "
        "rails of h3: eth0 (rail 0) 0 of 3 bad, median p99 60.0 us" in text
    ), r.stdout


def test_gate_scopes_by_rail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json(tmp_path / "r.json", rail_results(4, slow={("h3", 1): 700.0}))
    prof = '[profile]\nname = "rails"\n[limits]\nmax_unsafe = 100\n'
    for rail, rc in ((0, 0), (1, 1)):
        (tmp_path / "p.toml").write_text(
            prof + f'[[scope]]\nname = "rail {rail}"\nrails = [{rail}]\nmax_unsafe = 0\n'
        )
        r = run_in_process(["gate", "r.json", "--profile", "p.toml"], tmp_path, monkeypatch, capsys)
        assert r.returncode == rc, r.stdout + r.stderr
    assert "rail 1: max_unsafe" in r.stdout and "h3/eth1" in r.stdout
    (tmp_path / "p.toml").write_text(prof + '[[scope]]\nname = "x"\nrails = ["one"]\n')
    r = run_in_process(["gate", "r.json", "--profile", "p.toml"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 2 and "scope[0].rails: expected a list of rail numbers" in r.stderr


def test_multirail_verdict_names_the_rail_that_adds_too_little() -> None:
    # Mooncake #1617 in Gbit/s: 1 NIC 384, 2 NICs 768, 3 NICs 1,080, 4 NICs 944
    levels = [RailLevel(1, (384.0,), 384.0, None)]
    for k, total in ((2, 768.0), (3, 1080.0), (4, 944.0)):
        prev = levels[-1].aggregate_gbps
        assert prev is not None
        levels.append(RailLevel(k, (), total, total - prev))
    verdict, short = judge(levels, 400.0, 0.5)
    assert short
    assert verdict == (
        "going from 3 to 4 rails adds -136.00 Gbit/s, less than 50% of one rail's 400 Gbit/s "
        "line rate: more rails do not add bandwidth on this pair"
    )
    ok, short_ok = judge(levels[:2], 400.0, 0.5)
    assert (
        not short_ok
        and ok == "each added rail adds at least 50% of one rail's 400 Gbit/s line rate"
    )
    failed = [levels[0], RailLevel(2, (0.0, 0.0), None, None, "rail 1: refused")]
    assert judge(failed, 400.0, 0.5) == (
        "not judged: 2 rails at once failed (rail 1: refused)",
        False,
    )


def test_node_nics_reads_a_node_list_and_a_runs_endpoints() -> None:
    res = rail_results(2)
    from_endpoints = node_nics(res.nodes)  # the run lists h1/eth0, h1/eth1, ...
    assert [n.name for n in from_endpoints["h1"]] == ["eth0", "eth1"]
    node = Node("h9", "10.0.0.9", nics=(Nic("eth3", "10.3.0.9", 3),))
    assert node_nics([node]) == {"h9": node.nics}


@pytest.mark.parametrize("width", [80, 100, 120])
def test_matrix_labels_keep_node_and_rail_at_any_width(width: int) -> None:
    # issue: at 80-120 columns every label was cut to "h1/to-ra…": rail 0's and rail 1's
    # rows and columns read the same. Cut in the middle, each keeps its node and its rail.
    console = LiteralConsole(width=width)
    console.file = io.StringIO()
    print_results(console, rail_results(4, nic_name="to-rail{rail}"))
    lines = console.file.getvalue().splitlines()
    at = lines.index("p99 RTT (us): row = source, column = destination")
    header = lines[at + 2].replace("┃", " ").split()
    rows = [x.replace("│", " ").split()[0] for x in lines[at + 4 : at + 12]]
    ends = [f"h{i}/to-rail{r}" for r in range(2) for i in range(1, 5)]
    for labels in (header, rows):
        assert len(labels) == len(ends) and len(set(labels)) == len(ends), (labels, lines)
        for label, end in zip(labels, ends, strict=True):
            head, _, tail = label.partition("…")
            assert end.startswith(head) and end.endswith(tail), (label, end)
            assert label.startswith(end.split("/")[0] + "/") and label[-1] == end[-1]
    assert all(len(x) <= width for x in lines[at : at + 13])
    if width == 120:
        assert rows == ends  # room for the whole names
